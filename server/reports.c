/* reports.c — the reports table: idempotent inserts, the API's report object, retention. */
#define _POSIX_C_SOURCE 200809L

#include "reports.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grouping.h"

int ld_uuid_valid(const char *s) {
    if (!s) return 0;
    for (size_t i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
    }
    return s[36] == '\0';
}

/* A failure worth one more try: a serialization failure or deadlock leaves the connection
 * up, whereas a lost connection does not. */
static int retryable(ld_db *db, ld_status st) {
    PGconn *c = ld_db_conn(db);
    return st == LD_ERR_UNAVAILABLE && c && PQstatus(c) == CONNECTION_OK;
}

/* Inserts the report row (ON CONFLICT DO NOTHING) with `status`; for 'queued' also notifies
 * the workers, for 'done' stores `result` (trace JSON) and `leaks_found`. *created = 1 when
 * inserted; 0 when this app has it; LD_ERR_CONFLICT when another app has the id. */
static ld_status insert_report(ld_db *db, const ld_report_in *in, const char *status, const char *result,
                               const char *leaks_found, int *created) {
    ld_status st;
    PGresult *res = NULL;
    char app[32], build[32], bytes[32];

    *created = 0;
    if (!ld_uuid_valid(in->report_id) || !in->mode || !in->meta_json) return LD_ERR_INVALID;
    snprintf(app, sizeof app, "%" PRId64, in->app_id);
    snprintf(build, sizeof build, "%" PRId64, in->build);
    snprintf(bytes, sizeof bytes, "%" PRId64, in->blob_bytes);
    const char *p[] = {in->report_id, app, in->mode, status, in->app_version ? in->app_version : "", build,
                       in->install_id ? in->install_id : "", in->meta_json, in->blob_path, bytes, result, leaks_found};
    st = ld_db_exec(db, &res,
                    "WITH ins AS ("
                    "  INSERT INTO reports (id, app_id, mode, status, app_version, build, install_id, meta,"
                    "    blob_path, blob_bytes, result, leaks_found, analyzed_at)"
                    "  VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11::jsonb, $12::int,"
                    "    CASE WHEN $4 = 'done' THEN now() END)"
                    "  ON CONFLICT DO NOTHING RETURNING id, status),"
                    " notified AS (SELECT pg_notify('leakd_reports', id::text) FROM ins WHERE status = 'queued')"
                    " SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM notified),"
                    "  (SELECT app_id FROM reports WHERE id = $1::uuid)",
                    12, p);
    if (st != LD_OK) goto out;
    if (strcmp(PQgetvalue(res, 0, 0), "1") == 0) {
        *created = 1;
        goto out;
    }
    if (PQgetisnull(res, 0, 2)) {
        /* Inserted by a transaction that committed after this statement's snapshot. */
        PQclear(res);
        res = NULL;
        const char *q[] = {in->report_id};
        st = ld_db_exec(db, &res, "SELECT app_id FROM reports WHERE id = $1::uuid", 1, q);
        if (st != LD_OK) goto out;
        if (PQntuples(res) != 1) {
            st = LD_ERR_UNAVAILABLE; /* deleted meanwhile: let the client retry */
            goto out;
        }
        st = strcmp(PQgetvalue(res, 0, 0), app) == 0 ? LD_OK : LD_ERR_CONFLICT;
        goto out;
    }
    st = strcmp(PQgetvalue(res, 0, 2), app) == 0 ? LD_OK : LD_ERR_CONFLICT;

out:
    PQclear(res);
    return st;
}

ld_status ld_report_insert_queued(ld_db *db, const ld_report_in *in, int *created) {
    if (!db || !in || !created) return LD_ERR_INVALID;
    if (!in->mode || strcmp(in->mode, "heap") != 0) return LD_ERR_INVALID;
    return insert_report(db, in, "queued", NULL, NULL, created);
}

/* One attempt of ld_report_insert_traces' transaction. */
static ld_status insert_traces_once(ld_db *db, const ld_report_in *in, const lw_leak_report *rep, const char *json,
                                    int *created) {
    char nleaks[32];
    snprintf(nleaks, sizeof nleaks, "%zu", rep->leak_count);
    ld_status st = ld_db_begin(db);
    if (st != LD_OK) return st;
    st = insert_report(db, in, "done", json, nleaks, created);
    if (st == LD_OK && *created)
        st = ld_group_report(db, in->app_id, in->report_id, in->app_version, in->build, in->install_id, rep);
    if (st == LD_OK && *created) st = ld_db_commit(db);
    else ld_db_rollback(db); /* an error, or nothing was written */
    if (st != LD_OK) *created = 0;
    return st;
}

ld_status ld_report_insert_traces(ld_db *db, const ld_report_in *in, const lw_leak_report *rep, int *created) {
    if (!db || !in || !rep || !created) return LD_ERR_INVALID;
    *created = 0;
    if (!in->mode || strcmp(in->mode, "traces") != 0 || in->blob_path) return LD_ERR_INVALID;
    char *json = lw_leak_report_to_json(rep, 0);
    if (!json) return LD_ERR_NOMEM;
    ld_status st = insert_traces_once(db, in, rep, json, created);
    if (retryable(db, st)) st = insert_traces_once(db, in, rep, json, created);
    free(json);
    return st;
}

