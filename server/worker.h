/* worker.h — an analysis worker process: claims queued reports, analyzes each in a child
 * process with a memory budget and a wall-clock limit, groups the result. */
#ifndef LD_WORKER_H
#define LD_WORKER_H

#include "config.h"

/* Runs until SIGTERM or SIGINT; returns the process exit code. `owner` names the worker
 * in leases ("host:pid"). */
int ld_worker_main(const ld_config *cfg);

/* "host:pid" of process `pid` on this host. */
void ld_worker_owner(int pid, char *out, size_t cap);

#endif
