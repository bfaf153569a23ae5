/* spool.h — the crash-safe report spool of libleakwatch: every report is written here before
 * any network use and leaves it only on a 2xx, a permanent 4xx, or a quota eviction.
 *
 * Layout under the spool directory (see the comment at the top of spool.c for the why):
 *
 *   install_id            the device's random UUID v4, made once (temp + fsync + rename)
 *   dropped               reports evicted and not yet announced in a sent meta.dropped
 *   spool.lock            flock'ed briefly around every change (processes sharing the spool)
 *   run-<pid>-<rand>.lock flock'ed by a live process for its whole life
 *   run-<pid>-<rand>/     that process's work area (dumps being trimmed, reports being built)
 *   reports/<report_id>/  meta.json, data (the .hprof.zst or the trace JSON), state
 *
 * A report appears in reports/ only by rename(2) of a complete, fsynced directory, and leaves
 * it by rename(2) into the run directory before it is deleted: after a crash at any moment
 * there is either a whole report or none. A process that opens the spool deletes the run
 * directories of dead processes (their locks can be taken); their finished reports are in
 * reports/ already and are sent by whoever opens the spool next.
 *
 * Threads: every function may be called from any thread (a mutex inside); several processes
 * may share one spool directory (spool.lock). Errors: every fallible function returns an
 * lw_sdk_status and, when `err` is not NULL, a message in err[cap]. */
#ifndef LWC_SPOOL_H
#define LWC_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "leakwatch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LWC_SPOOL_DEFAULT_MAX_BYTES (512ull << 20)
#define LWC_SPOOL_DEFAULT_MAX_REPORTS 20u
#define LWC_SPOOL_PATH_MAX 1024 /* every path the spool hands out fits (the directory: at most 768 bytes) */

typedef void (*lwc_log_fn)(void *user, int level, const char *msg);

typedef struct lwc_spool lwc_spool;

/* One spooled report, as lwc_spool_next found it. Paths stay valid until the report is removed
 * (by this process, or by another one's quota eviction: read the files through descriptors
 * opened early, as the uploader does). */
typedef struct lwc_spooled {
    char id[37];                          /* report_id: lower-case UUID */
    char kind[8];                         /* "heap" or "traces": the name of the data part */
    char meta_path[LWC_SPOOL_PATH_MAX];   /* the stored meta JSON (without the send-time "dropped") */
    char data_path[LWC_SPOOL_PATH_MAX];   /* the .hprof.zst or the trace JSON */
    uint64_t bytes;                       /* meta + data on disk */
    unsigned attempts;                    /* failed upload attempts so far */
    int64_t next_attempt_ms;              /* due at or after this time (0 = at once) */
    int64_t created_ms;                   /* wall clock when it entered the spool */
    int64_t dropped;                      /* meta.dropped claimed for it, -1 = not yet (lwc_spool_claim_dropped) */
} lwc_spooled;

/* Opens (creating if needed) the spool in `dir` (copied): takes a new locked run directory,
 * deletes the run directories of dead processes, removes damaged reports (logged and counted
 * as dropped), evicts beyond the quota, and reads or makes the install id.
 * max_bytes 0 = LWC_SPOOL_DEFAULT_MAX_BYTES, max_reports 0 = LWC_SPOOL_DEFAULT_MAX_REPORTS.
 * `log` (optional) is called with LW_LOG_* levels, never while the caller's buffers are used.
 * On failure *out is NULL. */
lw_sdk_status lwc_spool_open(lwc_spool **out, const char *dir, uint64_t max_bytes, unsigned max_reports,
                             lwc_log_fn log, void *log_user, char *err, size_t cap);

/* Deletes this process's run directory (work in progress is lost; reports stay) and frees the
 * handle. NULL is a no-op. */
void lwc_spool_close(lwc_spool *s);

/* The device's install id (a lower-case UUID v4 kept in the spool) into out[37]. */
void lwc_spool_install_id(const lwc_spool *s, char out[37]);

/* The spool directory and this process's run directory (borrowed, valid until close). */
const char *lwc_spool_dir(const lwc_spool *s);
const char *lwc_spool_run_dir(const lwc_spool *s);

/* Writes "<run dir>/<name>" into out[cap]: a place for work files (a dump, its trimmed copy)
 * that vanish with the run directory if the process dies. `name` is one path component not
 * starting with '.' (those names are the spool's own). */
lw_sdk_status lwc_spool_work_path(const lwc_spool *s, const char *name, char *out, size_t cap, char *err, size_t cap_err);

/* Adds a report. `report_id` is a lower-case UUID not in the spool yet; `meta_json` (copied)
 * is the upload's meta without "dropped"; `data_path` is moved into the report (rename: it must
 * be on the spool's file system, e.g. from lwc_spool_work_path) and fsynced; `data_kind` is
 * "heap" or "traces". Once it returns LW_SDK_OK the report survives any crash. Then the oldest
 * other reports are evicted until the spool is within max_reports and max_bytes (each logged
 * with its reason and counted in `dropped`). A report larger than max_bytes by itself is
 * refused: LW_SDK_ERR_LIMIT, counted as dropped, its data file deleted. On any other failure
 * the data file stays where it was. */
lw_sdk_status lwc_spool_add(lwc_spool *s, const char *report_id, const char *meta_json, const char *data_path,
                            const char *data_kind, char *err, size_t cap);

/* The oldest report (in the order they were added) whose next attempt is due at `now_ms`
 * (wall clock, ms since the epoch): *found = 1 and *out filled. Else *found = 0. `wake_ms`
 * (optional) receives the earliest next attempt time of any report, INT64_MAX when empty.
 * Damaged reports met on the way are removed (logged, counted as dropped). */
lw_sdk_status lwc_spool_next(lwc_spool *s, int64_t now_ms, lwc_spooled *out, int *found, int64_t *wake_ms,
                             char *err, size_t cap);

/* A failed attempt: attempts + 1 and the next attempt not before `next_attempt_ms`, persisted.
 * A report that is gone (removed meanwhile) is not an error. */
lw_sdk_status lwc_spool_backoff(lwc_spool *s, const char *report_id, int64_t next_attempt_ms, char *err, size_t cap);

/* Sets the value of meta.dropped for this report, once: the first call moves the spool's
 * counter into the report's state (persisted) and returns it; later calls (retries) return the
 * same value, so every attempt sends the same meta. */
lw_sdk_status lwc_spool_claim_dropped(lwc_spool *s, const char *report_id, int64_t *dropped, char *err, size_t cap);

typedef enum lwc_spool_outcome {
    LWC_SPOOL_DELIVERED = 0, /* the server answered 2xx */
    LWC_SPOOL_REJECTED = 1,  /* a permanent 4xx: the report can never be delivered; the drops it
                                claimed go back to the counter, since the server never saw them */
} lwc_spool_outcome;

/* Removes a report (atomically: rename out of reports/, then delete). A report that is gone
 * already is not an error. */
lw_sdk_status lwc_spool_remove(lwc_spool *s, const char *report_id, lwc_spool_outcome outcome, char *err, size_t cap);

/* Reports in the spool and their bytes (either pointer may be NULL). */
lw_sdk_status lwc_spool_count(lwc_spool *s, unsigned *n, uint64_t *bytes, char *err, size_t cap);

/* Returns the number of reports evicted since the last call and resets it (persisted).
 * lwc_spool_claim_dropped is the per-report form the uploader uses. 0 when it cannot be read. */
uint64_t lwc_spool_take_dropped(lwc_spool *s);

#ifdef __cplusplus
}
#endif
#endif
