/* retained_size.h — bytes and objects reachable only through each leaking object, credited
 * to the leaking object that reaches them first (LeakCanary's current attribution, no
 * dominator tree). Needs a full traversal. Internal to libleakcore. */
#ifndef LW_RETAINED_SIZE_H
#define LW_RETAINED_SIZE_H

#include "path_finder.h"

/* For each of paths->found (in order) fills bytes[i] and objects[i]. */
lw_status lw__retained_sizes(const lw_heap *heap, lw__paths *paths, uint64_t *bytes, uint64_t *objects, lw_error *err);

#endif
