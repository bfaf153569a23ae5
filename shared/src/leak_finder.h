/* leak_finder.h — the leaking objects: referents of retained KeyedWeakReferences
 * (LeakCanary 2, LeakCanary 1 and Leakwatch layouts), or the one watched with a given key. */
#ifndef LW_LEAK_FINDER_H
#define LW_LEAK_FINDER_H

#include "heap_index.h"

typedef struct lw__leaking_object {
    uint32_t dense;           /* the watched object */
    char *key;                /* owned; NULL when unreadable */
    char *description;        /* owned; NULL when unreadable */
    int64_t watch_ms;         /* heap dump uptime - watch uptime; -1 unknown */
    int64_t retained_ms;      /* heap dump uptime - retained uptime; -1 unknown */
} lw__leaking_object;

/* Fills *out (owned; free with lw__leaking_objects_free) in dump order. With `key`, only
 * the object watched with that key, retained or not; LW_ERR_NOT_FOUND when none is. */
lw_status lw__find_leaking_objects(const lw_heap *heap, const char *key, lw__leaking_object **out, size_t *count,
                                   lw_error *err);
void lw__leaking_objects_free(lw__leaking_object *objs, size_t count);

#endif
