/* path_finder.c — breadth-first search with two FIFO queues: normal references first; Java
 * locals, low-priority roots and library-leak references only once no normal path is left.
 * Per object it keeps one parent index and one state byte; edge details are recovered for
 * reported paths by re-reading the parent's references in the same deterministic order. */
#include "path_finder.h"

#include <stdlib.h>

#include "heap_objects.h"
#include "reference_matchers.h"

/* ---- one walker over an object's references, shared by traversal and recovery ------------- */

typedef struct {
    lw_ref_kind kind;
    const lw__ref_field *field;    /* instance field */
    const lw__static_field *stat;  /* static field */
    uint64_t index;                /* array slot or local index */
    uint32_t owner;
} ref_site;

/* Visitor: returns nonzero to stop the walk. */
typedef int (*visit_fn)(void *user, uint32_t target, int low, const ref_site *site);

static inline void walk_refs(const lw_heap *heap, const lw__paths *paths, uint32_t dense, visit_fn fn, void *user) {
    const unsigned ids = heap->hprof.id_size;
    if (dense >= heap->object_count) {
        uint32_t ci = dense - (uint32_t)heap->object_count;
        const lw__class *c = &heap->classes[ci];
        for (uint32_t i = 0; i < c->static_count; i++) {
            const lw__static_field *s = &heap->statics[c->static_first + i];
            if (s->type != LW_T_OBJECT || s->value == 0 || s->match == LW_MATCH_IGNORED) continue;
            uint32_t t = lw__heap_lookup(heap, s->value);
            if (t == LW_NONE) continue;
            ref_site site = {LW_REF_STATIC_FIELD, NULL, s, 0, ci};
            if (fn(user, t, s->match == LW_MATCH_LIBRARY, &site)) return;
        }
        return;
    }
    uint64_t off = heap->offset32 ? heap->offset32[dense] : heap->offset64[dense];
    const uint8_t *d = heap->hprof.data + off;
    switch (d[0]) {
    case LW_SUB_INSTANCE_DUMP: {
        uint32_t ci = lw__heap_class_by_id(heap, lw__be_id(d + 5 + ids, ids));
        if (ci == LW_NONE) return;
        const lw__class *c = &heap->classes[ci];
        if ((c->flags & LW_CLASS_THREAD) && paths && paths->local_count) {
            /* Java locals of a thread come first, always at low priority. */
            size_t lo = 0, hi = paths->local_count;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (paths->locals[mid].thread < dense) lo = mid + 1;
                else hi = mid;
            }
            for (size_t i = lo; i < paths->local_count && paths->locals[i].thread == dense; i++) {
                ref_site site = {LW_REF_LOCAL, NULL, NULL, i, ci};
                if (fn(user, paths->locals[i].target, 1, &site)) return;
            }
        }
        uint64_t len = lw__be32(d + 5 + 2 * ids);
        const uint8_t *data = d + 9 + 2 * ids;
        const lw__ref_field *rf = c->ref_count ? heap->ref_fields + c->ref_first : NULL;
        for (uint32_t i = 0; i < c->ref_count; i++) {
            if ((uint64_t)rf[i].offset + ids > len) continue;
            uint64_t v = lw__be_id(data + rf[i].offset, ids);
            if (!v) continue;
            uint32_t t = lw__heap_lookup(heap, v);
            if (t == LW_NONE) continue;
            ref_site site = {LW_REF_INSTANCE_FIELD, &rf[i], NULL, 0, rf[i].declaring_class};
            if (fn(user, t, rf[i].match == LW_MATCH_LIBRARY, &site)) return;
        }
        return;
    }
    case LW_SUB_OBJECT_ARRAY_DUMP: {
        uint32_t count = lw__be32(d + 5 + ids);
        uint32_t ci = lw__heap_class_by_id(heap, lw__be_id(d + 9 + ids, ids));
        if (ci != LW_NONE && (heap->classes[ci].flags & LW_CLASS_BOXED_ARRAY)) return;
        const uint8_t *e = d + 9 + 2 * ids;
        for (uint32_t i = 0; i < count; i++) {
            uint64_t v = lw__be_id(e + (uint64_t)i * ids, ids);
            if (!v) continue;
            uint32_t t = lw__heap_lookup(heap, v);
            if (t == LW_NONE) continue;
            ref_site site = {LW_REF_ARRAY_ELEMENT, NULL, NULL, i, ci};
            if (fn(user, t, 0, &site)) return;
        }
        return;
    }
    default:
        return; /* primitive arrays hold no references */
    }
}

