/* grouping.c — leak groups: recompute each leak's signature, upsert its group and count
 * the report's occurrence once, under the group's row lock. */
#define _POSIX_C_SOURCE 200809L

#include "grouping.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A leak of the report being grouped, with its recomputed signature. */
typedef struct {
    char signature[41];
    size_t index; /* in rep->leaks */
} sig_entry;

/* A shallow copy of `t` whose element array is its own, so recomputing the suspect flags
 * leaves the caller's report untouched. Strings stay borrowed from `t`. */
static ld_status trace_copy(const lw_trace *t, lw_trace *copy) {
    *copy = *t;
    copy->elements = malloc(t->element_count * sizeof *t->elements);
    if (!copy->elements) return LD_ERR_NOMEM;
    memcpy(copy->elements, t->elements, t->element_count * sizeof *t->elements);
    return LD_OK;
}

/* The signature the server believes for leak `l` (the device's is ignored). */
static ld_status leak_signature(const lw_leak *l, char out[41]) {
    if (l->library) {
        if (!l->library_pattern) return LD_ERR_INVALID;
        lw_pattern_signature(l->library_pattern, out);
        return LD_OK;
    }
    if (l->trace_count == 0 || l->traces[0].element_count == 0) return LD_ERR_INVALID;
    lw_trace copy;
    ld_status st = trace_copy(&l->traces[0], &copy);
    if (st != LD_OK) return st;
    lw_trace_update_suspects(&copy);
    lw_trace_signature(&copy, out);
    free(copy.elements);
    return LD_OK;
}

