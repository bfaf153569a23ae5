/* trigger.h — when to dump (ARCHITECTURE step 3): the state machine IDLE →
 * WAITING_FOR_RETAINED_COUNT → WAITING_FOR_DUMP_INTERVAL → DUMPING → ANALYZING/UPLOADING →
 * IDLE, with the retained-count thresholds, the interval between dumps, the daily limit and the
 * free-disk check. It does no file work: a `dump` callback (the glue) dumps, trims or analyzes
 * and spools, and reports back with lwc_trigger_dump_done. */
#ifndef LWC_TRIGGER_H
#define LWC_TRIGGER_H

#include <stddef.h>
#include <stdint.h>

#include "leakwatch.h"

#include "sdk_log.h"

#define LWC_DEFAULT_THRESHOLD_VISIBLE 5u
#define LWC_DEFAULT_THRESHOLD_BACKGROUND 1u
#define LWC_DEFAULT_DUMP_INTERVAL_MS 60000
#define LWC_DEFAULT_MAX_DUMPS_PER_DAY 5u
#define LWC_MAX_DUMPS_PER_DAY_LIMIT 1000u /* a larger max_dumps_per_day is a usage error */
#define LWC_DAY_MS (24LL * 60 * 60 * 1000)

typedef enum lwc_trigger_state {
    LWC_TRIGGER_IDLE = 0,                   /* nothing retained */
    LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT, /* retained, below the threshold (or a dump was skipped) */
    LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL,  /* over the threshold; waiting for the dump interval or the daily limit */
    LWC_TRIGGER_DUMPING,
    LWC_TRIGGER_ANALYZING,
    LWC_TRIGGER_UPLOADING,
} lwc_trigger_state;

/* "idle", "waiting_for_retained_count", "waiting_for_dump_interval", "dumping", "analyzing",
 * "uploading" (what lw_client_state returns). */
const char *lwc_trigger_state_name(lwc_trigger_state s);

typedef struct lwc_trigger_params {
    unsigned threshold_visible;    /* retained objects that trigger a dump while visible (>= 1) */
    unsigned threshold_background; /* ... while in the background (>= 1) */
    int64_t dump_interval_ms;      /* at least this long (uptime) from one dump's start to the next */
    unsigned max_dumps_per_day;    /* in any rolling 24 h of wall time (1 .. LWC_MAX_DUMPS_PER_DAY_LIMIT) */
    int visible;                   /* visibility at start */
    const char *spool_dir;         /* free space is checked here (copied); NULL = no disk check */

    /* Required: retained objects held now (the glue returns lwc_watcher_retained_count). */
    size_t (*retained_count)(void *user);
    /* Required: starts a dump, on the executor thread, no trigger lock held. `reason` is
     * meta.trigger ("retained_count" or "manual"); `dump_uptime_ms` is the clock's uptime when
     * the trigger decided (pass it to runtime->will_dump and lwc_watcher_forget_before). Returns
     * 0 when the dump started: lwc_trigger_dump_done must follow exactly once (it may be
     * called from inside this callback). Nonzero: it did not start (the attempt still counts
     * against the interval and the daily limit, so a failing dump cannot spin). */
    int (*dump)(void *user, const char *reason, int64_t dump_uptime_ms);
    /* Optional: free bytes where the dump will be written; 0 on success. NULL = statvfs of
     * spool_dir. Tests replace it. */
    int (*free_disk)(void *user, uint64_t *free_bytes);
    void *user;
} lwc_trigger_params;

/* The trigger's parameters from `config` (0 = the documented default; visible = 1, spool_dir
 * = config->spool_dir, borrowed until lwc_trigger_new copies it). Callbacks are left NULL. */
lw_sdk_status lwc_trigger_params_from_config(lwc_trigger_params *out, const lw_config *config);

typedef struct lwc_trigger lwc_trigger;

/* Creates a trigger in IDLE. `runtime` (only heap_usage is used, optional), `clock` (both
 * functions required), `executor`, `params` and `log` are copied; pointers inside them are
 * borrowed and must outlive the trigger. On failure *out is NULL. */
lw_sdk_status lwc_trigger_new(lwc_trigger **out, const lw_runtime *runtime, const lw_clock *clock,
                              const lw_executor *executor, const lwc_trigger_params *params, lwc_log log);

/* Frees. Stop the executor first (its tasks refer to the trigger). NULL is a no-op. */
void lwc_trigger_free(lwc_trigger *t);

/* Re-reads the retained count and acts: IDLE / WAITING_FOR_RETAINED_COUNT below the
 * threshold; over it, dumps if the interval, the daily limit and the free disk allow (the dump
 * callback is posted to the executor), else waits (a timer re-evaluates when the interval or
 * the daily window allows) or skips with a logged reason. Nothing while a dump is in
 * progress. Any thread; the glue calls it from the watcher's on_batch_done. */
void lwc_trigger_evaluate(lwc_trigger *t);

/* Visibility changed (1 visible, 0 background); re-evaluates on the executor. Any thread. */
void lwc_trigger_set_visible(lwc_trigger *t, int visible);

/* A manual dump (lw_dump_now): bypasses the retained-count threshold and the dump interval,
 * not a dump in progress (LW_SDK_ERR_BUSY), the daily limit or the free-disk check
 * (LW_SDK_ERR_LIMIT). With nothing retained it returns LW_SDK_OK and *started = 0. On
 * LW_SDK_OK with *started = 1 the dump callback has been posted to the executor. Any thread.
 * `started` may be NULL. */
lw_sdk_status lwc_trigger_dump_now(lwc_trigger *t, int *started);

/* The glue reports the dump's later phases: LWC_TRIGGER_ANALYZING or LWC_TRIGGER_UPLOADING
 * (anything else, or no dump in progress: LW_SDK_ERR_USAGE). Any thread. */
lw_sdk_status lwc_trigger_set_phase(lwc_trigger *t, lwc_trigger_state phase);

/* The dump started by the callback has ended (ok = 0: it failed). Call
 * lwc_watcher_forget_before first, so the re-evaluation (posted to the executor) sees the
 * remaining count. Any thread, including the fork dumper's reaper. */
void lwc_trigger_dump_done(lwc_trigger *t, int ok);

lwc_trigger_state lwc_trigger_get_state(lwc_trigger *t);

typedef struct lwc_trigger_stats {
    uint64_t dumps;            /* dumps started */
    uint64_t dumps_failed;     /* dump_done(ok = 0) or the callback refused to start */
    uint64_t skipped_disk;     /* skipped for lack of free disk */
    uint64_t skipped_daily;    /* refused or deferred by max_dumps_per_day */
    int64_t last_dump_uptime_ms; /* -1 before the first dump */
} lwc_trigger_stats;

void lwc_trigger_get_stats(lwc_trigger *t, lwc_trigger_stats *out);

#endif
