/* trace_builder.c — from parent links to traces users read. */
#include "trace_builder.h"

#include <stdio.h>
#include <stdlib.h>

#include "heap_objects.h"
#include "object_inspectors.h"
#include "reference_matchers.h"

#define MAX_TRACES_PER_LEAK 10

const char *lw__gc_root_name(uint8_t tag) {
    switch (tag) {
    case LW_SUB_ROOT_JNI_GLOBAL: return "JNI_GLOBAL";
    case LW_SUB_ROOT_JNI_LOCAL: return "JNI_LOCAL";
    case LW_SUB_ROOT_JAVA_FRAME: return "JAVA_FRAME";
    case LW_SUB_ROOT_NATIVE_STACK: return "NATIVE_STACK";
    case LW_SUB_ROOT_STICKY_CLASS: return "STICKY_CLASS";
    case LW_SUB_ROOT_THREAD_BLOCK: return "THREAD_BLOCK";
    case LW_SUB_ROOT_MONITOR_USED: return "MONITOR_USED";
    case LW_SUB_ROOT_THREAD_OBJECT: return "THREAD_OBJECT";
    case LW_SUB_ROOT_JNI_MONITOR: return "JNI_MONITOR";
    case LW_SUB_ROOT_INTERNED_STRING: return "INTERNED_STRING";
    case LW_SUB_ROOT_FINALIZING: return "FINALIZING";
    case LW_SUB_ROOT_DEBUGGER: return "DEBUGGER";
    case LW_SUB_ROOT_REFERENCE_CLEANUP: return "REFERENCE_CLEANUP";
    case LW_SUB_ROOT_VM_INTERNAL: return "VM_INTERNAL";
    case LW_SUB_ROOT_UNREACHABLE: return "UNREACHABLE";
    default: return "UNKNOWN";
    }
}

void lw__trace_clear(lw_trace *t) {
    if (!t) return;
    const char *pool = t->lw__pool;
    size_t len = t->lw__pool_len;
    for (size_t i = 0; i < t->element_count; i++) {
        lw_trace_element *e = &t->elements[i];
        lw__free_unpooled(e->class_name, pool, len);
        lw__free_unpooled(e->reason, pool, len);
        for (size_t j = 0; j < e->label_count; j++) lw__free_unpooled(e->labels[j], pool, len);
        lw__free(e->labels);
        lw__free_unpooled(e->ref_name, pool, len);
        lw__free_unpooled(e->key, pool, len);
        lw__free_unpooled(e->description, pool, len);
    }
    lw__free(t->elements);
    lw__free_unpooled(t->gc_root, pool, len);
    memset(t, 0, sizeof *t);
}

static char *join_reasons(const char *first, const char *conflict) {
    char buf[4096];
    snprintf(buf, sizeof buf, conflict && *conflict ? "%s. Conflicts with %s" : "%s", first, conflict ? conflict : "");
    return lw__strdup(buf);
}

/* The status of a path element from its inspection; the last element is the leaking one. */
static int resolve(lw_trace_element *e, lw__inspection *in, int last) {
    const char *yes = in->leaking.size ? in->leaking.data : NULL;
    const char *no = in->not_leaking.size ? in->not_leaking.data : NULL;
    if (yes && no) {
        e->leaking = last ? LW_LEAKING_YES : LW_LEAKING_NO;
        e->reason = last ? join_reasons(yes, no) : join_reasons(no, yes);
    } else if (yes) {
        e->leaking = LW_LEAKING_YES;
        e->reason = lw__strdup(yes);
    } else if (no) {
        e->leaking = LW_LEAKING_NO;
        e->reason = lw__strdup(no);
    } else {
        e->leaking = LW_LEAKING_UNKNOWN;
        e->reason = lw__strdup("");
    }
    e->labels = in->labels;
    e->label_count = in->label_count;
    in->labels = NULL;
    in->label_count = 0;
    return e->reason ? 0 : -1;
}

static const lw__leaking_object *leaking_for(const lw__leaking_object *objs, size_t n, uint32_t dense) {
    for (size_t i = 0; i < n; i++)
        if (objs[i].dense == dense) return &objs[i];
    return NULL;
}

