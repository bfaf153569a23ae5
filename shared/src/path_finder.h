/* path_finder.h — pass 2: one breadth-first traversal from the GC roots finds the shortest
 * strong path to every leaking object, reading each object's references from the mapped
 * file only when it is visited. Internal to libleakcore. */
#ifndef LW_PATH_FINDER_H
#define LW_PATH_FINDER_H

#include "heap_index.h"

/* A GC root in traversal order. */
typedef struct lw__path_root {
    uint8_t tag;              /* LW_SUB_ROOT_*; class objects added as roots use STICKY_CLASS */
    uint32_t dense;
    uint8_t low;              /* low priority: Java frame roots, library-leak native globals */
    uint8_t match;            /* LW_MATCH_LIBRARY when a native-global pattern matched */
    uint16_t pattern;
} lw__path_root;

/* A Java local: object `target` held by a frame of thread object `thread`. */
typedef struct lw__local {
    uint32_t thread, target;
} lw__local;

/* The edge details of one reference, recovered for the paths that are reported. */
typedef struct lw__edge {
    lw_ref_kind kind;
    const char *name;         /* field name; NULL for array elements and locals */
    uint64_t index;           /* array slot */
    uint32_t owner_class;     /* declaring class (fields), the array class, or LW_NONE */
    uint8_t match;
    uint16_t pattern;
} lw__edge;

typedef struct lw__paths {
    uint32_t dense_count;
    uint32_t *parent;         /* parent dense index; dense_count + root slot for a root */
    uint8_t *state;           /* LW__VISITED ... per dense index */
    lw__path_root *roots;
    size_t root_count;
    lw__local *locals;        /* sorted by thread */
    size_t local_count;
    uint32_t *found;          /* leaking objects reached, in discovery order */
    size_t found_count;
    uint64_t visited;         /* objects visited (popped and expanded) */
    uint64_t references;      /* references followed */
} lw__paths;

enum {
    LW__VISITED = 1,
    LW__LOW_PENDING = 2,      /* waiting in the low-priority queue */
    LW__EDGE_LOW = 4,         /* the edge to the current parent is low priority */
    LW__LEAKING = 8,
    LW__FOUND = 16,
    LW__CREDITED = 32,        /* retained-size phase: counted for some leaking object */
};

/* Traverses from the roots until every object in `leaking` (dense indexes) has a path,
 * or until everything reachable was visited when `full` is set (retained sizes need it). */
lw_status lw__find_paths(lw_heap *heap, const uint32_t *leaking, size_t leaking_count, int full, lw__paths *paths,
                         lw_error *err);
void lw__paths_free(lw__paths *paths);

/* 1 when `dense` was reached. */
static inline int lw__paths_reached(const lw__paths *p, uint32_t dense) { return (p->state[dense] & LW__VISITED) != 0; }

/* The root slot of `dense` if it is a root of its path, else -1. */
static inline long lw__paths_root_slot(const lw__paths *p, uint32_t dense) {
    uint32_t par = p->parent[dense];
    return par >= p->dense_count ? (long)(par - p->dense_count) : -1;
}

/* Recovers the details of the reference from `parent` to `child` that the traversal used. */
int lw__paths_edge(const lw_heap *heap, const lw__paths *paths, uint32_t parent, uint32_t child, lw__edge *edge);

/* Calls `fn` for every reference of object `dense`, in traversal order (for retained size). */
typedef void (*lw__ref_fn)(void *user, uint32_t target, int low);
void lw__for_each_ref(const lw_heap *heap, const lw__paths *paths, uint32_t dense, lw__ref_fn fn, void *user);

#endif
