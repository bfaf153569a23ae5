/* heap_index.c — pass 1: scan the mapped dump once for its structure and once to fill the
 * object table; resolve classes, names and field layouts. */
#include "heap_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "java_names.h"
#include "reference_matchers.h"

/* ---- name arena: NUL-terminated names in 64 KiB chunks, freed together ---------------- */

struct lw__name_arena {
    struct lw__name_arena *next;
    size_t used, cap;
    char data[];
};

const char *lw__heap_intern(lw_heap *heap, const char *s, size_t len) {
    lw__name_arena *a = heap->names;
    if (!a || a->cap - a->used < len + 1) {
        size_t cap = len + 1 > 65536 ? len + 1 : 65536;
        lw__name_arena *n = lw__malloc(sizeof *n + cap);
        if (!n) return NULL;
        n->next = a;
        n->used = 0;
        n->cap = cap;
        heap->names = a = n;
    }
    char *d = a->data + a->used;
    memcpy(d, s, len);
    d[len] = 0;
    a->used += len + 1;
    return d;
}

static void free_arena(lw__name_arena *a) {
    while (a) {
        lw__name_arena *n = a->next;
        lw__free(a);
        a = n;
    }
}

/* ---- growable arrays used while scanning ---------------------------------------------- */

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *n = lw__realloc(*p, c * elem);
    if (!n) return -1;
    *p = n;
    *cap = c;
    return 0;
}

typedef struct {
    uint64_t class_id;
    uint64_t name_id;
} load_class;

typedef struct {
    uint64_t body, end;
} segment;

typedef struct {
    uint64_t id, offset;
} id_offset;

typedef struct {
    lw_heap *heap;
    lw_error *err;
    load_class *loads;
    size_t nloads, loads_cap;
    segment *segs;
    size_t nsegs, segs_cap;
    size_t strings_cap, roots_cap, classes_cap, kwr_cap;
    uint64_t objects;        /* instances and arrays */
    uint64_t min_id, max_id;
    int sorted;
    uint64_t last_id;
    uint64_t kwr_class_ids[3];
    unsigned nkwr_classes;
    uint64_t next_progress;
} builder;

static void progress(builder *b, uint64_t done) {
    lw_heap *heap = b->heap;
    if (!heap->progress || done < b->next_progress) return;
    b->next_progress = done + (64u << 20);
    heap->progress(heap->progress_user, "index", done, heap->hprof.size * 2);
}

