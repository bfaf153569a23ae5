/* leak_finder.c — reads every KeyedWeakReference instance the index noted. */
#include "leak_finder.h"

#include "heap_objects.h"

void lw__leaking_objects_free(lw__leaking_object *objs, size_t count) {
    for (size_t i = 0; objs && i < count; i++) {
        lw__free(objs[i].key);
        lw__free(objs[i].description);
    }
    lw__free(objs);
}

/* Milliseconds from `from` to `to`, or -1 when the dump's clock values make no sense
 * (negative, or so far apart they would overflow). */
static int64_t elapsed(int64_t from, int64_t to) {
    int64_t d;
    if (__builtin_sub_overflow(to, from, &d) || d < 0) return -1;
    return d;
}

static int64_t read_long(const lw_heap *heap, const lw__object *o, const char *name, int *present) {
    uint8_t t;
    uint64_t v;
    *present = lw__instance_field(heap, o, NULL, name, &t, &v) && t == LW_T_LONG;
    return *present ? (int64_t)v : 0;
}

lw_status lw__find_leaking_objects(const lw_heap *heap, const char *key, lw__leaking_object **out, size_t *count,
                                   lw_error *err) {
    *out = NULL;
    *count = 0;
    lw__leaking_object *objs = lw__calloc(heap->kwr_count + 1, sizeof *objs);
    if (!objs) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
    size_t n = 0;
    int key_seen = 0;
    for (size_t i = 0; i < heap->kwr_count; i++) {
        uint32_t dense = lw__heap_lookup(heap, heap->kwr_ids[i]);
        if (dense == LW_NONE || dense >= heap->object_count) continue;
        lw__object ref;
        lw__heap_object(heap, dense, &ref);
        uint8_t t;
        uint64_t v;
        char *k = lw__string_field(heap, &ref, "key", 512);
        if (key && (!k || strcmp(k, key) != 0)) {
            lw__free(k);
            continue;
        }
        if (key) key_seen = 1;
        int has_retained, has_watch, has_dump = 0;
        int64_t retained_up = read_long(heap, &ref, "retainedUptimeMillis", &has_retained);
        int64_t watch_up = read_long(heap, &ref, "watchUptimeMillis", &has_watch);
        int64_t dump_up = 0;
        if (ref.class_index != LW_NONE && lw__class_static(heap, ref.class_index, "heapDumpUptimeMillis", &t, &v) &&
            t == LW_T_LONG) {
            has_dump = 1;
            dump_up = (int64_t)v;
        }
        /* -1: watched, not yet retained. The LeakCanary 1 layout has no such field: retained. */
        int retained = !has_retained || retained_up != -1;
        uint64_t referent = 0;
        if (!lw__instance_field(heap, &ref, "java.lang.ref.Reference", "referent", &t, &referent) || t != LW_T_OBJECT)
            referent = 0;
        uint32_t target = referent ? lw__heap_lookup(heap, referent) : LW_NONE;
        if ((!retained && !key) || target == LW_NONE || target >= heap->object_count) {
            lw__free(k);
            continue;
        }
        int dup = 0;
        for (size_t j = 0; j < n; j++) dup |= objs[j].dense == target;
        if (dup) {
            lw__free(k);
            continue;
        }
        /* LeakCanary 1 called the description `name`. */
        char *desc = lw__string_field(heap, &ref, "description", 4096);
        if (!desc) desc = lw__string_field(heap, &ref, "name", 4096);
        objs[n++] = (lw__leaking_object){
            .dense = target,
            .key = k,
            .description = desc,
            .watch_ms = has_dump && has_watch ? elapsed(watch_up, dump_up) : -1,
            .retained_ms = has_dump && has_retained && retained_up != -1 ? elapsed(retained_up, dump_up) : -1,
        };
    }
    if (key && !key_seen) {
        lw__leaking_objects_free(objs, n);
        return lw__fail(err, LW_ERR_NOT_FOUND, "no KeyedWeakReference has the key %s", key);
    }
    *out = objs;
    *count = n;
    return LW_OK;
}
