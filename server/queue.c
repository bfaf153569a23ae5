/* queue.c — the analysis queue: claim with SKIP LOCKED, leases, retries, completion. */
#define _POSIX_C_SOURCE 200809L

#include "queue.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grouping.h"
#include "uuid.h"

void ld_job_clear(ld_job *job) {
    if (!job) return;
    free(job->app_slug);
    free(job->blob_path);
    free(job->app_version);
    free(job->install_id);
    memset(job, 0, sizeof *job);
}

static char *dup_value(const PGresult *res, int col) {
    return strdup(PQgetisnull(res, 0, col) ? "" : PQgetvalue(res, 0, col));
}

ld_status ld_job_claim(ld_db *db, const char *owner, const char *store, int lease_seconds, ld_job *job) {
    if (!db || !owner || !*owner || !lw__uuid_valid(store) || lease_seconds < 1 || !job) return LD_ERR_INVALID;
    memset(job, 0, sizeof *job);
    ld_status st;
    PGresult *res = NULL;
    char lease[16];
    snprintf(lease, sizeof lease, "%d", lease_seconds);
    const char *p[] = {owner, lease, store};
    /* The status IN (...) term matches the partial index reports_queue. Another store's
     * reports are skipped, not claimed: their dumps are not in this instance's data dir. */
    st = ld_db_exec(db, &res,
                    "WITH next AS ("
                    "  SELECT app_id, id FROM reports"
                    "  WHERE status IN ('queued', 'analyzing')"
                    "    AND (lease_until IS NULL OR lease_until < now())"
                    "    AND (blob_store IS NULL OR blob_store = $3::uuid)"
                    "  ORDER BY received_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                    " UPDATE reports r SET status = 'analyzing', attempts = r.attempts + 1,"
                    "   lease_owner = $1, lease_until = now() + make_interval(secs => $2::int)"
                    " FROM next, apps a"
                    " WHERE r.app_id = next.app_id AND r.id = next.id AND a.id = r.app_id"
                    " RETURNING r.app_id, r.id, a.slug, r.blob_path, r.blob_bytes, r.attempts, r.app_version,"
                    "   r.build, r.install_id, r.lost_leases",
                    3, p);
    if (st != LD_OK) goto out;
    if (PQntuples(res) != 1) {
        st = LD_ERR_NOT_FOUND;
        goto out;
    }
    job->app_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    snprintf(job->report_id, sizeof job->report_id, "%s", PQgetvalue(res, 0, 1));
    job->blob_bytes = strtoll(PQgetvalue(res, 0, 4), NULL, 10);
    job->attempts = (int)strtol(PQgetvalue(res, 0, 5), NULL, 10);
    job->build = strtoll(PQgetvalue(res, 0, 7), NULL, 10);
    job->lost_leases = (int)strtol(PQgetvalue(res, 0, 9), NULL, 10);
    job->app_slug = dup_value(res, 2);
    job->blob_path = dup_value(res, 3);
    job->app_version = dup_value(res, 6);
    job->install_id = dup_value(res, 8);
    if (!job->app_slug || !job->blob_path || !job->app_version || !job->install_id) {
        /* The row stays 'analyzing' under our lease; it expires and is claimed again. */
        ld_job_clear(job);
        st = LD_ERR_NOMEM;
    }

out:
    PQclear(res);
    return st;
}

int ld_job_attempts_used(const ld_job *job) {
    int used = job->attempts - job->lost_leases;
    return used > 0 ? used : 0;
}

/* Runs `sql` on the job's report, whose $1..$3 are (app_id, report_id, the job's attempts):
 * LD_OK when it read or changed exactly one row, LD_ERR_NOT_FOUND when none. */
static ld_status job_statement(ld_db *db, const ld_job *job, const char *sql) {
    if (!db || !job) return LD_ERR_INVALID;
    char app[32], attempts[16];
    snprintf(app, sizeof app, "%" PRId64, job->app_id);
    snprintf(attempts, sizeof attempts, "%d", job->attempts);
    const char *p[] = {app, job->report_id, attempts};
    PGresult *res = NULL;
    ld_status st = ld_db_exec(db, &res, sql, 3, p);
    if (st == LD_OK && strcmp(PQcmdTuples(res), "1") != 0) st = LD_ERR_NOT_FOUND;
    PQclear(res);
    return st;
}

