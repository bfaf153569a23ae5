/* trace_builder.h — turns the traversal's parent links into the leak report: elements,
 * statuses from the inspectors, edges, library-leak matches, signatures, groups. */
#ifndef LW_TRACE_BUILDER_H
#define LW_TRACE_BUILDER_H

#include "leak_finder.h"
#include "path_finder.h"

/* Appends one trace per found leaking object to `report`, grouped by signature.
 * `bytes`/`objects` (may be NULL) are retained sizes parallel to paths->found. */
lw_status lw__build_traces(const lw_heap *heap, const lw__paths *paths, const lw__leaking_object *objs, size_t nobjs,
                           const uint64_t *bytes, const uint64_t *objects, lw_leak_report *report, lw_error *err);

/* Frees what a trace owns (not the trace struct itself). */
void lw__trace_clear(lw_trace *t);

/* The GC root name ("STICKY_CLASS") of a root sub-record tag. */
const char *lw__gc_root_name(uint8_t tag);

#endif
