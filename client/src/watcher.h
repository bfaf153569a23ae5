/* watcher.h — the watch set and the retained check (ARCHITECTURE step 2): objects that should
 * be gone are watched under a random UUID key; `retained_delay_ms` later the due ones are
 * checked together, with at most `gc_rounds` GC + re-check rounds per batch (never a GC per
 * object); the ones still there are marked retained. */
#ifndef LWC_WATCHER_H
#define LWC_WATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "leakwatch.h"

#include "sdk_log.h"

#define LWC_DEFAULT_RETAINED_DELAY_MS 5000
#define LWC_DEFAULT_GC_ROUNDS 3u
#define LWC_DEFAULT_GC_ROUND_INTERVAL_MS 100
#define LWC_DEFAULT_MAX_WATCHED 10000u
#define LWC_MAX_DESCRIPTION 512 /* longer descriptions are cut to this many bytes */

typedef struct lwc_watcher_params {
    int64_t retained_delay_ms;    /* from watch to the retained check */
    unsigned gc_rounds;           /* GC + re-check rounds per batch (0: retained at the first check) */
    int64_t gc_round_interval_ms; /* between two rounds */
    unsigned max_watched;         /* watched + retained objects held at once; more are refused */
    /* Optional: called on the executor thread after every batch, without any watcher lock
     * held, with the number of retained objects now and how many this batch added. The glue
     * re-evaluates the trigger here. */
    void (*on_batch_done)(void *user, size_t retained_now, size_t newly_retained);
    void *user;
} lwc_watcher_params;

/* The watcher's parameters from `config` (0 = the documented default). The callback is left
 * NULL. Returns LW_SDK_ERR_USAGE for a negative delay or interval. */
lw_sdk_status lwc_watcher_params_from_config(lwc_watcher_params *out, const lw_config *config);

typedef struct lwc_watcher lwc_watcher;

/* Creates a watcher. `runtime`, `clock`, `executor`, `params` and `log` are copied (the
 * context and user pointers inside them are borrowed and must outlive the watcher). The
 * runtime's is_reclaimed, run_gc and mark_retained are required. Adapter callbacks are called
 * on the executor's thread, never with a watcher lock held. On failure *out is NULL. */
lw_sdk_status lwc_watcher_new(lwc_watcher **out, const lw_runtime *runtime, const lw_clock *clock,
                              const lw_executor *executor, const lwc_watcher_params *params, lwc_log log);

/* Releases every handle still held (runtime->release) and frees. Stop the executor first: a
 * task the executor still holds refers to the watcher. NULL is a no-op. */
void lwc_watcher_free(lwc_watcher *w);

/* Watches `handle` (taken: the watcher releases it when the object leaves the set; not
 * released on failure) described by `description` (copied, cut to LWC_MAX_DESCRIPTION bytes;
 * NULL = ""). Writes its random UUID v4 key (36 chars + NUL) into `key_out` when not NULL, and
 * schedules a retained check `retained_delay_ms` from now. Any thread. Returns
 * LW_SDK_ERR_LIMIT when max_watched objects are held, LW_SDK_ERR_NOMEM, or LW_SDK_ERR_IO
 * when no random bytes could be read. */
lw_sdk_status lwc_watcher_watch(lwc_watcher *w, lw_handle handle, const char *description, char key_out[37]);

/* Checks every watched object whose retained delay has passed at uptime `now` (the scheduled
 * check calls this with the clock's uptime; exposed for the glue and tests). Objects found
 * reclaimed leave the set; if any is not, one GC runs and all are re-checked, up to gc_rounds
 * rounds gc_round_interval_ms apart (later rounds are posted to the executor), stopping as
 * soon as none remain; the rest are marked retained. While a batch is in progress this does
 * nothing (the batch schedules the next check when it ends). Executor thread. */
void lwc_watcher_check_due(lwc_watcher *w, int64_t now);

/* Retained objects held now. Any thread. */
size_t lwc_watcher_retained_count(lwc_watcher *w);

typedef struct lwc_watcher_stats {
    uint64_t watched;   /* held now, retained included */
    uint64_t retained;  /* retained now */
    uint64_t reclaimed; /* left the set reclaimed since the watcher was made */
    uint64_t refused;   /* watches refused by max_watched */
} lwc_watcher_stats;

void lwc_watcher_get_stats(lwc_watcher *w, lwc_watcher_stats *out);

/* After a heap dump taken at uptime `dump_uptime_ms`: every object watched at or before it
 * leaves the set and is released (LeakCanary's removeObjectsWatchedBeforeHeapDump), so the
 * same leak does not trigger again. Objects inside a running batch leave when it ends.
 * Returns how many left. Any thread (the adapter's release runs on the calling thread). */
size_t lwc_watcher_forget_before(lwc_watcher *w, int64_t dump_uptime_ms);

/* One retained object, for meta.retained. The durations follow the analyzer's meaning:
 * watch_ms = dump - watch, retained_ms = dump - retained (uptimes in ms). */
typedef struct lwc_retained_entry {
    char key[37];
    char *description;           /* owned by the list */
    int64_t watch_ms;
    int64_t retained_ms;
    int64_t watch_uptime_ms;     /* raw uptimes, for the glue's own use */
    int64_t retained_uptime_ms;
} lwc_retained_entry;

typedef struct lwc_retained_list {
    lwc_retained_entry *items;   /* in watch order */
    size_t count;
} lwc_retained_list;

/* Copies the retained objects into `out` (free with lwc_retained_list_free), durations
 * measured to `dump_uptime_ms`. Call it before lwc_watcher_forget_before. Any thread.
 * LW_SDK_ERR_NOMEM leaves `out` empty. */
lw_sdk_status lwc_watcher_retained_list(lwc_watcher *w, int64_t dump_uptime_ms, lwc_retained_list *out);
void lwc_retained_list_free(lwc_retained_list *list);

#endif