ld_status ld_job_lease_lost(ld_db *db, const ld_job *job) {
    /* Someone claimed it after us (attempts grew) and so took our lease. A worker calls this at
     * most once for a claim; the bound keeps the latest claim, whose worker has lost nothing
     * yet, counted whatever happens. */
    return job_statement(db, job,
                         "UPDATE reports SET lost_leases = lost_leases + 1"
                         " WHERE app_id = $1 AND id = $2::uuid AND attempts > $3::int"
                         "   AND lost_leases < attempts - 1");
}

ld_status ld_job_done_by(ld_db *db, const ld_job *job) {
    return job_statement(db, job,
                         "SELECT 1 FROM reports WHERE app_id = $1 AND id = $2::uuid AND status = 'done'"
                         " AND attempts = $3::int AND lease_owner IS NULL");
}

ld_status ld_job_next_due(ld_db *db, long *ms) {
    if (!db || !ms) return LD_ERR_INVALID;
    *ms = -1;
    PGresult *res = NULL;
    ld_status st = ld_db_exec(db, &res,
                              "SELECT ceil(extract(epoch FROM min(lease_until) - now()) * 1000)::bigint FROM reports"
                              " WHERE status IN ('queued', 'analyzing') AND lease_until >= now()",
                              0, NULL);
    if (st == LD_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) *ms = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return st;
}

/* Runs `sql` whose $1..$3 are (app_id, report_id, owner) and whose WHERE clause holds the
 * lease check, with `extra` more parameters from $5 on ($4 = the job's attempts). LD_OK when
 * it changed the row, LD_ERR_NOT_FOUND when the lease was not ours. When `first` is not NULL,
 * *first = the first column of what the statement returned (a RETURNING), as 0 or 1. */
static ld_status leased_update_returning(ld_db *db, const ld_job *job, const char *owner, const char *sql, int extra,
                                         const char *const *params, int *first) {
    if (!db || !job || !owner) return LD_ERR_INVALID;
    char app[32], attempts[16];
    const char *p[8] = {0};
    if (extra < 0 || extra > 4) return LD_ERR_INVALID;
    snprintf(app, sizeof app, "%" PRId64, job->app_id);
    snprintf(attempts, sizeof attempts, "%d", job->attempts);
    p[0] = app;
    p[1] = job->report_id;
    p[2] = owner;
    p[3] = attempts;
    for (int i = 0; i < extra; i++) p[4 + i] = params[i];
    PGresult *res = NULL;
    ld_status st = ld_db_exec(db, &res, sql, 4 + extra, p);
    if (st == LD_OK && strcmp(PQcmdTuples(res), "1") != 0) st = LD_ERR_NOT_FOUND;
    if (st == LD_OK && first)
        *first = PQntuples(res) == 1 && PQnfields(res) >= 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return st;
}

static ld_status leased_update(ld_db *db, const ld_job *job, const char *owner, const char *sql, int extra,
                               const char *const *params) {
    return leased_update_returning(db, job, owner, sql, extra, params, NULL);
}

#define LEASE_IS_OURS                                                                                              \
    " WHERE app_id = $1 AND id = $2::uuid AND status = 'analyzing' AND lease_owner = $3 AND attempts = $4::int"

ld_status ld_job_renew(ld_db *db, const ld_job *job, const char *owner, int lease_seconds) {
    if (lease_seconds < 1) return LD_ERR_INVALID;
    char lease[16];
    snprintf(lease, sizeof lease, "%d", lease_seconds);
    const char *p[] = {lease};
    return leased_update(db, job, owner,
                         "UPDATE reports SET lease_until = now() + make_interval(secs => $5::int)" LEASE_IS_OURS, 1, p);
}

/* Back to 'queued' with the lease cleared: the attempt given back when `refund`, the error
 * replaced when `error` is not NULL, and not claimable for `seconds` (lease_until) when > 0. */
static ld_status requeue(ld_db *db, const ld_job *job, const char *owner, int refund, const char *error, int seconds) {
    char secs[16];
    snprintf(secs, sizeof secs, "%d", seconds > 0 ? seconds : 0);
    const char *p[] = {refund ? "1" : "0", error, secs};
    return leased_update(db, job, owner,
                         "UPDATE reports SET status = 'queued', lease_owner = NULL, error = coalesce($6, error),"
                         " lease_until = CASE WHEN $7::int > 0 THEN now() + make_interval(secs => $7::int) END,"
                         " attempts = GREATEST(attempts - $5::int, 0)" LEASE_IS_OURS,
                         3, p);
}