ld_status ld_report_get(ld_db *db, int64_t app_id, const char *report_id, json_t **out) {
    if (!db || !out) return LD_ERR_INVALID;
    *out = NULL;
    if (!ld_uuid_valid(report_id)) return LD_ERR_NOT_FOUND;
    ld_status st;
    PGresult *res = NULL;
    char app[32];
    snprintf(app, sizeof app, "%" PRId64, app_id);
    const char *p[] = {app, report_id};
    st = ld_db_exec(db, &res,
                    "SELECT json_build_object("
                    "  'id', r.id, 'app', a.slug, 'status', r.status, 'mode', r.mode,"
                    "  'received_at', to_char(r.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
                    "  'app_version', r.app_version, 'build', r.build, 'attempts', r.attempts,"
                    "  'error', CASE WHEN r.status = 'failed' THEN r.error END,"
                    "  'analyzed_at', CASE WHEN r.status = 'done' THEN"
                    "    to_char(r.analyzed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') END,"
                    "  'leaks_found', CASE WHEN r.status = 'done' THEN r.leaks_found END,"
                    "  'leaks', CASE WHEN r.status = 'done' THEN COALESCE(("
                    "    SELECT json_agg(json_build_object('signature', l->'signature', 'kind', l->'kind',"
                    "      'short_description', l->'short_description', 'count', l->'count') ORDER BY n)"
                    "    FROM jsonb_array_elements(r.result->'leaks') WITH ORDINALITY AS x(l, n)), '[]'::json)"
                    "    ELSE '[]'::json END)"
                    " FROM reports r JOIN apps a ON a.id = r.app_id"
                    " WHERE r.app_id = $1 AND r.id = $2::uuid",
                    2, p);
    if (st != LD_OK) goto out;
    if (PQntuples(res) != 1) {
        st = LD_ERR_NOT_FOUND;
        goto out;
    }
    json_error_t je;
    *out = json_loads(PQgetvalue(res, 0, 0), 0, &je);
    if (!*out) st = LD_ERR_INTERNAL;

out:
    PQclear(res);
    return st;
}

void ld_blob_paths_free(char **paths, size_t n) {
    if (!paths) return;
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

/* Runs `sql` (one parameter: days) in a transaction and collects the non-NULL blob paths
 * of column 0 of its RETURNING rows: a list the caller deletes from disk after the commit. */
static ld_status purge_returning_paths(ld_db *db, const char *sql, int days, int64_t *rows_out, char ***blob_paths_out,
                                       size_t *nblobs) {
    *rows_out = 0;
    *blob_paths_out = NULL;
    *nblobs = 0;
    ld_status st;
    PGresult *res = NULL;
    char **paths = NULL;
    size_t n = 0;
    char d[16];
    snprintf(d, sizeof d, "%d", days);
    const char *p[] = {d};
    /* One transaction: if the path list cannot be built, nothing is changed (no orphan blob). */
    if ((st = ld_db_begin(db)) != LD_OK) return st;
    st = ld_db_exec(db, &res, sql, 1, p);
    if (st != LD_OK) goto out;
    int rows = PQntuples(res);
    if (rows > 0) {
        paths = calloc((size_t)rows, sizeof *paths);
        if (!paths) {
            st = LD_ERR_NOMEM;
            goto out;
        }
    }
    for (int i = 0; i < rows; i++) {
        if (PQgetisnull(res, i, 0)) continue;
        paths[n] = strdup(PQgetvalue(res, i, 0));
        if (!paths[n]) {
            st = LD_ERR_NOMEM;
            goto out;
        }
        n++;
    }
    if ((st = ld_db_commit(db)) != LD_OK) goto out;
    *rows_out = rows;
    if (n) {
        *blob_paths_out = paths;
        *nblobs = n;
        paths = NULL;
    }

out:
    if (st != LD_OK) ld_db_rollback(db);
    ld_blob_paths_free(paths, n);
    PQclear(res);
    return st;
}

ld_status ld_retention_purge(ld_db *db, int days, int64_t *reports_deleted, char ***blob_paths_out, size_t *nblobs) {
    if (!db || days < 1 || !reports_deleted || !blob_paths_out || !nblobs) return LD_ERR_INVALID;
    return purge_returning_paths(db,
                                 "DELETE FROM reports WHERE received_at < now() - make_interval(days => $1::int)"
                                 " RETURNING blob_path",
                                 days, reports_deleted, blob_paths_out, nblobs);
}

ld_status ld_failed_blobs_purge(ld_db *db, int days, char ***blob_paths_out, size_t *nblobs) {
    if (!db || days < 0 || !blob_paths_out || !nblobs) return LD_ERR_INVALID;
    int64_t rows;
    return purge_returning_paths(db,
                                 "WITH old AS (SELECT app_id, id, blob_path FROM reports WHERE status = 'failed'"
                                 "   AND blob_path IS NOT NULL"
                                 "   AND coalesce(analyzed_at, received_at) < now() - make_interval(days => $1::int)"
                                 "   FOR UPDATE)"
                                 " UPDATE reports r SET blob_path = NULL FROM old"
                                 " WHERE r.app_id = old.app_id AND r.id = old.id RETURNING old.blob_path",
                                 days, &rows, blob_paths_out, nblobs);
}

ld_status ld_report_forget_blob(ld_db *db, int64_t app_id, const char *report_id) {
    char app[32];
    snprintf(app, sizeof app, "%lld", (long long)app_id);
    const char *p[] = {app, report_id};
    return ld_db_exec(db, NULL, "UPDATE reports SET blob_path = NULL WHERE app_id = $1 AND id = $2::uuid", 2, p);
}