/* Builds the trace of `leak` into *t; sets *pattern to the first library pattern, or -1. */
static lw_status build_one(const lw_heap *heap, const lw__paths *paths, uint32_t leak, const lw__leaking_object *lo,
                           uint64_t rbytes, uint64_t robjects, int with_sizes, lw_trace *t, int *pattern, lw_error *err) {
    lw_status st = LW_OK;
    size_t n = 0, cap = 16;
    uint32_t *chain = lw__malloc(cap * sizeof *chain);
    lw__inspection in = {0};
    *pattern = -1;
    memset(t, 0, sizeof *t);
    if (!chain) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
    for (uint32_t x = leak;;) {
        if (n == cap) {
            cap *= 2;
            uint32_t *c = lw__realloc(chain, cap * sizeof *c);
            if (!c) {
                st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
                goto out;
            }
            chain = c;
        }
        chain[n++] = x;
        uint32_t par = paths->parent[x];
        if (par >= paths->dense_count) break;
        if (n > paths->dense_count) {
            st = lw__fail(err, LW_ERR_FORMAT, "internal error: a cycle in the path to an object");
            goto out;
        }
        x = par;
    }
    for (size_t i = 0; i < n / 2; i++) {
        uint32_t tmp = chain[i];
        chain[i] = chain[n - 1 - i];
        chain[n - 1 - i] = tmp;
    }
    const lw__path_root *root = &paths->roots[paths->parent[chain[0]] - paths->dense_count];
    t->gc_root = lw__strdup(lw__gc_root_name(root->tag));
    t->elements = lw__calloc(n, sizeof *t->elements);
    if (!t->gc_root || !t->elements) {
        st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
        goto out;
    }
    t->element_count = n;
    if (root->match == LW_MATCH_LIBRARY) *pattern = root->pattern;
    for (size_t i = 0; i < n; i++) {
        lw_trace_element *e = &t->elements[i];
        lw__object o;
        lw__heap_object(heap, chain[i], &o);
        e->class_name = lw__strdup(lw__object_class_name(heap, &o));
        e->object_kind = lw__object_kind(&o);
        e->watch_ms = e->retained_ms = e->retained_bytes = e->retained_objects = -1;
        lw__inspect_object(heap, chain[i], &in);
        int last = i + 1 == n;
        if (last) {
            char why[4200];
            if (lo && lo->description && lo->description[0])
                snprintf(why, sizeof why, "ObjectWatcher was watching this because %s", lo->description);
            else
                snprintf(why, sizeof why, "ObjectWatcher was watching this");
            /* The watcher's reason comes first, as LeakCanary's inspector order has it. */
            lw__buf mine = {0};
            lw__buf_puts(&mine, why);
            if (in.leaking.size) {
                lw__buf_puts(&mine, " and ");
                lw__buf_append(&mine, in.leaking.data, in.leaking.size);
            }
            lw__buf_free(&in.leaking);
            in.leaking = mine;
            char label[700];
            if (lo && lo->key) {
                snprintf(label, sizeof label, "key = %s", lo->key);
                lw__inspection_add_label(&in, label);
            }
            if (lo && lo->watch_ms >= 0) {
                snprintf(label, sizeof label, "watchDurationMillis = %lld", (long long)lo->watch_ms);
                lw__inspection_add_label(&in, label);
            }
            if (lo && lo->retained_ms >= 0) {
                snprintf(label, sizeof label, "retainedDurationMillis = %lld", (long long)lo->retained_ms);
                lw__inspection_add_label(&in, label);
            }
            e->key = lo && lo->key ? lw__strdup(lo->key) : NULL;
            e->description = lo && lo->description ? lw__strdup(lo->description) : NULL;
            e->watch_ms = lo ? lo->watch_ms : -1;
            e->retained_ms = lo ? lo->retained_ms : -1;
            if (with_sizes) {
                e->retained_bytes = (int64_t)rbytes;
                e->retained_objects = (int64_t)robjects;
            }
        } else {
            lw__edge edge;
            if (!lw__paths_edge(heap, paths, chain[i], chain[i + 1], &edge)) {
                st = lw__fail(err, LW_ERR_FORMAT, "internal error: lost the reference from object %u to %u", chain[i],
                              chain[i + 1]);
                lw__inspection_free(&in);
                goto out;
            }
            e->has_reference = 1;
            e->ref_kind = edge.kind;
            e->ref_index = edge.index;
            if (edge.kind == LW_REF_LOCAL) {
                e->ref_name = lw__string_field(heap, &o, "name", 256);
                if (!e->ref_name) e->ref_name = lw__strdup("");
            }
            else if (edge.kind != LW_REF_ARRAY_ELEMENT) e->ref_name = lw__strdup(edge.name);
            if (edge.kind == LW_REF_LOCAL) e->ref_index = 0;
            if (edge.match == LW_MATCH_LIBRARY) {
                char text[512];
                lw__pattern_text(edge.pattern, text, sizeof text);
                char label[600];
                snprintf(label, sizeof label, "Library leak match: %s", text);
                lw__inspection_add_label(&in, label);
                if (*pattern < 0) *pattern = edge.pattern;
            }
        }
        if (i == 0 && root->match == LW_MATCH_LIBRARY) {
            char text[512], label[600];
            lw__pattern_text(root->pattern, text, sizeof text);
            snprintf(label, sizeof label, "Library leak match: %s", text);
            lw__inspection_add_label(&in, label);
        }
        if (resolve(e, &in, last) != 0 || !e->class_name) {
            lw__inspection_free(&in);
            st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
            goto out;
        }
        lw__inspection_free(&in);
    }
    lw_trace_propagate(t);
out:
    lw__free(chain);
    if (st != LW_OK) lw__trace_clear(t);
    return st;
}