ld_status ld_job_release(ld_db *db, const ld_job *job, const char *owner, int refund) {
    return requeue(db, job, owner, refund, NULL, 0);
}

ld_status ld_job_defer(ld_db *db, const ld_job *job, const char *owner, const char *error, int seconds, int refund) {
    return requeue(db, job, owner, refund, error ? error : "", seconds);
}

ld_status ld_job_fail(ld_db *db, const ld_job *job, const char *owner, const char *error, int permanent,
                      int max_attempts, int retry_after_s, int *failed) {
    char max[16], after[16];
    snprintf(max, sizeof max, "%d", max_attempts);
    snprintf(after, sizeof after, "%d", retry_after_s > 0 ? retry_after_s : 0);
    const char *p[] = {error ? error : "", permanent ? "1" : "0", max, after};
    int is_failed = 0;
    /* The attempts used are read from the row, not from the job: a worker that lost its lease
     * to this claim may have given its attempt back since (ld_job_lease_lost). */
#define LAST_ATTEMPT "($6::int = 1 OR attempts - lost_leases >= $7::int)"
    ld_status st = leased_update_returning(
        db, job, owner,
        "UPDATE reports SET error = $5, lease_owner = NULL,"
        " status = CASE WHEN " LAST_ATTEMPT " THEN 'failed' ELSE 'queued' END,"
        " lease_until = CASE WHEN NOT " LAST_ATTEMPT " AND $8::int > 0"
        "   THEN now() + make_interval(secs => $8::int) END,"
        /* when it failed: LEAKD_FAILED_BLOB_DAYS counts from then (it counted
         * from received_at, and a dump that had waited in the queue longer
         * was deleted seconds after failing) */
        " analyzed_at = CASE WHEN " LAST_ATTEMPT " THEN now() ELSE analyzed_at END"
        LEASE_IS_OURS " RETURNING status = 'failed'",
        4, p, &is_failed);
#undef LAST_ATTEMPT
    if (failed) *failed = st == LD_OK && is_failed;
    return st;
}

/* One attempt of ld_job_complete's transaction. */
static ld_status complete_once(ld_db *db, const ld_job *job, const char *owner, const lw_leak_report *rep,
                               const char *json) {
    char nleaks[32];
    snprintf(nleaks, sizeof nleaks, "%zu", rep->leak_count);
    const char *p[] = {json, nleaks};
    ld_status st = ld_db_begin(db);
    if (st != LD_OK) return st;
    st = leased_update(db, job, owner,
                       "UPDATE reports SET status = 'done', result = $5, leaks_found = $6::int,"
                       " analyzed_at = now(), error = NULL, lease_owner = NULL, lease_until = NULL" LEASE_IS_OURS,
                       2, p);
    const char *id = job->report_id;
    if (st == LD_OK) st = ld_group_reports(db, 1, &job->app_id, &id);
    if (st == LD_OK) st = ld_db_commit(db);
    else ld_db_rollback(db);
    return st;
}

ld_status ld_job_complete(ld_db *db, const ld_job *job, const char *owner, lw_leak_report *rep) {
    if (!db || !job || !owner || !rep) return LD_ERR_INVALID;
    /* The stored signatures are the server's (grouping reads them from the result). */
    char msg[300];
    if (ld_trace_validate(rep, msg, sizeof msg) != LD_OK)
        return ld_db_fail(db, LD_ERR_INVALID, "the analysis result is inconsistent: %s", msg);
    char *json = lw_leak_report_to_json(rep, 0);
    if (!json) return LD_ERR_NOMEM;
    ld_status st = complete_once(db, job, owner, rep, json);
    if (ld_db_retryable(db, st)) st = complete_once(db, job, owner, rep, json);
    free(json);
    return st;
}

ld_status ld_jobs_release_owner(ld_db *db, const char *owner, int refund, int64_t *n) {
    if (!db || !owner) return LD_ERR_INVALID;
    if (n) *n = 0;
    PGresult *res = NULL;
    const char *p[] = {owner, refund ? "1" : "0"};
    ld_status st = ld_db_exec(db, &res,
                              "UPDATE reports SET status = 'queued', lease_owner = NULL, lease_until = NULL,"
                              " attempts = GREATEST(attempts - $2::int, 0)"
                              " WHERE status = 'analyzing' AND lease_owner = $1",
                              2, p);
    if (st == LD_OK && n) *n = strtoll(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return st;
}
