/* executor.c — one background thread running delayed tasks from a min-heap timer queue. */
#define _GNU_SOURCE
#include "executor.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct task {
    int64_t due_ms;  /* CLOCK_MONOTONIC ms */
    uint64_t seq;    /* posting order: ties on due_ms run first-posted first */
    void (*fn)(void *arg);
    void *arg;
} task;

struct lwc_executor {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* signalled on post and on shutdown; waits use CLOCK_MONOTONIC */
    pthread_t thread;
    task *heap;              /* min-heap on (due_ms, seq) */
    size_t size, capacity, max_pending;
    uint64_t next_seq;
    int stopping;            /* shutdown requested: drop pending, accept no posts */
    int joined;
    lwc_log log;
};

/* ---- clock ------------------------------------------------------------------------------ */

static int64_t clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t lwc_clock_uptime_ms(void *ctx) {
    (void)ctx;
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t lwc_clock_wall_ms(void *ctx) {
    (void)ctx;
    return clock_ms(CLOCK_REALTIME);
}

lw_clock lwc_default_clock(void) {
    lw_clock c = {.ctx = NULL, .uptime_ms = lwc_clock_uptime_ms, .wall_ms = lwc_clock_wall_ms};
    return c;
}

/* ---- the heap --------------------------------------------------------------------------- */

static int task_before(const task *a, const task *b) {
    return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->seq < b->seq);
}

static void heap_push(lwc_executor *e, task t) {
    size_t i = e->size++;
    e->heap[i] = t;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!task_before(&e->heap[i], &e->heap[parent])) break;
        task tmp = e->heap[i];
        e->heap[i] = e->heap[parent];
        e->heap[parent] = tmp;
        i = parent;
    }
}

static task heap_pop(lwc_executor *e) {
    task top = e->heap[0];
    e->heap[0] = e->heap[--e->size];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->size && task_before(&e->heap[l], &e->heap[m])) m = l;
        if (r < e->size && task_before(&e->heap[r], &e->heap[m])) m = r;
        if (m == i) break;
        task tmp = e->heap[i];
        e->heap[i] = e->heap[m];
        e->heap[m] = tmp;
        i = m;
    }
    return top;
}

/* ---- the thread ------------------------------------------------------------------------- */

