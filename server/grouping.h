/* grouping.h — leak groups: one per (app, signature). Recomputes signatures from the
 * traces (never trusts a device), upserts groups and counts each report's occurrences once
 * (ARCHITECTURE pipeline step 9). */
#ifndef LD_GROUPING_H
#define LD_GROUPING_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "leakcore.h"

/* Groups every leak of `rep` (borrowed, not modified) for the report `report_id` of app
 * `app_id`, received from `install_id` running `app_version` / `build`. Must run inside the
 * caller's transaction (ld_db_begin ... ld_db_commit), in which the report row already
 * exists. For each distinct recomputed signature (application leak: the suspects of its
 * first trace recomputed from the statuses; library leak: its pattern): upserts the group
 * and, if this report's occurrence is new, adds it to the counters (occurrences,
 * leaked_objects, devices, last_seen, first/last version and build) and turns a `fixed`
 * group whose fixed_in_build < build into `regressed`. A report counted before is not
 * counted again. Groups are locked in signature order, so concurrent reports neither
 * double-count devices nor deadlock on each other.
 * LD_ERR_INVALID when a leak has no trace, a trace no element, or a library leak no
 * pattern; db errors as ld_db_exec maps them (the caller rolls back). */
ld_status ld_group_report(ld_db *db, int64_t app_id, const char *report_id, const char *app_version, int64_t build,
                          const char *install_id, const lw_leak_report *rep);

/* Checks a trace report sent by a device (`rep`, modified): every leak has at least one
 * trace and every trace at least one element; every reference's `suspect` flag agrees with
 * the one recomputed from the elements' `leaking` statuses; a library leak has its
 * library_pattern. Then overwrites each leak's signature with the recomputed one.
 * LD_OK, or LD_ERR_INVALID with a message naming the offending "leaks[i].traces[j]" in
 * `err` (`cap` bytes, may be 0); on error no signature was changed. */
ld_status ld_trace_validate(lw_leak_report *rep, char *err, size_t cap);

#endif
