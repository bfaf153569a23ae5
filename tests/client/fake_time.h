/* fake_time.h — a fake clock and a manually stepped fake executor for the SDK's tests: the
 * test decides when time passes, so timing behaviour is exact and nothing sleeps. */
#ifndef LWC_TEST_FAKE_TIME_H
#define LWC_TEST_FAKE_TIME_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "leakwatch.h"

typedef struct fake_clock {
    int64_t now;       /* uptime ms */
    int64_t wall_base; /* wall = wall_base + now */
} fake_clock;

static int64_t fc_uptime(void *ctx) { return ((fake_clock *)ctx)->now; }
static int64_t fc_wall(void *ctx) { return ((fake_clock *)ctx)->wall_base + ((fake_clock *)ctx)->now; }

typedef struct fake_task {
    int64_t due;
    uint64_t seq;
    void (*fn)(void *);
    void *arg;
} fake_task;

typedef struct fake_exec {
    fake_clock *clock;
    fake_task tasks[256];
    size_t n;
    uint64_t seq;
} fake_exec;

static void fx_post(void *ctx, int64_t delay, void (*fn)(void *), void *arg) {
    fake_exec *x = ctx;
    assert_true(x->n < 256);
    if (delay < 0) delay = 0;
    x->tasks[x->n++] = (fake_task){x->clock->now + delay, x->seq++, fn, arg};
}

/* Runs, in due order, every task due at or before `until` (including tasks those tasks post),
 * moving the clock to each task's due time; then leaves the clock at `until`. */
static void fx_run_until(fake_exec *x, int64_t until) {
    for (;;) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < x->n; i++)
            if (x->tasks[i].due <= until &&
                (best == SIZE_MAX || x->tasks[i].due < x->tasks[best].due ||
                 (x->tasks[i].due == x->tasks[best].due && x->tasks[i].seq < x->tasks[best].seq)))
                best = i;
        if (best == SIZE_MAX) break;
        fake_task t = x->tasks[best];
        x->tasks[best] = x->tasks[--x->n];
        if (t.due > x->clock->now) x->clock->now = t.due;
        t.fn(t.arg);
    }
    if (until > x->clock->now) x->clock->now = until;
}

#endif
