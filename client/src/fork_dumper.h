/* fork_dumper.h — heap dumps from a forked child (ARCHITECTURE step 4): the child, a
 * copy-on-write snapshot of the app, writes the HPROF and _exits; the parent returns at once
 * and a reaper thread waits for the child with a timeout (SIGKILL on hang), reporting a crash,
 * a failure or a timeout as an error. Without fork (the adapter says it cannot, or fork
 * fails) the dump runs in-process on the calling thread. */
#ifndef LWC_FORK_DUMPER_H
#define LWC_FORK_DUMPER_H

#include <stdint.h>

#include "leakwatch.h"

#include "sdk_log.h"

#define LWC_DEFAULT_FORK_DUMP_TIMEOUT_MS 120000

/* How a dump ended. `ok` 1: the HPROF is at `path`. `ok` 0: `message` says why ("child killed
 * by signal 6 (SIGABRT)", "timed out after 120000 ms; child killed", the adapter's own error
 * ...) and no file is left at `path`. `message` is never NULL and is valid only during the
 * call. `pause_ms` is how long the app was paused: the time spent in fork() for a forked dump,
 * the whole dump for an in-process one. */
typedef void (*lwc_fork_dump_done_fn)(void *user, int ok, const char *message, int64_t pause_ms);

/* Dumps the heap to `path` (copied). With runtime->can_fork: fork(); the child resets the
 * crash signals to their defaults, sets alarm() as a second guard, calls
 * runtime->dump_heap(ctx, path, forked = 1, ...) and _exits 0, or 1 after writing the
 * adapter's message to "<path>.err"; the parent starts a detached reaper thread and returns
 * (done_cb runs on that thread). If fork fails, or without can_fork, runtime->dump_heap(ctx,
 * path, 0, ...) runs on the calling thread and done_cb is called before this returns.
 *
 * Returns LW_SDK_OK when done_cb will be (or was) called exactly once; anything else
 * (LW_SDK_ERR_USAGE: NULL argument, no dump_heap or timeout_ms <= 0; LW_SDK_ERR_NOMEM) means it
 * will not be. `runtime` is copied. `user` and `log.user` are borrowed until done_cb returns:
 * the host must wait for it before freeing them (at most timeout_ms plus the kill). */
lw_sdk_status lwc_fork_dump(const lw_runtime *runtime, const char *path, int64_t timeout_ms,
                            lwc_fork_dump_done_fn done_cb, void *user, lwc_log log);

#endif