static int sig_cmp(const void *a, const void *b) {
    const sig_entry *x = a, *y = b;
    int c = strcmp(x->signature, y->signature);
    if (c) return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The representative trace as the "traces" element of the trace JSON: a one-leak, one-trace
 * report serialized with libleakcore; the SQL picks leaks[0].traces[0] out of it. The trace's
 * suspect flags are the recomputed ones. malloc'd, or NULL. */
static char *representative_doc(const lw_leak *l) {
    lw_trace copy;
    if (trace_copy(&l->traces[0], &copy) != LD_OK) return NULL;
    lw_trace_update_suspects(&copy);
    lw_leak one = {.library = l->library, .count = 1, .traces = &copy, .trace_count = 1};
    lw_leak_report doc = {.format = 1, .index_ms = -1, .paths_ms = -1, .retained_ms = -1, .leaks = &one, .leak_count = 1};
    char *json = lw_leak_report_to_json(&doc, 0);
    free(copy.elements);
    return json;
}

/* Upserts the group of leak `l` (signature `sig`) and, when this report's occurrence of it is
 * new, adds it to the group's counters. The upsert's ON CONFLICT DO UPDATE takes the group's
 * row lock first, so a concurrent report of the same group waits for our commit and then
 * sees our occurrence (READ COMMITTED: each statement takes a fresh snapshot). */
static ld_status group_one(ld_db *db, const char *app_id, const char *report_id, const char *app_version,
                           const char *build, const char *install_id, const lw_leak *l, const char *sig) {
    ld_status st;
    PGresult *res = NULL;
    char *rep_doc = NULL;
    char group_id[32], count[32];

    const lw_trace *t = &l->traces[0];
    const lw_trace_element *last = &t->elements[t->element_count - 1];
    const char *leaking_class = last->class_name ? last->class_name : "";
    const char *pattern = l->library ? l->library_pattern : NULL;
    const char *short_desc = l->short_description && *l->short_description ? l->short_description
                             : pattern                                        ? pattern
                                                                              : leaking_class;
    rep_doc = representative_doc(l);
    if (!rep_doc) {
        st = LD_ERR_NOMEM;
        goto out;
    }
    const char *up[] = {app_id, sig, l->library ? "library" : "application", short_desc, leaking_class,
                        pattern, rep_doc, app_version, build};
    st = ld_db_exec(db, &res,
                    "INSERT INTO leak_groups (app_id, signature, kind, short_description, leaking_class,"
                    "  library_pattern, representative, first_seen, last_seen, first_version, last_version,"
                    "  first_build, last_build)"
                    " VALUES ($1, $2, $3, $4, $5, $6, ($7::jsonb)->'leaks'->0->'traces'->0, now(), now(),"
                    "  $8, $8, $9, $9)"
                    " ON CONFLICT (app_id, signature) DO UPDATE SET grouping_version = leak_groups.grouping_version"
                    " RETURNING id",
                    9, up);
    if (st != LD_OK) goto out;
    if (PQntuples(res) != 1) {
        st = LD_ERR_INTERNAL;
        goto out;
    }
    snprintf(group_id, sizeof group_id, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    res = NULL;

    snprintf(count, sizeof count, "%" PRIu64, l->count > INT64_MAX ? (uint64_t)INT64_MAX : l->count);
    const char *occ[] = {report_id, group_id, app_id, count, app_version, build, install_id};
    st = ld_db_exec(db, &res,
                    "INSERT INTO occurrences (report_id, group_id, app_id, leaked_objects, app_version, build, install_id)"
                    " VALUES ($1::uuid, $2, $3, $4, $5, $6, $7)"
                    " ON CONFLICT DO NOTHING RETURNING 1",
                    7, occ);
    if (st != LD_OK) goto out;
    int inserted = PQntuples(res) == 1;
    PQclear(res);
    res = NULL;
    if (!inserted) goto out; /* this report was counted before */

    /* An empty install_id (unknown device) is not a device. The device table outlives
     * retention, so a device seen again after its occurrences were purged is not new. */
    int new_device = 0;
    if (install_id[0]) {
        const char *dev[] = {group_id, install_id};
        st = ld_db_exec(db, &res,
                        "INSERT INTO leak_group_devices (group_id, install_id) VALUES ($1, $2)"
                        " ON CONFLICT DO NOTHING RETURNING 1",
                        2, dev);
        if (st != LD_OK) goto out;
        new_device = PQntuples(res) == 1;
        PQclear(res);
        res = NULL;
    }
    /* On an equal build the newer occurrence (this one) becomes the last version; the older
     * stays the first. */
    const char *upd[] = {group_id, count, new_device ? "1" : "0", build, app_version};
    st = ld_db_exec(db, NULL,
                    "UPDATE leak_groups SET"
                    "  occurrences = occurrences + 1,"
                    "  leaked_objects = leaked_objects + $2,"
                    "  devices = devices + $3::int,"
                    "  last_seen = now(),"
                    "  first_version = CASE WHEN $4::bigint < first_build THEN $5 ELSE first_version END,"
                    "  first_build = LEAST(first_build, $4::bigint),"
                    "  last_version = CASE WHEN $4::bigint >= last_build THEN $5 ELSE last_version END,"
                    "  last_build = GREATEST(last_build, $4::bigint),"
                    "  status = CASE WHEN status = 'fixed' AND fixed_in_build IS NOT NULL AND $4::bigint > fixed_in_build"
                    "    THEN 'regressed' ELSE status END"
                    " WHERE id = $1",
                    5, upd);

out:
    PQclear(res);
    free(rep_doc);
    return st;
}

ld_status ld_group_report(ld_db *db, int64_t app_id, const char *report_id, const char *app_version, int64_t build,
                          const char *install_id, const lw_leak_report *rep) {
    if (!db || !report_id || !rep) return LD_ERR_INVALID;
    if (rep->leak_count == 0) return LD_OK;

    ld_status st = LD_OK;
    char app[32], bld[32];
    snprintf(app, sizeof app, "%" PRId64, app_id);
    snprintf(bld, sizeof bld, "%" PRId64, build);
    sig_entry *sigs = calloc(rep->leak_count, sizeof *sigs);
    if (!sigs) return LD_ERR_NOMEM;

    for (size_t i = 0; i < rep->leak_count; i++) {
        const lw_leak *l = &rep->leaks[i];
        if (l->trace_count == 0 || l->traces[0].element_count == 0) {
            st = LD_ERR_INVALID;
            goto out;
        }
        if ((st = leak_signature(l, sigs[i].signature)) != LD_OK) goto out;
        sigs[i].index = i;
    }
    /* Signature order: every transaction locks groups in the same order (no deadlock); a
     * signature listed twice is grouped once, by its first listing. */
    qsort(sigs, rep->leak_count, sizeof *sigs, sig_cmp);
    for (size_t i = 0; i < rep->leak_count; i++) {
        if (i > 0 && strcmp(sigs[i].signature, sigs[i - 1].signature) == 0) continue;
        st = group_one(db, app, report_id, app_version ? app_version : "", bld, install_id ? install_id : "",
                       &rep->leaks[sigs[i].index], sigs[i].signature);
        if (st != LD_OK) goto out;
    }

out:
    free(sigs);
    return st;
}

ld_status ld_trace_validate(lw_leak_report *rep, char *err, size_t cap) {
    if (!rep) return LD_ERR_INVALID;
    if (cap) err[0] = '\0';
    ld_status st = LD_OK;
    lw_trace copy = {0};
    char (*sigs)[41] = NULL;

    if (rep->leak_count) {
        sigs = calloc(rep->leak_count, sizeof *sigs);
        if (!sigs) return LD_ERR_NOMEM;
    }
    for (size_t i = 0; i < rep->leak_count; i++) {
        const lw_leak *l = &rep->leaks[i];
        if (l->trace_count == 0) {
            if (cap) snprintf(err, cap, "leaks[%zu]: a leak needs at least one trace", i);
            st = LD_ERR_INVALID;
            goto out;
        }
        if (l->library && (!l->library_pattern || !*l->library_pattern)) {
            if (cap) snprintf(err, cap, "leaks[%zu]: a library leak needs its library_pattern", i);
            st = LD_ERR_INVALID;
            goto out;
        }
        for (size_t j = 0; j < l->trace_count; j++) {
            if (l->traces[j].element_count == 0) {
                if (cap) snprintf(err, cap, "leaks[%zu].traces[%zu]: a trace needs at least one element", i, j);
                st = LD_ERR_INVALID;
                goto out;
            }
            if ((st = trace_copy(&l->traces[j], &copy)) != LD_OK) goto out;
            int changed = lw_trace_update_suspects(&copy);
            free(copy.elements);
            copy.elements = NULL;
            if (changed) {
                if (cap)
                    snprintf(err, cap,
                             "leaks[%zu].traces[%zu]: the suspect flags disagree with the elements' leaking statuses",
                             i, j);
                st = LD_ERR_INVALID;
                goto out;
            }
        }
        if ((st = leak_signature(l, sigs[i])) != LD_OK) goto out;
    }
    for (size_t i = 0; i < rep->leak_count; i++) memcpy(rep->leaks[i].signature, sigs[i], sizeof sigs[i]);

out:
    free(copy.elements);
    free(sigs);
    return st;
}
