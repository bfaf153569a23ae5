/* grouping.h — leak groups: one per (app, signature). Recomputes signatures from the
 * traces (never trusts a device), upserts groups and counts each report's occurrences once
 * (ARCHITECTURE pipeline step 9). */
#ifndef LD_GROUPING_H
#define LD_GROUPING_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "leakcore.h"

/* Groups the leaks of `n` stored reports (report_ids[i] of app app_ids[i]) from their
 * reports.result: must run inside the caller's transaction, in which the results are
 * stored with the server's own signatures and suspect flags (ld_trace_validate, or the
 * analyzer). For each distinct signature of each report: upserts the group (the first
 * report's first trace is the representative of a new one) and adds the occurrence to the
 * counters (occurrences, leaked_objects, devices by install_id, last_seen, first/last version
 * and build, the later report being the newer on an equal build) and turns a `fixed` group
 * whose fixed_in_build < build into `regressed`. Each group's row is written once per call,
 * however many of the reports hit it. A report that already has occurrences was grouped
 * before and counts nothing again. Groups are locked in (app, signature) order, so
 * concurrent calls neither double-count devices nor deadlock on each other.
 * LD_ERR_INVALID for a malformed id; db errors as ld_db_exec maps them (the caller rolls
 * back). */
ld_status ld_group_reports(ld_db *db, size_t n, const int64_t *app_ids, const char *const *report_ids);

/* Checks a trace report sent by a device (`rep`, modified): every leak has at least one
 * trace and every trace at least one element; every reference's `suspect` flag agrees with
 * the one recomputed from the elements' `leaking` statuses; a library leak has its
 * library_pattern. Then overwrites each leak's signature with the recomputed one.
 * LD_OK, or LD_ERR_INVALID with a message naming the offending "leaks[i].traces[j]" in
 * `err` (`cap` bytes, may be 0); on error no signature was changed. */
ld_status ld_trace_validate(lw_leak_report *rep, char *err, size_t cap);

#endif
