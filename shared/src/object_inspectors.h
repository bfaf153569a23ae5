/* object_inspectors.h — data-driven rules that say whether an object on a path is leaking
 * (a destroyed Activity: YES; ActivityThread: NO) and add labels (a thread's name). */
#ifndef LW_OBJECT_INSPECTORS_H
#define LW_OBJECT_INSPECTORS_H

#include "heap_index.h"

typedef struct lw__inspection {
    lw__buf leaking;          /* reasons it is leaking, joined with " and " */
    lw__buf not_leaking;      /* reasons it is not */
    char **labels;
    size_t label_count;
} lw__inspection;

/* Runs every rule on object `dense`. The caller frees with lw__inspection_free. */
void lw__inspect_object(const lw_heap *heap, uint32_t dense, lw__inspection *out);
void lw__inspection_add_label(lw__inspection *in, const char *label);
void lw__inspection_add_reason(lw__buf *reasons, const char *reason);
void lw__inspection_free(lw__inspection *in);

#endif
