/* executor.h — the SDK's default lw_executor (one background thread running delayed tasks
 * from a timer queue ordered by due time) and its default lw_clock (CLOCK_MONOTONIC uptime,
 * CLOCK_REALTIME wall time). Also the log sink every client module writes through. */
#ifndef LWC_EXECUTOR_H
#define LWC_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "leakwatch.h"

/* Where a module's log lines go: the host's lw_config.log callback and its user pointer.
 * `fn` may be NULL (nothing is logged). Libraries never print. Shared by every client module
 * (the guard lets each header declare it so modules need not include one another). */
#include "sdk_log.h"

/* ---- the default clock ----------------------------------------------------------------- */

/* Milliseconds of CLOCK_MONOTONIC (ctx unused). */
int64_t lwc_clock_uptime_ms(void *ctx);
/* Milliseconds since the epoch, from CLOCK_REALTIME (ctx unused). */
int64_t lwc_clock_wall_ms(void *ctx);
/* An lw_clock made of the two functions above. */
lw_clock lwc_default_clock(void);

/* ---- the default executor -------------------------------------------------------------- */

typedef struct lwc_executor lwc_executor;

#define LWC_EXECUTOR_DEFAULT_MAX_PENDING 4096u

/* Starts the executor's thread. `max_pending` caps the queued tasks (0 = 4096); a post beyond
 * it is dropped and logged. `log` is copied (its user pointer is borrowed and must outlive the
 * executor). On failure *out is NULL; LW_SDK_ERR_NOMEM or LW_SDK_ERR_RUNTIME (thread). */
lw_sdk_status lwc_executor_new(lwc_executor **out, unsigned max_pending, lwc_log log);

/* Queues fn(arg) to run on the executor's thread `delay_ms` from now (negative = 0). Tasks run
 * one at a time, in order of due time; tasks due at the same time run in the order they were
 * posted. Any thread may post, including a running task. Returns LW_SDK_OK, LW_SDK_ERR_CLOSED
 * after shutdown, LW_SDK_ERR_LIMIT when max_pending tasks are queued, or LW_SDK_ERR_NOMEM.
 * `arg` is borrowed: a task that is never run (shutdown) is simply dropped. */
lw_sdk_status lwc_executor_post(lwc_executor *e, int64_t delay_ms, void (*fn)(void *arg), void *arg);

/* The lw_executor interface for this executor (its post logs and drops failures). Valid as
 * long as `e` is. */
lw_executor lwc_executor_iface(lwc_executor *e);

/* Number of tasks queued and not yet started (for diagnostics and tests). */
size_t lwc_executor_pending(lwc_executor *e);

/* Stops the executor: the task running now finishes, pending tasks are dropped without
 * running, later posts fail with LW_SDK_ERR_CLOSED, and the thread is joined. Idempotent.
 * Must not be called from a task (returns LW_SDK_ERR_USAGE without waiting). */
lw_sdk_status lwc_executor_shutdown(lwc_executor *e);

/* Shuts down (as above) and frees. NULL is a no-op. Must not be called from a task: that is
 * logged and the executor is leaked rather than freed under its own running thread. */
void lwc_executor_free(lwc_executor *e);

#endif