static int cmp_string(const void *a, const void *b) {
    const lw__string_ref *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_load(const void *a, const void *b) {
    const load_class *x = a, *y = b;
    return x->class_id < y->class_id ? -1 : x->class_id > y->class_id;
}

static int cmp_id_offset(const void *a, const void *b) {
    const id_offset *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* ---- scan 1: structure ------------------------------------------------------------------ */

static lw_status scan_structure(builder *b) {
    lw_heap *heap = b->heap;
    const lw__hprof *h = &heap->hprof;
    const unsigned ids = h->id_size;
    lw__record rec;
    uint64_t pos = h->records_start;
    int r;
    b->min_id = UINT64_MAX;
    b->sorted = 1;
    while ((r = lw__hprof_record_at(h, pos, &rec, b->err)) == 1) {
        heap->summary.records++;
        progress(b, pos / 2);
        switch (rec.tag) {
        case LW_TAG_STRING:
            if (rec.length < ids)
                return lw__fail(b->err, LW_ERR_FORMAT, "offset %llu: STRING record shorter than an id", (unsigned long long)pos);
            if (rec.length - ids > UINT32_MAX)
                return lw__fail(b->err, LW_ERR_FORMAT, "offset %llu: STRING record too long", (unsigned long long)pos);
            if (grow((void **)&heap->strings, &b->strings_cap, heap->string_count + 1, sizeof *heap->strings))
                return lw__fail(b->err, LW_ERR_NOMEM, "out of memory indexing strings");
            heap->strings[heap->string_count++] =
                (lw__string_ref){lw__be_id(h->data + rec.body, ids), rec.body + ids, (uint32_t)(rec.length - ids)};
            break;
        case LW_TAG_LOAD_CLASS:
            if (rec.length < 8 + 2 * (uint64_t)ids)
                return lw__fail(b->err, LW_ERR_FORMAT, "offset %llu: LOAD_CLASS record too short (%llu bytes)",
                                (unsigned long long)pos, (unsigned long long)rec.length);
            if (grow((void **)&b->loads, &b->loads_cap, b->nloads + 1, sizeof *b->loads))
                return lw__fail(b->err, LW_ERR_NOMEM, "out of memory indexing classes");
            b->loads[b->nloads++] =
                (load_class){lw__be_id(h->data + rec.body + 4, ids), lw__be_id(h->data + rec.body + 8 + ids, ids)};
            heap->summary.load_classes++;
            break;
        case LW_TAG_STACK_FRAME: heap->summary.stack_frames++; break;
        case LW_TAG_STACK_TRACE: heap->summary.stack_traces++; break;
        case LW_TAG_HEAP_DUMP:
        case LW_TAG_HEAP_DUMP_SEGMENT: {
            heap->summary.heap_dump_segments++;
            uint64_t end = rec.body + rec.length;
            if (grow((void **)&b->segs, &b->segs_cap, b->nsegs + 1, sizeof *b->segs))
                return lw__fail(b->err, LW_ERR_NOMEM, "out of memory");
            b->segs[b->nsegs++] = (segment){rec.body, end};
            uint64_t p = rec.body;
            lw__subrecord sub;
            while (p < end) {
                if (lw__hprof_subrecord_at(h, p, end, &sub, b->err) < 0) return LW_ERR_FORMAT;
                const uint8_t *d = h->data + p;
                switch (sub.tag) {
                case LW_SUB_CLASS_DUMP:
                    if (heap->class_count == UINT32_MAX - 1)
                        return lw__fail(b->err, LW_ERR_LIMIT, "offset %llu: too many classes", (unsigned long long)p);
                    if (grow((void **)&heap->classes, &b->classes_cap, heap->class_count + 1, sizeof *heap->classes))
                        return lw__fail(b->err, LW_ERR_NOMEM, "out of memory indexing classes");
                    heap->classes[heap->class_count++] = (lw__class){.id = lw__be_id(d + 1, ids), .dump_offset = p,
                                                                    .dump_length = sub.length, .super_index = LW_NONE};
                    break;
                case LW_SUB_INSTANCE_DUMP:
                case LW_SUB_OBJECT_ARRAY_DUMP:
                case LW_SUB_PRIMITIVE_ARRAY_DUMP:
                case LW_SUB_PRIMITIVE_ARRAY_NODATA: {
                    uint64_t id = lw__be_id(d + 1, ids);
                    if (sub.tag == LW_SUB_INSTANCE_DUMP) heap->summary.instances++;
                    else if (sub.tag == LW_SUB_OBJECT_ARRAY_DUMP) heap->summary.object_arrays++;
                    else heap->summary.primitive_arrays++;
                    if (b->objects && id <= b->last_id) b->sorted = 0;
                    b->last_id = id;
                    if (id < b->min_id) b->min_id = id;
                    if (id > b->max_id) b->max_id = id;
                    b->objects++;
                    break;
                }
                case LW_SUB_HEAP_DUMP_INFO:
                    break;
                default: { /* a root */
                    uint64_t id = lw__be_id(d + 1, ids);
                    if (id == 0) break;
                    if (grow((void **)&heap->roots, &b->roots_cap, heap->root_count + 1, sizeof *heap->roots))
                        return lw__fail(b->err, LW_ERR_NOMEM, "out of memory indexing roots");
                    lw__root root = {sub.tag, id, 0, 0};
                    int extra = lw__root_extra_bytes(sub.tag, ids);
                    if (sub.tag != LW_SUB_ROOT_JNI_GLOBAL && extra >= 4) root.a = lw__be32(d + 1 + ids);
                    if (extra == 8 && sub.tag != LW_SUB_ROOT_JNI_GLOBAL) root.b = lw__be32(d + 5 + ids);
                    heap->roots[heap->root_count++] = root;
                    break;
                }
                }
                p += sub.length;
            }
            break;
        }
        default:
            break;
        }
        pos = rec.body + rec.length;
    }
    if (r < 0) return LW_ERR_FORMAT;
    if (b->objects > UINT32_MAX - 1 - (uint64_t)heap->class_count)
        return lw__fail(b->err, LW_ERR_LIMIT, "%llu objects: more than this analyzer's limit of 2^32 - 1",
                        (unsigned long long)(b->objects + heap->class_count));
    heap->summary.classes = heap->class_count;
    heap->summary.gc_roots = heap->root_count;
    heap->summary.strings = heap->string_count;
    return LW_OK;
}

/* ---- classes ------------------------------------------------------------------------------ */

static uint64_t hash_id(uint64_t id) {
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return id;
}

uint32_t lw__heap_class_by_id(const lw_heap *heap, uint64_t id) {
    if (!heap->class_slots) return LW_NONE;
    for (uint64_t s = hash_id(id) & heap->class_slot_mask;; s = (s + 1) & heap->class_slot_mask) {
        uint32_t v = heap->class_slots[s];
        if (v == 0) return LW_NONE;
        if (heap->classes[v - 1].id == id) return v - 1;
    }
}

uint32_t lw__heap_class_by_name(const lw_heap *heap, const char *name) {
    for (uint32_t i = 0; i < heap->class_count; i++)
        if (heap->classes[i].name && strcmp(heap->classes[i].name, name) == 0) return i;
    return LW_NONE;
}

const char *lw__heap_string(const lw_heap *heap, uint64_t id, uint32_t *len) {
    size_t lo = 0, hi = heap->string_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (heap->strings[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    if (lo == heap->string_count || heap->strings[lo].id != id) return NULL;
    *len = heap->strings[lo].length;
    return (const char *)heap->hprof.data + heap->strings[lo].offset;
}

/* Field names repeat across classes; keep one copy per string id. */
typedef struct {
    uint64_t *ids;
    const char **names;
    uint64_t mask;
} name_cache;

static const char *name_for(lw_heap *heap, name_cache *nc, uint64_t sid) {
    uint64_t s = hash_id(sid) & nc->mask;
    for (;; s = (s + 1) & nc->mask) {
        if (nc->names[s] == NULL) break;
        if (nc->ids[s] == sid) return nc->names[s];
    }
    uint32_t len;
    const char *raw = lw__heap_string(heap, sid, &len);
    char fallback[40];
    if (!raw) {
        len = (uint32_t)snprintf(fallback, sizeof fallback, "<unnamed 0x%llx>", (unsigned long long)sid);
        raw = fallback;
    }
    const char *n = lw__heap_intern(heap, raw, len);
    if (!n) return NULL;
    nc->ids[s] = sid;
    nc->names[s] = n;
    return n;
}

static lw_status parse_class_dumps(builder *b) {
    lw_heap *heap = b->heap;
    const lw__hprof *h = &heap->hprof;
    const unsigned ids = h->id_size;
    lw_status st = LW_OK;
    name_cache nc = {0};
    size_t fields_cap = 0, statics_cap = 0;
    /* Class index by id. */
    uint64_t slots = 16;
    while (slots < (uint64_t)heap->class_count * 2) slots *= 2;
    heap->class_slots = lw__calloc(slots, sizeof *heap->class_slots);
    heap->class_slot_mask = slots - 1;
    nc.mask = 4095;
    while (nc.mask + 1 < (uint64_t)heap->class_count * 8) nc.mask = nc.mask * 2 + 1;
    nc.ids = lw__calloc(nc.mask + 1, sizeof *nc.ids);
    nc.names = lw__calloc(nc.mask + 1, sizeof *nc.names);
    if (!heap->class_slots || !nc.ids || !nc.names) {
        st = lw__fail(b->err, LW_ERR_NOMEM, "out of memory indexing classes");
        goto out;
    }
    for (uint32_t i = 0; i < heap->class_count; i++) {
        uint64_t s = hash_id(heap->classes[i].id) & heap->class_slot_mask;
        while (heap->class_slots[s]) {
            if (heap->classes[heap->class_slots[s] - 1].id == heap->classes[i].id) break; /* duplicate: first wins */
            s = (s + 1) & heap->class_slot_mask;
        }
        if (!heap->class_slots[s]) heap->class_slots[s] = i + 1;
    }
    if (b->nloads) qsort(b->loads, b->nloads, sizeof *b->loads, cmp_load);
    for (uint32_t i = 0; i < heap->class_count; i++) {
        lw__class *c = &heap->classes[i];
        const uint8_t *d = h->data + c->dump_offset + 1;
        c->super_id = lw__be_id(d + ids + 4, ids);
        c->loader_id = lw__be_id(d + 2 * ids + 4, ids);
        c->instance_size = lw__be32(d + 7 * ids + 4);
        /* name: LOAD_CLASS maps the class id to a string id */
        size_t lo = 0, hi = b->nloads;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (b->loads[mid].class_id < c->id) lo = mid + 1;
            else hi = mid;
        }
        char buf[1024];
        uint32_t len = 0;
        const char *raw = lo < b->nloads && b->loads[lo].class_id == c->id ? lw__heap_string(heap, b->loads[lo].name_id, &len) : NULL;
        size_t n;
        if (raw) n = lw__java_source_name(raw, len, buf, sizeof buf);
        else n = (size_t)snprintf(buf, sizeof buf, "<unnamed class 0x%llx>", (unsigned long long)c->id);
        if (n >= sizeof buf) n = sizeof buf - 1;
        c->name = lw__heap_intern(heap, buf, n);
        if (!c->name) {
            st = lw__fail(b->err, LW_ERR_NOMEM, "out of memory");
            goto out;
        }
        /* statics and declared fields (bounds were checked by the scan) */
        uint64_t q = c->dump_offset + 1 + 7 * (uint64_t)ids + 8;
        uint16_t cp = lw__be16(h->data + q);
        q += 2;
        for (unsigned k = 0; k < cp; k++) q += 3 + lw__type_size(h->data[q + 2], ids);
        uint16_t ns = lw__be16(h->data + q);
        q += 2;
        c->static_first = (uint32_t)heap->static_count;
        if (grow((void **)&heap->statics, &statics_cap, heap->static_count + ns, sizeof *heap->statics)) {
            st = lw__fail(b->err, LW_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (unsigned k = 0; k < ns; k++) {
            uint64_t sid = lw__be_id(h->data + q, ids);
            uint8_t t = h->data[q + ids];
            unsigned sz = lw__type_size(t, ids);
            uint64_t v = 0;
            for (unsigned j = 0; j < sz; j++) v = (v << 8) | h->data[q + ids + 1 + j];
            const char *fname = name_for(heap, &nc, sid);
            if (!fname) {
                st = lw__fail(b->err, LW_ERR_NOMEM, "out of memory");
                goto out;
            }
            heap->statics[heap->static_count++] = (lw__static_field){fname, t, LW_MATCH_NORMAL, 0, v};
            q += ids + 1 + sz;
        }
        c->static_count = ns;
        uint16_t nf = lw__be16(h->data + q);
        q += 2;
        c->field_first = (uint32_t)heap->field_count;
        if (grow((void **)&heap->fields, &fields_cap, heap->field_count + nf, sizeof *heap->fields)) {
            st = lw__fail(b->err, LW_ERR_NOMEM, "out of memory");
            goto out;
        }
        uint32_t own = 0;
        for (unsigned k = 0; k < nf; k++) {
            uint64_t sid = lw__be_id(h->data + q, ids);
            uint8_t t = h->data[q + ids];
            const char *fname = name_for(heap, &nc, sid);
            if (!fname) {
                st = lw__fail(b->err, LW_ERR_NOMEM, "out of memory");
                goto out;
            }
            heap->fields[heap->field_count++] = (lw__field){fname, t};
            own += lw__type_size(t, ids);
            q += ids + 1;
        }
        c->field_count = nf;
        c->own_bytes = own;
    }
    for (uint32_t i = 0; i < heap->class_count; i++) {
        lw__class *c = &heap->classes[i];
        c->super_index = c->super_id ? lw__heap_class_by_id(heap, c->super_id) : LW_NONE;
        if (c->super_index == i) c->super_index = LW_NONE;
    }
out:
    lw__free(nc.ids);
    lw__free(nc.names);
    return st;
}

int lw__class_is_a(const lw_heap *heap, uint32_t c, uint32_t ancestor) {
    if (ancestor == LW_NONE) return 0;
    for (unsigned guard = 0; c != LW_NONE && guard < 256; guard++, c = heap->classes[c].super_index)
        if (c == ancestor) return 1;
    return 0;
}

static int is_boxed(const char *n) {
    static const char *const boxed[] = {"java.lang.Boolean", "java.lang.Character", "java.lang.Float", "java.lang.Double",
                                        "java.lang.Byte", "java.lang.Short", "java.lang.Integer", "java.lang.Long"};
    for (size_t i = 0; i < sizeof boxed / sizeof *boxed; i++) {
        size_t l = strlen(boxed[i]);
        if (strncmp(n, boxed[i], l) == 0 && (n[l] == 0 || strcmp(n + l, "[]") == 0)) return n[l] == 0 ? 1 : 2;
    }
    return 0;
}

static const char *const kwr_class_names[3] = {
    "leakcanary.KeyedWeakReference",
    "com.squareup.leakcanary.KeyedWeakReference",
    "io.leakwatch.KeyedWeakReference",
};

static void classify_classes(builder *b) {
    lw_heap *heap = b->heap;
    heap->cls_object = heap->cls_string = heap->cls_thread = heap->cls_reference = LW_NONE;
    for (uint32_t i = 0; i < heap->class_count; i++) {
        lw__class *c = &heap->classes[i];
        const char *n = c->name;
        if (strcmp(n, "java.lang.Object") == 0 && heap->cls_object == LW_NONE) {
            heap->cls_object = i;
            c->flags |= LW_CLASS_OBJECT_ROOT;
        } else if (strcmp(n, "java.lang.String") == 0) {
            if (heap->cls_string == LW_NONE) heap->cls_string = i;
            c->flags |= LW_CLASS_STRING;
        } else if (strcmp(n, "java.lang.Thread") == 0 && heap->cls_thread == LW_NONE) {
            heap->cls_thread = i;
        } else if (strcmp(n, "java.lang.ref.Reference") == 0 && heap->cls_reference == LW_NONE) {
            heap->cls_reference = i;
        }
        int bx = is_boxed(n);
        if (bx == 1) c->flags |= LW_CLASS_BOXED;
        if (bx == 2) c->flags |= LW_CLASS_BOXED_ARRAY;
        for (unsigned k = 0; k < 3; k++)
            if (strcmp(n, kwr_class_names[k]) == 0) {
                c->flags |= LW_CLASS_KWR;
                if (b->nkwr_classes < 3) b->kwr_class_ids[b->nkwr_classes++] = c->id;
            }
    }
    for (uint32_t i = 0; i < heap->class_count; i++)
        if (lw__class_is_a(heap, i, heap->cls_thread)) heap->classes[i].flags |= LW_CLASS_THREAD;
}

/* Data size and the reference layout of instances of class `ci`: own fields first, then the
 * super-class's, up to (not including) java.lang.Object; references stable-sorted by name. */
static lw_status layout_class(builder *b, uint32_t ci, size_t *refs_cap) {
    lw_heap *heap = b->heap;
    lw__class *c = &heap->classes[ci];
    if (c->flags & LW_CLASS_LAYOUT_DONE) return LW_OK;
    if (c->flags & LW_CLASS_LAYOUT_BUSY) {
        c->super_index = LW_NONE; /* a cycle in corrupt input: cut it */
        return LW_OK;
    }
    c->flags |= LW_CLASS_LAYOUT_BUSY;
    uint32_t super = c->super_index;
    if (super != LW_NONE) {
        lw_status st = layout_class(b, super, refs_cap);
        if (st != LW_OK) return st;
        c = &heap->classes[ci];
        super = c->super_index;
    }
    uint64_t data = c->own_bytes + (super != LW_NONE ? heap->classes[super].data_bytes : 0);
    c->data_bytes = data > UINT32_MAX ? UINT32_MAX : (uint32_t)data;
    c->depth = super != LW_NONE ? heap->classes[super].depth + 1 : 0;
    c->ref_first = (uint32_t)heap->ref_field_count;
    c->ref_count = 0;
    if (!(c->flags & (LW_CLASS_STRING | LW_CLASS_BOXED))) {
        const unsigned ids = heap->hprof.id_size;
        uint32_t base = 0;
        unsigned guard = 0;
        for (uint32_t k = ci; k != LW_NONE && !(heap->classes[k].flags & LW_CLASS_OBJECT_ROOT) && guard < 256;
             k = heap->classes[k].super_index, guard++) {
            const lw__class *kc = &heap->classes[k];
            uint32_t off = base;
            for (uint32_t f = 0; f < kc->field_count; f++) {
                const lw__field *fd = &heap->fields[kc->field_first + f];
                if (fd->type == LW_T_OBJECT) {
                    uint16_t pattern = 0;
                    int m = lw__match_instance_field(heap, ci, fd->name, &pattern);
                    if (m != LW_MATCH_IGNORED) {
                        if (grow((void **)&heap->ref_fields, refs_cap, heap->ref_field_count + 1, sizeof *heap->ref_fields))
                            return lw__fail(b->err, LW_ERR_NOMEM, "out of memory");
                        heap->ref_fields[heap->ref_field_count++] = (lw__ref_field){off, fd->name, k, (uint8_t)m, pattern};
                    }
                }
                off += lw__type_size(fd->type, ids);
            }
            base += kc->own_bytes;
        }
        c = &heap->classes[ci];
        c->ref_count = (uint32_t)(heap->ref_field_count - c->ref_first);
        /* stable insertion sort by name: lists are short */
        if (c->ref_count < 2) goto done; /* nothing to sort (and ref_fields may still be NULL) */
        lw__ref_field *r = heap->ref_fields + c->ref_first;
        for (uint32_t x = 1; x < c->ref_count; x++) {
            lw__ref_field t = r[x];
            uint32_t y = x;
            while (y > 0 && strcmp(r[y - 1].name, t.name) > 0) {
                r[y] = r[y - 1];
                y--;
            }
            r[y] = t;
        }
    }
done:
    c->flags = (c->flags & ~(uint32_t)LW_CLASS_LAYOUT_BUSY) | LW_CLASS_LAYOUT_DONE;
    return LW_OK;
}

static void match_statics(lw_heap *heap) {
    for (uint32_t i = 0; i < heap->class_count; i++) {
        const lw__class *c = &heap->classes[i];
        for (uint32_t k = 0; k < c->static_count; k++) {
            lw__static_field *s = &heap->statics[c->static_first + k];
            if (s->type != LW_T_OBJECT) continue;
            s->match = (uint8_t)lw__match_static_field(heap, i, s->name, &s->pattern);
        }
    }
}

/* ---- scan 2: the object table --------------------------------------------------------------- */

static unsigned choose_shift(uint64_t span, uint64_t count) {
    uint64_t want = count / 2 ? count / 2 : 1; /* about two ids per bucket */
    unsigned s = 0;
    while (s < 63 && (span >> s) + 1 > want) s++;
    return s;
}

static lw_status alloc_idmap(builder *b, uint64_t n) {
    lw_heap *heap = b->heap;
    lw__idmap *m = &heap->idmap;
    m->count = n;
    m->min_id = n ? b->min_id : 0;
    m->max_id = n ? b->max_id : 0;
    m->shift = choose_shift(m->max_id - m->min_id, n);
    m->nbuckets = ((m->max_id - m->min_id) >> m->shift) + 1;
    m->bucket = lw__malloc((m->nbuckets + 1) * sizeof *m->bucket);
    if (m->shift <= 32) m->low32 = lw__malloc(n * sizeof *m->low32);
    else m->low64 = lw__malloc(n * sizeof *m->low64);
    if (heap->hprof.size <= UINT32_MAX) heap->offset32 = lw__malloc(n * sizeof *heap->offset32);
    else heap->offset64 = lw__malloc(n * sizeof *heap->offset64);
    if (!m->bucket || !(m->low32 || m->low64) || !(heap->offset32 || heap->offset64))
        return lw__fail(b->err, LW_ERR_NOMEM, "out of memory for the object table (%llu objects)", (unsigned long long)n);
    return LW_OK;
}

/* Appends object `i` (ids arrive ascending) to the id map. */
typedef struct {
    uint64_t next_bucket;
} fill_state;

static inline void fill_one(lw_heap *heap, fill_state *fs, uint64_t i, uint64_t id, uint64_t offset) {
    lw__idmap *m = &heap->idmap;
    uint64_t d = id - m->min_id;
    uint64_t bk = d >> m->shift;
    while (fs->next_bucket <= bk) m->bucket[fs->next_bucket++] = (uint32_t)i;
    if (m->low32) m->low32[i] = (uint32_t)(d & ((m->shift == 32) ? 0xffffffffu : ((1u << m->shift) - 1)));
    else m->low64[i] = d;
    if (heap->offset32) heap->offset32[i] = (uint32_t)offset;
    else heap->offset64[i] = offset;
}

static void fill_finish(lw_heap *heap, fill_state *fs, uint64_t n) {
    lw__idmap *m = &heap->idmap;
    while (fs->next_bucket <= m->nbuckets) m->bucket[fs->next_bucket++] = (uint32_t)n;
}

static lw_status scan_objects(builder *b) {
    lw_heap *heap = b->heap;
    const lw__hprof *h = &heap->hprof;
    const unsigned ids = h->id_size;
    const uint64_t n = b->objects;
    lw_status st = alloc_idmap(b, n);
    if (st != LW_OK) return st;
    id_offset *pairs = NULL;
    if (!b->sorted && n > 0) {
        pairs = lw__malloc(n * sizeof *pairs);
        if (!pairs) return lw__fail(b->err, LW_ERR_NOMEM, "out of memory sorting %llu objects", (unsigned long long)n);
    }
    fill_state fs = {0};
    uint64_t i = 0;
    size_t kwr_cap = 0;
    for (size_t s = 0; s < b->nsegs; s++) {
        uint64_t p = b->segs[s].body, end = b->segs[s].end;
        lw__subrecord sub;
        while (p < end) {
            if (lw__hprof_subrecord_at(h, p, end, &sub, b->err) < 0) { st = LW_ERR_FORMAT; goto out; }
            uint8_t tag = sub.tag;
            if (tag == LW_SUB_INSTANCE_DUMP || tag == LW_SUB_OBJECT_ARRAY_DUMP || tag == LW_SUB_PRIMITIVE_ARRAY_DUMP ||
                tag == LW_SUB_PRIMITIVE_ARRAY_NODATA) {
                const uint8_t *d = h->data + p;
                uint64_t id = lw__be_id(d + 1, ids);
                if (i >= n) { st = lw__fail(b->err, LW_ERR_FORMAT, "file changed while being read"); goto out; }
                if (pairs) pairs[i] = (id_offset){id, p};
                else fill_one(heap, &fs, i, id, p);
                i++;
                if (tag == LW_SUB_INSTANCE_DUMP && b->nkwr_classes) {
                    uint64_t cid = lw__be_id(d + 5 + ids, ids);
                    for (unsigned k = 0; k < b->nkwr_classes; k++)
                        if (cid == b->kwr_class_ids[k]) {
                            if (grow((void **)&heap->kwr_ids, &kwr_cap, heap->kwr_count + 1, sizeof *heap->kwr_ids)) {
                                st = lw__fail(b->err, LW_ERR_NOMEM, "out of memory");
                                goto out;
                            }
                            heap->kwr_ids[heap->kwr_count++] = id;
                        }
                }
            }
            p += sub.length;
        }
        progress(b, h->size / 2 + p / 2);
    }
    if (pairs) {
        qsort(pairs, n, sizeof *pairs, cmp_id_offset);
        uint64_t kept = 0;
        for (uint64_t k = 0; k < n; k++) {
            if (kept && pairs[k].id == pairs[kept - 1].id) continue; /* duplicate id: the first in the file wins */
            pairs[kept++] = pairs[k];
        }
        for (uint64_t k = 0; k < kept; k++) fill_one(heap, &fs, k, pairs[k].id, pairs[k].offset);
        heap->idmap.count = kept;
        i = kept;
    }
    fill_finish(heap, &fs, i);
    heap->object_count = i;
out:
    lw__free(pairs);
    return st;
}

uint32_t lw__heap_lookup(const lw_heap *heap, uint64_t id) {
    const lw__idmap *m = &heap->idmap;
    if (id >= m->min_id && id <= m->max_id && m->count) {
        uint64_t d = id - m->min_id;
        uint64_t bk = d >> m->shift;
        uint32_t lo = m->bucket[bk], hi = m->bucket[bk + 1];
        if (m->low32) {
            uint32_t key = (uint32_t)(d & ((m->shift == 32) ? 0xffffffffu : ((1u << m->shift) - 1)));
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (m->low32[mid] < key) lo = mid + 1;
                else hi = mid;
            }
            if (lo < m->bucket[bk + 1] && m->low32[lo] == key) return lo;
        } else {
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (m->low64[mid] < d) lo = mid + 1;
                else hi = mid;
            }
            if (lo < m->bucket[bk + 1] && m->low64[lo] == d) return lo;
        }
    }
    uint32_t c = lw__heap_class_by_id(heap, id);
    return c == LW_NONE ? LW_NONE : (uint32_t)(heap->object_count + c);
}

uint64_t lw__heap_index_bytes(const lw_heap *heap) {
    uint64_t n = heap->idmap.count;
    uint64_t bytes = (heap->idmap.nbuckets + 1) * 4 + n * (heap->idmap.low32 ? 4 : 8) + n * (heap->offset32 ? 4 : 8);
    bytes += heap->string_count * sizeof *heap->strings;
    bytes += (uint64_t)heap->class_count * sizeof *heap->classes + (heap->class_slot_mask + 1) * 4;
    bytes += heap->field_count * sizeof *heap->fields + heap->static_count * sizeof *heap->statics;
    bytes += heap->ref_field_count * sizeof *heap->ref_fields + heap->root_count * sizeof *heap->roots;
    for (const lw__name_arena *a = heap->names; a; a = a->next) bytes += sizeof *a + a->cap;
    return bytes;
}

static int read_sdk_int(lw_heap *heap) {
    uint32_t c = lw__heap_class_by_name(heap, "android.os.Build$VERSION");
    if (c == LW_NONE) return -1;
    const lw__class *k = &heap->classes[c];
    for (uint32_t i = 0; i < k->static_count; i++) {
        const lw__static_field *s = &heap->statics[k->static_first + i];
        if (s->type == LW_T_INT && strcmp(s->name, "SDK_INT") == 0) return (int)(int32_t)s->value;
    }
    return -1;
}

lw_status lw__heap_index_build(lw_heap *heap, int objects, lw_error *err) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    builder b = {.heap = heap, .err = err};
    lw_status st;
    heap->android = strcmp(heap->hprof.version, LW_HPROF_VERSION_ANDROID) == 0;
    st = scan_structure(&b);
    if (st != LW_OK) goto out;
    if (heap->string_count) qsort(heap->strings, heap->string_count, sizeof *heap->strings, cmp_string);
    st = parse_class_dumps(&b);
    if (st != LW_OK) goto out;
    classify_classes(&b);
    heap->sdk_int = read_sdk_int(heap);
    if (objects) {
        st = scan_objects(&b);
        if (st != LW_OK) goto out;
    }
    {
        size_t refs_cap = 0;
        for (uint32_t i = 0; i < heap->class_count; i++) {
            st = layout_class(&b, i, &refs_cap);
            if (st != LW_OK) goto out;
        }
    }
    match_statics(heap);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    {
        lw_heap_summary *s = &heap->summary;
        snprintf(s->hprof_version, sizeof s->hprof_version, "%s", heap->hprof.version);
        s->id_size = heap->hprof.id_size;
        s->timestamp_ms = heap->hprof.timestamp_ms;
        s->file_bytes = heap->hprof.size;
        s->index_bytes = lw__heap_index_bytes(heap);
        s->index_seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    }
    if (heap->progress) heap->progress(heap->progress_user, "index", heap->hprof.size * 2, heap->hprof.size * 2);
out:
    lw__free(b.loads);
    lw__free(b.segs);
    return st;
}

void lw__heap_index_free(lw_heap *heap) {
    lw__free(heap->strings);
    lw__free(heap->classes);
    lw__free(heap->class_slots);
    lw__free(heap->fields);
    lw__free(heap->statics);
    lw__free(heap->ref_fields);
    free_arena(heap->names);
    lw__free(heap->idmap.bucket);
    lw__free(heap->idmap.low32);
    lw__free(heap->idmap.low64);
    lw__free(heap->offset32);
    lw__free(heap->offset64);
    lw__free(heap->roots);
    lw__free(heap->kwr_ids);
}