/* ---- queues --------------------------------------------------------------------------------- */

typedef struct {
    uint32_t *items;
    size_t head, size, cap;
} queue;

static int q_push(queue *q, uint32_t v) {
    if (q->size == q->cap) {
        if (q->head > 0 && q->head >= q->size / 2) {
            memmove(q->items, q->items + q->head, (q->size - q->head) * sizeof *q->items);
            q->size -= q->head;
            q->head = 0;
        } else {
            size_t cap = q->cap ? q->cap * 2 : 4096;
            uint32_t *n = lw__realloc(q->items, cap * sizeof *n);
            if (!n) return -1;
            q->items = n;
            q->cap = cap;
        }
    }
    q->items[q->size++] = v;
    return 0;
}

static inline int q_empty(const queue *q) { return q->head == q->size; }
static inline uint32_t q_pop(queue *q) { return q->items[q->head++]; }

/* ---- traversal -------------------------------------------------------------------------------- */

typedef struct {
    lw__paths *p;
    queue high, low;
    int visiting_last;
    int failed;
    uint32_t current;
} bfs;

static inline void enqueue(bfs *b, uint32_t child, uint32_t parent, int edge_low) {
    lw__paths *p = b->p;
    uint8_t st = p->state[child];
    int last = b->visiting_last || edge_low;
    if (st & LW__VISITED) {
        if (!last && (st & LW__LOW_PENDING)) {
            /* A normal path reached an object waiting in the low queue: it moves up. */
            p->parent[child] = parent;
            p->state[child] = (uint8_t)(st & ~(LW__LOW_PENDING | LW__EDGE_LOW));
            if (q_push(&b->high, child)) b->failed = 1;
        }
        return;
    }
    p->parent[child] = parent;
    st |= LW__VISITED;
    if (edge_low) st |= LW__EDGE_LOW;
    if (last) {
        st |= LW__LOW_PENDING;
        if (q_push(&b->low, child)) b->failed = 1;
    } else if (q_push(&b->high, child)) {
        b->failed = 1;
    }
    p->state[child] = st;
}

static int visit_child(void *user, uint32_t target, int low, const ref_site *site) {
    (void)site;
    bfs *b = user;
    b->p->references++;
    enqueue(b, target, b->current, low);
    return 0;
}

/* Shark's order: thread objects first, then by root type name descending. */
static int root_rank(uint8_t tag) {
    switch (tag) {
    case LW_SUB_ROOT_THREAD_OBJECT: return 0;
    case LW_SUB_ROOT_VM_INTERNAL: return 1;
    case LW_SUB_ROOT_UNREACHABLE: return 2;
    case LW_SUB_ROOT_UNKNOWN: return 3;
    case LW_SUB_ROOT_THREAD_BLOCK: return 4;
    case LW_SUB_ROOT_STICKY_CLASS: return 5;
    case LW_SUB_ROOT_REFERENCE_CLEANUP: return 6;
    case LW_SUB_ROOT_NATIVE_STACK: return 7;
    case LW_SUB_ROOT_MONITOR_USED: return 8;
    case LW_SUB_ROOT_JNI_MONITOR: return 9;
    case LW_SUB_ROOT_JNI_LOCAL: return 10;
    case LW_SUB_ROOT_JNI_GLOBAL: return 11;
    case LW_SUB_ROOT_JAVA_FRAME: return 12;
    case LW_SUB_ROOT_INTERNED_STRING: return 13;
    case LW_SUB_ROOT_FINALIZING: return 14;
    default: return 15;
    }
}

