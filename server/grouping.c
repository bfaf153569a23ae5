/* grouping.c — leak groups: the server's own signatures (ld_trace_validate), and the
 * set-based grouping of stored reports, a whole batch in two statements. */
#define _POSIX_C_SOURCE 200809L

#include "grouping.h"

#include "reports.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Groups the leaks stored in reports.result of the given reports, set-based: one statement
 * upserts every group the batch touches (its counters raised by the batch's sums, once per
 * group however many reports hit it), inserts the occurrences and the devices; a second adds
 * the devices that were new. The stored result's signatures and suspect flags are the
 * server's own (ld_trace_validate, or the analyzer), so the representative is its first
 * trace as stored. Groups are upserted in (app, signature) order: concurrent batches lock
 * them in the same order and cannot deadlock. A report that already has occurrences was
 * grouped before and adds nothing. */
static const char group_sql[] =
    "WITH src AS ("
    "  SELECT r.app_id, r.id AS report_id, r.app_version, r.build, r.install_id, o.ord, l.leak, l.lord"
    "  FROM unnest($1::bigint[], $2::uuid[]) WITH ORDINALITY AS o(app_id, id, ord)"
    "  JOIN reports r ON r.app_id = o.app_id AND r.id = o.id"
    "  CROSS JOIN LATERAL jsonb_array_elements(r.result->'leaks') WITH ORDINALITY AS l(leak, lord)"
    "  WHERE NOT EXISTS (SELECT 1 FROM occurrences c WHERE c.report_id = r.id)),"
    /* each (report, signature) once, by its first listing */
    " occ_src AS ("
    "  SELECT DISTINCT ON (report_id, leak->>'signature') app_id, report_id, app_version, build, install_id, ord,"
    "    leak, leak->>'signature' AS sig,"
    "    LEAST((leak->>'count')::numeric, 9223372036854775807)::bigint AS objects"
    "  FROM src ORDER BY report_id, leak->>'signature', lord),"
    /* what the batch adds to each group; on an equal build the later report is the newer */
    " per_group AS ("
    "  SELECT app_id, sig, count(*) AS n, LEAST(sum(objects), 9223372036854775807)::bigint AS objects,"
    "    min(build) AS min_build, max(build) AS max_build,"
    "    (array_agg(app_version ORDER BY build, ord))[1] AS first_version,"
    "    (array_agg(app_version ORDER BY build DESC, ord DESC))[1] AS last_version,"
    "    (array_agg(leak ORDER BY ord))[1] AS leak"
    "  FROM occ_src GROUP BY app_id, sig),"
    " grp AS ("
    "  INSERT INTO leak_groups AS g (app_id, signature, kind, short_description, leaking_class, library_pattern,"
    "    representative, occurrences, leaked_objects, first_seen, last_seen, first_version, last_version,"
    "    first_build, last_build)"
    "  SELECT app_id, sig, leak->>'kind',"
    "    COALESCE(NULLIF(leak->>'short_description', ''), leak->>'library_pattern',"
    "             leak->'traces'->0->'elements'->-1->>'class', ''),"
    "    COALESCE(leak->'traces'->0->'elements'->-1->>'class', ''),"
    "    leak->>'library_pattern', leak->'traces'->0, n, objects, now(), now(),"
    "    first_version, last_version, min_build, max_build"
    "  FROM per_group ORDER BY app_id, sig"
    "  ON CONFLICT (app_id, signature) DO UPDATE SET"
    "    occurrences = g.occurrences + EXCLUDED.occurrences,"
    "    leaked_objects = LEAST(g.leaked_objects::numeric + EXCLUDED.leaked_objects, 9223372036854775807)::bigint,"
    "    last_seen = now(),"
    "    first_version = CASE WHEN EXCLUDED.first_build < g.first_build THEN EXCLUDED.first_version"
    "      ELSE g.first_version END,"
    "    first_build = LEAST(g.first_build, EXCLUDED.first_build),"
    "    last_version = CASE WHEN EXCLUDED.last_build >= g.last_build THEN EXCLUDED.last_version"
    "      ELSE g.last_version END,"
    "    last_build = GREATEST(g.last_build, EXCLUDED.last_build),"
    "    status = CASE WHEN g.status = 'fixed' AND g.fixed_in_build IS NOT NULL"
    "      AND EXCLUDED.last_build > g.fixed_in_build THEN 'regressed' ELSE g.status END"
    "  RETURNING g.id, g.app_id, g.signature),"
    " occ AS ("
    "  INSERT INTO occurrences (report_id, group_id, app_id, leaked_objects, app_version, build, install_id)"
    "  SELECT o.report_id, grp.id, o.app_id, o.objects, o.app_version, o.build, o.install_id"
    "  FROM occ_src o JOIN grp ON grp.app_id = o.app_id AND grp.signature = o.sig"
    "  ON CONFLICT DO NOTHING RETURNING group_id, install_id),"
    /* An empty install_id (unknown device) is not a device. The device table outlives
     * retention, so a device seen again after its occurrences were purged is not new. */
    " dev AS ("
    "  INSERT INTO leak_group_devices (group_id, install_id)"
    "  SELECT DISTINCT group_id, install_id FROM occ WHERE install_id <> ''"
    "  ON CONFLICT DO NOTHING RETURNING group_id)"
    " SELECT coalesce(array_agg(group_id ORDER BY group_id)::text, '{}'),"
    "        coalesce(array_agg(n ORDER BY group_id)::text, '{}')"
    " FROM (SELECT group_id, count(*) AS n FROM dev GROUP BY group_id) d";

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
        if (!ld_uuid_valid(report_ids[i])) {
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
    if ((st = ld_db_exec(db, &res, group_sql, 2, p)) != LD_OK) goto out;
    if (PQntuples(res) != 1) {
        st = ld_db_fail(db, LD_ERR_INTERNAL, "grouping returned %d rows", PQntuples(res));
        goto out;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "{}") != 0) {
        const char *d[] = {PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1)};
        st = ld_db_exec(db, NULL,
                        "UPDATE leak_groups g SET devices = g.devices + d.n"
                        " FROM unnest($1::bigint[], $2::bigint[]) AS d(id, n) WHERE g.id = d.id",
                        2, d);
    }

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