static void *run(void *p) {
    lwc_executor *e = p;
    pthread_mutex_lock(&e->mu);
    while (!e->stopping) {
        if (e->size == 0) {
            pthread_cond_wait(&e->cv, &e->mu);
            continue;
        }
        int64_t now = clock_ms(CLOCK_MONOTONIC);
        if (e->heap[0].due_ms > now) {
            struct timespec until = {.tv_sec = (time_t)(e->heap[0].due_ms / 1000),
                                     .tv_nsec = (long)(e->heap[0].due_ms % 1000) * 1000000L};
            pthread_cond_timedwait(&e->cv, &e->mu, &until);
            continue; /* re-check: a sooner task may have been posted, or shutdown requested */
        }
        task t = heap_pop(e);
        pthread_mutex_unlock(&e->mu);
        t.fn(t.arg);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

lw_sdk_status lwc_executor_new(lwc_executor **out, unsigned max_pending, lwc_log log) {
    if (!out) return LW_SDK_ERR_USAGE;
    *out = NULL;
    lw_sdk_status rc = LW_SDK_ERR_NOMEM;
    int mu_ok = 0, cv_ok = 0;
    pthread_condattr_t ca;
    int ca_ok = 0;
    lwc_executor *e = calloc(1, sizeof *e);
    if (!e) goto out;
    e->log = log;
    e->max_pending = max_pending ? max_pending : LWC_EXECUTOR_DEFAULT_MAX_PENDING;
    e->capacity = 16;
    e->heap = malloc(e->capacity * sizeof *e->heap);
    if (!e->heap) goto out;
    rc = LW_SDK_ERR_RUNTIME;
    if (pthread_mutex_init(&e->mu, NULL) != 0) goto out;
    mu_ok = 1;
    if (pthread_condattr_init(&ca) != 0) goto out;
    ca_ok = 1;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0) goto out;
    if (pthread_cond_init(&e->cv, &ca) != 0) goto out;
    cv_ok = 1;
    int err = pthread_create(&e->thread, NULL, run, e);
    if (err != 0) {
        lwc_logf(&log, LW_LOG_ERROR, "executor: cannot start its thread: %s", strerror(err));
        goto out;
    }
    *out = e;
    e = NULL;
    rc = LW_SDK_OK;
out:
    if (ca_ok) pthread_condattr_destroy(&ca);
    if (e) {
        if (cv_ok) pthread_cond_destroy(&e->cv);
        if (mu_ok) pthread_mutex_destroy(&e->mu);
        free(e->heap);
        free(e);
    }
    return rc;
}

lw_sdk_status lwc_executor_post(lwc_executor *e, int64_t delay_ms, void (*fn)(void *arg), void *arg) {
    if (!e || !fn) return LW_SDK_ERR_USAGE;
    if (delay_ms < 0) delay_ms = 0;
    lw_sdk_status rc = LW_SDK_OK;
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        rc = LW_SDK_ERR_CLOSED;
        goto out;
    }
    if (e->size >= e->max_pending) {
        rc = LW_SDK_ERR_LIMIT;
        goto out;
    }
    if (e->size == e->capacity) {
        size_t cap = e->capacity * 2 > e->max_pending ? e->max_pending : e->capacity * 2;
        task *h = realloc(e->heap, cap * sizeof *h);
        if (!h) {
            rc = LW_SDK_ERR_NOMEM;
            goto out;
        }
        e->heap = h;
        e->capacity = cap;
    }
    int64_t now = clock_ms(CLOCK_MONOTONIC);
    int64_t due = delay_ms > INT64_MAX - now ? INT64_MAX : now + delay_ms;
    heap_push(e, (task){.due_ms = due, .seq = e->next_seq++, .fn = fn, .arg = arg});
    pthread_cond_signal(&e->cv);
out:
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static void iface_post(void *ctx, int64_t delay_ms, void (*fn)(void *arg), void *arg) {
    lwc_executor *e = ctx;
    lw_sdk_status rc = lwc_executor_post(e, delay_ms, fn, arg);
    if (rc != LW_SDK_OK && rc != LW_SDK_ERR_CLOSED)
        lwc_logf(&e->log, LW_LOG_ERROR, "executor: a task was dropped: %s",
                rc == LW_SDK_ERR_LIMIT ? "too many pending tasks" : "out of memory");
}

lw_executor lwc_executor_iface(lwc_executor *e) {
    lw_executor x = {.ctx = e, .post = iface_post};
    return x;
}

size_t lwc_executor_pending(lwc_executor *e) {
    if (!e) return 0;
    pthread_mutex_lock(&e->mu);
    size_t n = e->size;
    pthread_mutex_unlock(&e->mu);
    return n;
}

lw_sdk_status lwc_executor_shutdown(lwc_executor *e) {
    if (!e) return LW_SDK_ERR_USAGE;
    if (pthread_equal(pthread_self(), e->thread)) {
        lwc_logf(&e->log, LW_LOG_ERROR, "executor: shutdown called from one of its own tasks");
        pthread_mutex_lock(&e->mu);
        e->stopping = 1;
        pthread_mutex_unlock(&e->mu);
        return LW_SDK_ERR_USAGE;
    }
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    size_t dropped = e->size;
    e->size = 0;
    int join = !e->joined;
    e->joined = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (dropped) lwc_logf(&e->log, LW_LOG_DEBUG, "executor: %zu pending task(s) dropped at shutdown", dropped);
    if (join) pthread_join(e->thread, NULL);
    return LW_SDK_OK;
}

void lwc_executor_free(lwc_executor *e) {
    if (!e) return;
    if (lwc_executor_shutdown(e) != LW_SDK_OK) return; /* called from a task: leak, don't free under it */
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->heap);
    free(e);
}