/* The root kinds LeakCanary follows by default; the others (VM internal, interned strings,
 * unknown...) would hide real paths behind VM bookkeeping. */
static int root_indexed(uint8_t tag) {
    switch (tag) {
    case LW_SUB_ROOT_JNI_GLOBAL: case LW_SUB_ROOT_JAVA_FRAME: case LW_SUB_ROOT_JNI_LOCAL:
    case LW_SUB_ROOT_MONITOR_USED: case LW_SUB_ROOT_NATIVE_STACK: case LW_SUB_ROOT_STICKY_CLASS:
    case LW_SUB_ROOT_THREAD_BLOCK: case LW_SUB_ROOT_THREAD_OBJECT: case LW_SUB_ROOT_JNI_MONITOR:
        return 1;
    default:
        return 0;
    }
}

typedef struct {
    lw__path_root root;
    const char *class_name;
    size_t order;
} sortable_root;

static int cmp_roots(const void *a, const void *b) {
    const sortable_root *x = a, *y = b;
    int rx = root_rank(x->root.tag), ry = root_rank(y->root.tag);
    if (rx != ry) return rx - ry;
    int c = strcmp(x->class_name, y->class_name);
    if (c) return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_class_names(const void *a, const void *b, void *heap_) {
    const lw_heap *heap = heap_;
    const uint32_t *x = a, *y = b;
    int c = strcmp(heap->classes[*x].name, heap->classes[*y].name);
    return c ? c : (*x < *y ? -1 : *x > *y);
}

static int cmp_local(const void *a, const void *b) {
    const lw__local *x = a, *y = b;
    return x->thread < y->thread ? -1 : x->thread > y->thread;
}

typedef struct {
    uint32_t serial;
    uint32_t dense;
} thread_serial;

static int cmp_serial(const void *a, const void *b) {
    const thread_serial *x = a, *y = b;
    return x->serial < y->serial ? -1 : x->serial > y->serial;
}

static uint32_t thread_by_serial(const thread_serial *t, size_t n, uint32_t serial) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].serial < serial) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && t[lo].serial == serial ? t[lo].dense : LW_NONE;
}

