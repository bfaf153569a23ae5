/* queue.h — the analysis queue (ARCHITECTURE step 8): a heap report is its own job.
 * Workers claim the oldest claimable report with FOR UPDATE SKIP LOCKED and hold a lease
 * (owner + expiry) that they renew; every later step first checks that the lease is still
 * theirs, so a worker that lost its lease never writes a result. */
#ifndef LD_QUEUE_H
#define LD_QUEUE_H

#include <stdint.h>

#include "db.h"
#include "leakcore.h"

/* A claimed report. The strings are owned by the job (ld_job_clear frees them). */
typedef struct ld_job {
    int64_t app_id;
    char report_id[37];
    char *app_slug;
    char *blob_path;    /* relative to LEAKD_DATA_DIR */
    int64_t blob_bytes;
    int attempts;       /* including this claim */
    int lost_leases;    /* earlier claims given up by a live worker that lost its lease */
    char *app_version;
    int64_t build;
    char *install_id;
} ld_job;

void ld_job_clear(ld_job *job); /* frees the strings, zeroes the job; NULL is a no-op */

/* Claims, in one statement, the oldest report (by received_at) that is 'queued' or
 * 'analyzing' with an expired lease (a 'queued' one deferred by ld_job_defer once its time
 * has come), skipping rows other workers hold locked: status
 * 'analyzing', attempts + 1, lease_owner = `owner` ("host:pid"), lease_until = now() +
 * `lease_seconds`. Only reports whose dump is in `store` (this instance's blob store id,
 * blob_store.h) or that name no store (stored before migration 0017) are claimable.
 * Overwrites *job (clear a previous job first) and fills it on LD_OK
 * (ld_job_clear it); on any error *job is zeroed. LD_ERR_NOT_FOUND when nothing is claimable.
 * A job whose lease expired comes back with its attempts counted: the worker fails it
 * (ld_job_fail) when ld_job_attempts_used(job) > max_attempts instead of analyzing it again. */
ld_status ld_job_claim(ld_db *db, const char *owner, const char *store, int lease_seconds, ld_job *job);

/* The attempts that count against LEAKD_MAX_ATTEMPTS: the claims, this one included, less
 * those a live worker gave up when another took over its lease (ld_job_lease_lost), as the
 * job knew them when claimed. */
int ld_job_attempts_used(const ld_job *job);

/* For a worker that learned its lease was taken (ld_job_renew or ld_job_complete said
 * LD_ERR_NOT_FOUND) while it was alive and analyzing: its attempt is given back (lost_leases +
 * 1), once, when the report has been claimed again since (its attempts grew). LD_ERR_NOT_FOUND
 * when not (the report is gone, or no one claimed it). */
ld_status ld_job_lease_lost(ld_db *db, const ld_job *job);

/* LD_OK when the report is 'done' by `job`'s own claim: no other claim since (each adds an
 * attempt) and no lease left; for a worker whose COMMIT's answer was lost. LD_ERR_NOT_FOUND
 * when not, or another status when it cannot be told. */
ld_status ld_job_done_by(ld_db *db, const ld_job *job);

/* When nothing is claimable: *ms = milliseconds until the first report waiting for a time
 * (a retry's delay, a deferral, a lease) becomes claimable, or -1 when none waits. */
ld_status ld_job_next_due(ld_db *db, long *ms);

/* Extends the lease to now() + `lease_seconds`. LD_ERR_NOT_FOUND when the lease was lost
 * (another owner, another claim, or no longer analyzing). The lease is identified by
 * (owner, job->attempts). */
ld_status ld_job_renew(ld_db *db, const ld_job *job, const char *owner, int lease_seconds);

/* Puts the job back to 'queued' and clears the lease; `refund` = 1 gives back the attempt
 * (shutdown: the analysis was killed, not at fault). LD_ERR_NOT_FOUND when not ours. */
ld_status ld_job_release(ld_db *db, const ld_job *job, const char *owner, int refund);

/* Puts the job back to 'queued' with `error`, claimable again only after `seconds` (lease_until
 * holds the time): for a cause that will not be gone a moment later. `refund` = 1 gives the
 * attempt back, for a cause outside the dump (a full disk); 0 keeps it, for one the dump may
 * be (a dump that states no size and passes the free disk), so that it fails in the end (the
 * caller fails the last attempt). LD_ERR_NOT_FOUND when not ours. */
ld_status ld_job_defer(ld_db *db, const ld_job *job, const char *owner, const char *error, int seconds, int refund);

/* Records a failed attempt with `error`: 'failed' when `permanent` (e.g. a parse error) or
 * the attempts used (attempts - lost_leases, as stored now) >= `max_attempts`, else back to
 * 'queued' (the error text is kept), claimable again only after `retry_after_s` when > 0
 * (lease_until holds the time). Lease cleared. *failed (when not NULL) = 1 when the report is
 * 'failed' now. LD_ERR_NOT_FOUND when not ours. */
ld_status ld_job_fail(ld_db *db, const ld_job *job, const char *owner, const char *error, int permanent,
                      int max_attempts, int retry_after_s, int *failed);

/* In one transaction: checks the lease is still ours (else LD_ERR_NOT_FOUND and nothing is
 * written), sets 'done' with result = `rep` as trace JSON, leaks_found and analyzed_at,
 * clears the lease and error, and groups the leaks (ld_group_reports). `rep`'s signatures
 * are first replaced by the server's own (ld_trace_validate): LD_ERR_INVALID, with the
 * reason in ld_db_error, when its suspect flags disagree with its statuses. Retried once
 * after a serialization failure or deadlock. */
ld_status ld_job_complete(ld_db *db, const ld_job *job, const char *owner, lw_leak_report *rep);

/* The supervisor's cleanup after a worker died: every report leased by `owner` goes back to
 * 'queued' at once, its attempt kept (a crash used one) or given back when `refund` (the
 * worker was killed at the shutdown deadline). *n = how many (may be NULL). */
ld_status ld_jobs_release_owner(ld_db *db, const char *owner, int refund, int64_t *n);

#endif
