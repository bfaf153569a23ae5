/* grouping.h — leak groups: one per (app, signature). Recomputes signatures from the
 * traces (never trusts a device), upserts groups and counts each report's occurrences once
 * (ARCHITECTURE pipeline step 9). */
#ifndef LD_GROUPING_H
#define LD_GROUPING_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "leakcore.h"

/* The grouping of one statement, as CTEs that follow a CTE `src` giving one row per leak
 * signature of each report to group (at most one per (report, signature): its first listing):
 * app_id, report_id, app_version, build, install_id, sig (the server's own signature:
 * ld_trace_validate, or the analyzer), objects (the leak's count, bigint), pos (the row's
 * place in the statement, in the order of the reports and, within one, of its leaks: a new
 * group's representative is the leak at its smallest pos) and vrank (the report's place in
 * the order of (build, place in the statement): a group's first version is that of its
 * smallest vrank, its last that of its largest; on an equal build the later report is the
 * newer). A group's fields come from SQL expressions of `p.rep_pos` (that smallest pos) and
 * `p.first_r`/`p.last_r` (those vranks): KIND, DESCR, PATTERN and CLASS (of the leak's first
 * trace's last element, may be NULL), FIRSTV and LASTV (versions), and REP, the representative
 * trace (json). Each statement writes them as cheaply as its source allows (array elements
 * of its parameters for traces reports): with per-group ordered aggregates over the rows
 * instead, their sorts were nearly a tenth of PostgreSQL's CPU a report.
 * REP is evaluated only for a group that did not exist when the statement began (cutting a
 * trace out of a ~10 KB document costs about as much as the rest of the report; traces reports
 * of several leaks send each one's first trace instead, or a report's cost grew with its leaks
 * times its size); for the
 * others, the JSON null in its place goes to an insert that turns into the update (leakd
 * never deletes a group; deleting its app by hand would, and fails this insert on the app's
 * key). Set-based: the devices new to each signature are inserted first (keyed by app and a
 * 16-byte hash of signature and install_id, migration 0008, so the group need not exist yet),
 * then each group the batch touches is upserted once with the batch's sums and its new
 * devices, and the occurrences are inserted. Devices in (app, key) order, then groups in
 * (app, signature) order, are locked, so concurrent statements cannot deadlock, and a device
 * two of them insert at once is new to only one. */
#define LD_GROUPING_CTES(KIND, DESCR, PATTERN, CLASS, FIRSTV, LASTV, REP) \
    /* An empty install_id (unknown device) is not a device. The device table outlives \
     * retention, so a device seen again after its occurrences were purged is not new. The \
     * signature has 40 characters, so sig || install_id is unambiguous. */ \
    " dkey AS (" \
    "  SELECT DISTINCT app_id, sig," \
    "    encode(substring(sha256(convert_to(sig || install_id, 'UTF8')) FOR 16), 'hex')::uuid AS k" \
    "  FROM src WHERE install_id <> '')," \
    " dev AS (" \
    "  INSERT INTO leak_group_devices (app_id, device_key) SELECT app_id, k FROM dkey ORDER BY 1, 2" \
    "  ON CONFLICT DO NOTHING RETURNING app_id, device_key)," \
    " new_dev AS (" \
    "  SELECT d.app_id, d.sig, count(*) AS n FROM dev JOIN dkey d ON d.app_id = dev.app_id AND d.k = dev.device_key" \
    "  GROUP BY d.app_id, d.sig)," \
    " per_group AS (" \
    "  SELECT app_id, sig, count(*) AS n, LEAST(sum(objects), 9223372036854775807)::bigint AS objects," \
    "    min(build) AS min_build, max(build) AS max_build, min(vrank) AS first_r, max(vrank) AS last_r," \
    "    min(pos) AS rep_pos" \
    "  FROM src GROUP BY app_id, sig)," \
    " grp AS (" \
    "  INSERT INTO leak_groups AS g (app_id, signature, kind, short_description, leaking_class, library_pattern," \
    "    representative, occurrences, leaked_objects, devices, first_seen, last_seen, first_version, last_version," \
    "    first_build, last_build)" \
    "  SELECT p.app_id, p.sig, " KIND "," \
    "    COALESCE(NULLIF(" DESCR ", ''), " PATTERN ", " CLASS ", '')," \
    "    COALESCE(" CLASS ", ''), " PATTERN "," \
    /* a scalar subquery: PostgreSQL ran NOT EXISTS as one hash of every group of the table */ \
    "    CASE WHEN (SELECT x.id FROM leak_groups x WHERE x.app_id = p.app_id AND x.signature = p.sig) IS NULL" \
    "      THEN " REP " ELSE 'null'::json END," \
    "    p.n, objects, COALESCE(d.n, 0), now(), now(), " FIRSTV ", " LASTV ", min_build, max_build" \
    "  FROM per_group p LEFT JOIN new_dev d ON d.app_id = p.app_id AND d.sig = p.sig ORDER BY p.app_id, p.sig" \
    "  ON CONFLICT (app_id, signature) DO UPDATE SET" \
    "    occurrences = g.occurrences + EXCLUDED.occurrences," \
    "    leaked_objects = LEAST(g.leaked_objects::numeric + EXCLUDED.leaked_objects, 9223372036854775807)::bigint," \
    "    devices = g.devices + EXCLUDED.devices," \
    /* now() is when the transaction began: one that began first may reach the row last, \
     * having waited for another group's lock */ \
    "    first_seen = LEAST(g.first_seen, EXCLUDED.first_seen)," \
    "    last_seen = GREATEST(g.last_seen, EXCLUDED.last_seen)," \
    "    first_version = CASE WHEN EXCLUDED.first_build < g.first_build THEN EXCLUDED.first_version" \
    "      ELSE g.first_version END," \
    "    first_build = LEAST(g.first_build, EXCLUDED.first_build)," \
    "    last_version = CASE WHEN EXCLUDED.last_build >= g.last_build THEN EXCLUDED.last_version" \
    "      ELSE g.last_version END," \
    "    last_build = GREATEST(g.last_build, EXCLUDED.last_build)," \
    "    status = CASE WHEN g.status = 'fixed' AND g.fixed_in_build IS NOT NULL" \
    "      AND EXCLUDED.last_build > g.fixed_in_build THEN 'regressed' ELSE g.status END" \
    "  RETURNING g.id, g.app_id, g.signature)," \
    " occ AS (" \
    "  INSERT INTO occurrences (report_id, group_id, app_id, leaked_objects, app_version, build, install_id)" \
    "  SELECT o.report_id, grp.id, o.app_id, o.objects, o.app_version, o.build, o.install_id" \
    "  FROM src o JOIN grp ON grp.app_id = o.app_id AND grp.signature = o.sig" \
    "  ON CONFLICT DO NOTHING)"

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
