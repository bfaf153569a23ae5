/* grouping.c — leak groups: the server's own signatures (ld_trace_validate), and the
 * set-based grouping of stored reports, a whole batch in one statement. */
#define _POSIX_C_SOURCE 200809L

#include "grouping.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports.h"
#include "uuid.h"

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

/* The stored reports to group: per leak signature of each report not grouped before (its
 * first listing, with the counts of all its listings summed), the fields LD_GROUPING_CTES
 * needs, read from the stored result. LATERAL:
 * one primary-key lookup per report, whatever a plan cached while the table was small would
 * prefer (a hash join over a scan of every report). Few rows (a worker groups one report at a
 * time): the group's fields are looked up in `src` by pos and vrank. */
static const char group_stored_sql[] =
    "WITH l0 AS ("
    "  SELECT DISTINCT ON (r.id, l.leak->>'signature') r.app_id, r.id AS report_id, r.app_version, r.build,"
    "    r.install_id, o.ord, l.lord, l.leak, l.leak->>'signature' AS sig,"
    "    sum((l.leak->>'count')::numeric) OVER (PARTITION BY r.id, l.leak->>'signature') AS total"
    "  FROM unnest($1::bigint[], $2::uuid[]) WITH ORDINALITY AS o(app_id, id, ord)"
    "  CROSS JOIN LATERAL (SELECT * FROM reports x WHERE x.app_id = o.app_id AND x.id = o.id"
    "    AND NOT EXISTS (SELECT 1 FROM occurrences c WHERE c.report_id = x.id)) r"
    "  CROSS JOIN LATERAL json_array_elements(r.result::json->'leaks') WITH ORDINALITY AS l(leak, lord)"
    "  ORDER BY r.id, l.leak->>'signature', l.lord),"
    " src AS ("
    "  SELECT app_id, report_id, app_version, build, install_id, sig, leak,"
    "    LEAST(total, 9223372036854775807)::bigint AS objects,"
    "    row_number() OVER (ORDER BY ord, lord) AS pos, dense_rank() OVER (ORDER BY build, ord) AS vrank"
    "  FROM l0),"
    LD_GROUPING_CTES("(SELECT s.leak->>'kind' FROM src s WHERE s.pos = p.rep_pos)",
                     "(SELECT s.leak->>'short_description' FROM src s WHERE s.pos = p.rep_pos)",
                     "(SELECT s.leak->>'library_pattern' FROM src s WHERE s.pos = p.rep_pos)",
                     "(SELECT s.leak->'traces'->0->'elements'->-1->>'class' FROM src s WHERE s.pos = p.rep_pos)",
                     "(SELECT s.app_version FROM src s WHERE s.vrank = p.first_r LIMIT 1)",
                     "(SELECT s.app_version FROM src s WHERE s.vrank = p.last_r LIMIT 1)",
                     "(SELECT s.leak->'traces'->0 FROM src s WHERE s.pos = p.rep_pos)")
    " SELECT count(*) FROM grp";

/* Appends `s` to the array literal in `b` (PostgreSQL's text form, every element quoted). */
static int array_add(char **b, size_t *len, size_t *cap, const char *s) {
    size_t need = *len + strlen(s) + 4;
    if (need > *cap) {
        size_t ncap = *cap ? *cap * 2 : 256;
        while (ncap < need) ncap *= 2;
        char *n = realloc(*b, ncap);
        if (!n) return -1;
        *b = n;
        *cap = ncap;
    }
    *len += (size_t)sprintf(*b + *len, "%s\"%s\"", *len ? "," : "{", s);
    return 0;
}

ld_status ld_group_reports(ld_db *db, size_t n, const int64_t *app_ids, const char *const *report_ids) {
    if (!db || (n && (!app_ids || !report_ids))) return LD_ERR_INVALID;
    if (n == 0) return LD_OK;
    ld_status st = LD_OK;
    PGresult *res = NULL;
    char *apps = NULL, *ids = NULL;
    size_t alen = 0, acap = 0, ilen = 0, icap = 0;
    for (size_t i = 0; i < n; i++) {
        char num[32];
        if (!lw__uuid_valid(report_ids[i])) {
            st = LD_ERR_INVALID;
            goto out;
        }
        snprintf(num, sizeof num, "%" PRId64, app_ids[i]);
        if (array_add(&apps, &alen, &acap, num) || array_add(&ids, &ilen, &icap, report_ids[i])) {
            st = LD_ERR_NOMEM;
            goto out;
        }
    }
    strcat(apps, "}"); /* array_add keeps 4 bytes spare */
    strcat(ids, "}");
    const char *p[] = {apps, ids};
    if ((st = ld_db_exec(db, &res, group_stored_sql, 2, p)) != LD_OK) goto out;
    if (PQntuples(res) != 1) st = ld_db_fail(db, LD_ERR_INTERNAL, "grouping returned %d rows", PQntuples(res));

out:
    PQclear(res);
    free(apps);
    free(ids);
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
