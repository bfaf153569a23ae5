/* task_pool.h — threads that run the blocking steps of HTTP requests (PostgreSQL queries,
 * fsyncs), so that libmicrohttpd's event threads never wait on them. A task is a node the
 * caller owns (embedded in its request): queuing one allocates nothing and cannot fail for
 * lack of memory. */
#ifndef LD_TASK_POOL_H
#define LD_TASK_POOL_H

#include <stddef.h>

typedef struct ld_task {
    void (*fn)(struct ld_task *t);
    struct ld_task *next;
} ld_task;

typedef struct ld_task_pool ld_task_pool;

/* Starts `threads` threads. NULL with the reason in `err`. */
ld_task_pool *ld_task_pool_start(int threads, char *err, size_t cap);

/* Queues `t` (t->fn set by the caller): 0, or -1 once the pool is stopping (run nothing). */
int ld_task_pool_run(ld_task_pool *p, ld_task *t);

/* Runs what is queued, joins the threads and frees the pool. NULL is a no-op. */
void ld_task_pool_stop(ld_task_pool *p);

#endif