static lw_status build_roots(lw_heap *heap, lw__paths *p, lw_error *err) {
    lw_status st = LW_OK;
    size_t nthreads = 0;
    thread_serial *threads = lw__malloc((heap->root_count + 1) * sizeof *threads);
    sortable_root *sr = lw__malloc((heap->root_count + 1) * sizeof *sr);
    uint32_t *cls = lw__malloc(((size_t)heap->class_count + 1) * sizeof *cls);
    p->locals = lw__malloc((heap->root_count + 1) * sizeof *p->locals);
    p->roots = lw__malloc((heap->root_count + heap->class_count + 1) * sizeof *p->roots);
    if (!threads || !sr || !cls || !p->locals || !p->roots) {
        st = lw__fail(err, LW_ERR_NOMEM, "out of memory ordering GC roots");
        goto out;
    }
    for (size_t i = 0; i < heap->root_count; i++) {
        const lw__root *r = &heap->roots[i];
        if (r->tag != LW_SUB_ROOT_THREAD_OBJECT) continue;
        uint32_t d = lw__heap_lookup(heap, r->id);
        if (d != LW_NONE) threads[nthreads++] = (thread_serial){r->a, d};
    }
    qsort(threads, nthreads, sizeof *threads, cmp_serial);
    size_t n = 0;
    for (size_t i = 0; i < heap->root_count; i++) {
        const lw__root *r = &heap->roots[i];
        if (!root_indexed(r->tag)) continue;
        uint32_t d = lw__heap_lookup(heap, r->id);
        if (d == LW_NONE) continue;
        if (r->tag == LW_SUB_ROOT_JAVA_FRAME) {
            uint32_t th = thread_by_serial(threads, nthreads, r->a);
            if (th != LW_NONE) {
                p->locals[p->local_count++] = (lw__local){th, d};
                continue;
            }
        }
        lw__path_root root = {r->tag, d, r->tag == LW_SUB_ROOT_JAVA_FRAME, LW_MATCH_NORMAL, 0};
        lw__object o;
        lw__heap_object(heap, d, &o);
        if (r->tag == LW_SUB_ROOT_JNI_GLOBAL) {
            int m = lw__match_native_global(heap, o.class_index, &root.pattern);
            if (m == LW_MATCH_IGNORED) continue;
            if (m == LW_MATCH_LIBRARY) {
                root.low = 1;
                root.match = LW_MATCH_LIBRARY;
            }
        }
        sr[n++] = (sortable_root){root, lw__object_class_name(heap, &o), i};
    }
    qsort(sr, n, sizeof *sr, cmp_roots);
    for (size_t i = 0; i < n; i++) p->roots[p->root_count++] = sr[i].root;
    /* HotSpot marks only boot classes as roots: every loaded class is one here, so traces
     * start at the static field users know rather than at a class loader. */
    for (uint32_t i = 0; i < heap->class_count; i++) cls[i] = i;
    qsort_r(cls, heap->class_count, sizeof *cls, cmp_class_names, heap);
    for (uint32_t i = 0; i < heap->class_count; i++) {
        uint32_t d = (uint32_t)heap->object_count + cls[i];
        p->roots[p->root_count++] = (lw__path_root){LW_SUB_ROOT_STICKY_CLASS, d, 0, LW_MATCH_NORMAL, 0};
    }
    /* Locals of threads whose name is on the ignore list are dropped; stable by thread. */
    {
        size_t kept = 0;
        uint32_t last_thread = LW_NONE;
        int last_ignored = 0;
        for (size_t i = 0; i < p->local_count; i++) {
            if (p->locals[i].thread != last_thread) {
                last_thread = p->locals[i].thread;
                lw__object th;
                lw__heap_object(heap, last_thread, &th);
                char *name = lw__string_field(heap, &th, "name", 256);
                last_ignored = lw__match_java_local(heap, name, NULL) == LW_MATCH_IGNORED;
                lw__free(name);
            }
            if (!last_ignored) p->locals[kept++] = p->locals[i];
        }
        p->local_count = kept;
        /* merge sort keeps frame order per thread; qsort is not stable, so sort by (thread, order) */
        for (size_t i = 1; i < p->local_count; i++) {
            lw__local t = p->locals[i];
            size_t j = i;
            while (j > 0 && cmp_local(&p->locals[j - 1], &t) > 0) {
                p->locals[j] = p->locals[j - 1];
                j--;
            }
            p->locals[j] = t;
        }
    }
out:
    lw__free(threads);
    lw__free(sr);
    lw__free(cls);
    return st;
}