static char *short_description(const lw_trace *t) {
    char buf[1024];
    for (size_t i = 0; i + 1 < t->element_count; i++) {
        const lw_trace_element *e = &t->elements[i];
        if (!e->has_reference || !e->suspect) continue;
        const char *cn = e->class_name;
        const char *dot = strrchr(cn, '.');
        const char *simple = dot ? dot + 1 : cn;
        const char *name = e->ref_kind == LW_REF_ARRAY_ELEMENT ? "[x]" : e->ref_kind == LW_REF_LOCAL ? "<Java Local>" : e->ref_name;
        snprintf(buf, sizeof buf, "%s.%s", simple, name ? name : "");
        return lw__strdup(buf);
    }
    return lw__strdup(t->element_count ? t->elements[t->element_count - 1].class_name : "");
}

static int cmp_leaks(const void *a, const void *b) {
    const lw_leak *x = a, *y = b;
    if (x->library != y->library) return x->library - y->library;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->signature, y->signature);
}

lw_status lw__build_traces(const lw_heap *heap, const lw__paths *paths, const lw__leaking_object *objs, size_t nobjs,
                           const uint64_t *bytes, const uint64_t *objects, lw_leak_report *report, lw_error *err) {
    for (size_t f = 0; f < paths->found_count; f++) {
        uint32_t leak = paths->found[f];
        lw_trace t;
        int pattern;
        lw_status st = build_one(heap, paths, leak, leaking_for(objs, nobjs, leak), bytes ? bytes[f] : 0,
                                 objects ? objects[f] : 0, bytes != NULL, &t, &pattern, err);
        if (st != LW_OK) return st;
        char sig[41];
        char pattern_text[512] = "";
        if (pattern >= 0) {
            lw__pattern_text((uint16_t)pattern, pattern_text, sizeof pattern_text);
            lw_pattern_signature(pattern_text, sig);
        } else {
            lw_trace_signature(&t, sig);
        }
        lw_leak *leak_group = NULL;
        for (size_t i = 0; i < report->leak_count; i++)
            if (strcmp(report->leaks[i].signature, sig) == 0) leak_group = &report->leaks[i];
        if (!leak_group) {
            lw_leak *n = lw__realloc(report->leaks, (report->leak_count + 1) * sizeof *n);
            if (!n) {
                lw__trace_clear(&t);
                return lw__fail(err, LW_ERR_NOMEM, "out of memory");
            }
            report->leaks = n;
            leak_group = &report->leaks[report->leak_count++];
            memset(leak_group, 0, sizeof *leak_group);
            memcpy(leak_group->signature, sig, sizeof sig);
            leak_group->library = pattern >= 0;
            if (pattern >= 0) {
                leak_group->short_description = lw__strdup(pattern_text);
                leak_group->library_pattern = lw__strdup(pattern_text);
                leak_group->library_description = lw__strdup(lw__patterns[pattern].description);
            } else {
                leak_group->short_description = short_description(&t);
            }
            leak_group->traces = lw__calloc(MAX_TRACES_PER_LEAK, sizeof *leak_group->traces);
            if (!leak_group->traces || !leak_group->short_description) {
                lw__trace_clear(&t);
                return lw__fail(err, LW_ERR_NOMEM, "out of memory");
            }
        }
        leak_group->count++;
        if (leak_group->trace_count < MAX_TRACES_PER_LEAK) leak_group->traces[leak_group->trace_count++] = t;
        else lw__trace_clear(&t);
    }
    qsort(report->leaks, report->leak_count, sizeof *report->leaks, cmp_leaks);
    return LW_OK;
}

void lw_leak_report_free(lw_leak_report *r) {
    if (!r) return;
    const char *pool = r->lw__pool;
    size_t len = r->lw__pool_len;
    for (size_t i = 0; i < r->leak_count; i++) {
        lw_leak *l = &r->leaks[i];
        for (size_t j = 0; j < l->trace_count; j++) lw__trace_clear(&l->traces[j]);
        lw__free(l->traces);
        lw__free_unpooled(l->short_description, pool, len);
        lw__free_unpooled(l->library_pattern, pool, len);
        lw__free_unpooled(l->library_description, pool, len);
    }
    lw__free(r->leaks);
    lw__free_unpooled(r->analyzer_name, pool, len);
    lw__free_unpooled(r->analyzer_version, pool, len);
    lw__free_unpooled(r->hprof_version, pool, len);
    lw__free(r->lw__pool);
    lw__free(r);
}
