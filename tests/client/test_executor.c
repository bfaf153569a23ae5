/* test_executor.c — the default executor's real thread: delayed tasks run in due order
 * (posting order on ties), tasks may post tasks, shutdown drops what is pending; and the
 * default clock. Uses real time, with short delays. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "executor.h"

typedef struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int order[32];
    int n;
    pthread_t threads[32];
    lwc_executor *e; /* for tasks that post */
} recorder;

typedef struct item {
    recorder *r;
    int id;
} item;

static void record(void *arg) {
    item *it = arg;
    recorder *r = it->r;
    pthread_mutex_lock(&r->mu);
    r->threads[r->n] = pthread_self();
    r->order[r->n++] = it->id;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void rec_init(recorder *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void rec_destroy(recorder *r) {
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

static int rec_wait(recorder *r, int n, int secs) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    pthread_mutex_lock(&r->mu);
    while (r->n < n)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &until) == ETIMEDOUT) break;
    int got = r->n;
    pthread_mutex_unlock(&r->mu);
    return got;
}

static void test_order(void **state) {
    (void)state;
    lwc_executor *e = NULL;
    lwc_log nolog = {NULL, NULL};
    assert_int_equal(lwc_executor_new(&e, 0, nolog), LW_SDK_OK);
    recorder r;
    rec_init(&r);
    item items[] = {{&r, 50}, {&r, 10}, {&r, 30}, {&r, 0}, {&r, 11}, {&r, -5}};
    int64_t delays[] = {150, 60, 100, 0, 60, -5};
    for (size_t i = 0; i < 6; i++) assert_int_equal(lwc_executor_post(e, delays[i], record, &items[i]), LW_SDK_OK);
    int64_t t0 = lwc_clock_uptime_ms(NULL);
    assert_int_equal(rec_wait(&r, 6, 5), 6);
    int64_t took = lwc_clock_uptime_ms(NULL) - t0;
    /* Negative delay = 0; ties (0 and -5, 10 and 11 posted with equal delays) keep posting order. */
    int want[] = {0, -5, 10, 11, 30, 50};
    for (int i = 0; i < 6; i++) assert_int_equal(r.order[i], want[i]);
    for (int i = 0; i < 6; i++) assert_false(pthread_equal(r.threads[i], pthread_self()));
    assert_true(took >= 140);
    assert_int_equal(lwc_executor_pending(e), 0);
    lwc_executor_free(e);
    rec_destroy(&r);
}

static item chained[3];

static void post_next(void *arg) {
    item *it = arg;
    record(it);
    if (it->id < 2) lwc_executor_post(it->r->e, 10, post_next, &chained[it->id + 1]);
}

static void test_task_posts_task(void **state) {
    (void)state;
    lwc_log nolog = {NULL, NULL};
    recorder r;
    rec_init(&r);
    assert_int_equal(lwc_executor_new(&r.e, 0, nolog), LW_SDK_OK);
    for (int i = 0; i < 3; i++) chained[i] = (item){&r, i};
    /* Through the lw_executor interface, as the modules use it. */
    lw_executor x = lwc_executor_iface(r.e);
    x.post(x.ctx, 5, post_next, &chained[0]);
    assert_int_equal(rec_wait(&r, 3, 5), 3);
    for (int i = 0; i < 3; i++) assert_int_equal(r.order[i], i);
    lwc_executor_free(r.e);
    rec_destroy(&r);
}

static void slow(void *arg) {
    record(arg);
    usleep(100 * 1000);
}

static void test_shutdown_drops_pending(void **state) {
    (void)state;
    lwc_executor *e = NULL;
    lwc_log nolog = {NULL, NULL};
    assert_int_equal(lwc_executor_new(&e, 0, nolog), LW_SDK_OK);
    recorder r;
    rec_init(&r);
    item running = {&r, 1}, later = {&r, 2}, much_later = {&r, 3};
    assert_int_equal(lwc_executor_post(e, 0, slow, &running), LW_SDK_OK);
    assert_int_equal(lwc_executor_post(e, 0, record, &later), LW_SDK_OK);
    assert_int_equal(lwc_executor_post(e, 60000, record, &much_later), LW_SDK_OK);
    assert_int_equal(rec_wait(&r, 1, 5), 1); /* `slow` is running */
    int64_t t0 = lwc_clock_uptime_ms(NULL);
    assert_int_equal(lwc_executor_shutdown(e), LW_SDK_OK);
    int64_t took = lwc_clock_uptime_ms(NULL) - t0;
    assert_true(took < 1000);    /* did not wait for the 60 s task */
    assert_int_equal(r.n, 1);    /* the running task finished; the pending ones never ran */
    assert_int_equal(lwc_executor_pending(e), 0);
    assert_int_equal(lwc_executor_post(e, 0, record, &later), LW_SDK_ERR_CLOSED);
    assert_int_equal(lwc_executor_shutdown(e), LW_SDK_OK); /* idempotent */
    lwc_executor_free(e);
    assert_int_equal(r.n, 1);
    rec_destroy(&r);
}

static void test_max_pending(void **state) {
    (void)state;
    lwc_executor *e = NULL;
    lwc_log nolog = {NULL, NULL};
    assert_int_equal(lwc_executor_new(&e, 40, nolog), LW_SDK_OK);
    recorder r;
    rec_init(&r);
    item it = {&r, 0};
    for (int i = 0; i < 40; i++) assert_int_equal(lwc_executor_post(e, 60000, record, &it), LW_SDK_OK);
    assert_int_equal(lwc_executor_post(e, 60000, record, &it), LW_SDK_ERR_LIMIT);
    assert_int_equal(lwc_executor_pending(e), 40);
    lwc_executor_free(e);
    assert_int_equal(r.n, 0);
    rec_destroy(&r);
    lwc_executor_free(NULL);
}

static void test_clock(void **state) {
    (void)state;
    lw_clock c = lwc_default_clock();
    int64_t a = c.uptime_ms(c.ctx);
    usleep(20 * 1000);
    int64_t b = c.uptime_ms(c.ctx);
    assert_true(b - a >= 19);
    int64_t wall = c.wall_ms(c.ctx);
    int64_t t = (int64_t)time(NULL) * 1000;
    assert_true(wall > t - 2000 && wall < t + 2000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_task_posts_task),
        cmocka_unit_test(test_shutdown_drops_pending),
        cmocka_unit_test(test_max_pending),
        cmocka_unit_test(test_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