lw_status lw__find_paths(lw_heap *heap, const uint32_t *leaking, size_t leaking_count, int full, lw__paths *p,
                         lw_error *err) {
    memset(p, 0, sizeof *p);
    uint64_t n = lw__heap_dense_count(heap);
    p->dense_count = (uint32_t)n;
    lw_status st = LW_OK;
    bfs b = {.p = p};
    p->parent = lw__malloc((n ? n : 1) * sizeof *p->parent);
    p->state = lw__calloc(n ? n : 1, 1);
    p->found = lw__malloc((leaking_count + 1) * sizeof *p->found);
    if (!p->parent || !p->state || !p->found) {
        st = lw__fail(err, LW_ERR_NOMEM, "out of memory for the traversal of %llu objects", (unsigned long long)n);
        goto out;
    }
    st = build_roots(heap, p, err);
    if (st != LW_OK) goto out;
    size_t remaining = 0;
    for (size_t i = 0; i < leaking_count; i++)
        if (!(p->state[leaking[i]] & LW__LEAKING)) {
            p->state[leaking[i]] |= LW__LEAKING;
            remaining++;
        }
    for (size_t i = 0; i < p->root_count; i++) enqueue(&b, p->roots[i].dense, (uint32_t)(n + i), p->roots[i].low);
    uint64_t next_progress = 1u << 20;
    while (!b.failed && (remaining > 0 || full)) {
        uint32_t x;
        if (!b.visiting_last && !q_empty(&b.high)) {
            x = q_pop(&b.high);
        } else {
            b.visiting_last = 1;
            if (!q_empty(&b.high)) {
                x = q_pop(&b.high);
            } else if (!q_empty(&b.low)) {
                x = q_pop(&b.low);
                if (!(p->state[x] & LW__LOW_PENDING)) continue; /* moved to the high queue meanwhile */
                p->state[x] &= (uint8_t)~LW__LOW_PENDING;
            } else {
                break;
            }
        }
        if (p->state[x] & LW__FOUND) continue;
        if (p->state[x] & LW__LEAKING) {
            p->state[x] |= LW__FOUND;
            p->found[p->found_count++] = x;
            remaining--;
            continue; /* a leaking object is a leaf: no path goes through another one */
        }
        p->visited++;
        if (heap->progress && p->visited >= next_progress) {
            next_progress = p->visited + (1u << 20);
            heap->progress(heap->progress_user, "paths", p->visited, n);
        }
        b.current = x;
        walk_refs(heap, p, x, visit_child, &b);
    }
    if (b.failed) st = lw__fail(err, LW_ERR_NOMEM, "out of memory for the traversal queue");
out:
    lw__free(b.high.items);
    lw__free(b.low.items);
    if (st != LW_OK) lw__paths_free(p);
    return st;
}

void lw__paths_free(lw__paths *p) {
    if (!p) return;
    lw__free(p->parent);
    lw__free(p->state);
    lw__free(p->roots);
    lw__free(p->locals);
    lw__free(p->found);
    memset(p, 0, sizeof *p);
}

/* ---- edge recovery ---------------------------------------------------------------------------- */

typedef struct {
    uint32_t child;
    int low;
    int found;
    ref_site site;
    int site_low;
} edge_search;

static int find_edge(void *user, uint32_t target, int low, const ref_site *site) {
    edge_search *s = user;
    if (target != s->child || low != s->low) return 0;
    s->found = 1;
    s->site = *site;
    s->site_low = low;
    return 1;
}

int lw__paths_edge(const lw_heap *heap, const lw__paths *paths, uint32_t parent, uint32_t child, lw__edge *edge) {
    edge_search s = {child, (paths->state[child] & LW__EDGE_LOW) != 0, 0, {0}, 0};
    walk_refs(heap, paths, parent, find_edge, &s);
    if (!s.found) return 0;
    memset(edge, 0, sizeof *edge);
    edge->kind = s.site.kind;
    edge->owner_class = s.site.owner;
    edge->match = LW_MATCH_NORMAL;
    switch (s.site.kind) {
    case LW_REF_INSTANCE_FIELD:
        edge->name = s.site.field->name;
        edge->match = s.site.field->match;
        edge->pattern = s.site.field->pattern;
        break;
    case LW_REF_STATIC_FIELD:
        edge->name = s.site.stat->name;
        edge->match = s.site.stat->match;
        edge->pattern = s.site.stat->pattern;
        break;
    case LW_REF_ARRAY_ELEMENT:
        edge->index = s.site.index;
        break;
    case LW_REF_LOCAL:
        edge->index = s.site.index;
        break;
    }
    return 1;
}

typedef struct {
    lw__ref_fn fn;
    void *user;
} ref_forward;

static int forward(void *user, uint32_t target, int low, const ref_site *site) {
    (void)site;
    ref_forward *f = user;
    f->fn(f->user, target, low);
    return 0;
}

void lw__for_each_ref(const lw_heap *heap, const lw__paths *paths, uint32_t dense, lw__ref_fn fn, void *user) {
    ref_forward f = {fn, user};
    walk_refs(heap, paths, dense, forward, &f);
}
