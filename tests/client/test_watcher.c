/* test_watcher.c — the watch set and the batched retained check, on a fake clock, a
 * manually-stepped fake executor and a fake runtime that records every call. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "watcher.h"

/* ---- fakes: clock, executor, runtime ---------------------------------------------------------- */

#include "fake_time.h"

#define MAX_H 64

typedef struct fake_rt {
    fake_clock *clock;
    int gc_count;
    int gc_at[16];               /* uptime of each GC */
    int reclaim_after[MAX_H];    /* handle h reads reclaimed once this many GCs ran; -1 never */
    int is_reclaimed_calls;
    int retained_n;
    lw_handle retained_h[MAX_H];
    int64_t retained_up[MAX_H];
    int released_n;
    lw_handle released_h[MAX_H];
} fake_rt;

static int rt_is_reclaimed(void *ctx, lw_handle h) {
    fake_rt *r = ctx;
    r->is_reclaimed_calls++;
    return r->reclaim_after[h] >= 0 && r->gc_count >= r->reclaim_after[h];
}
static int rt_run_gc(void *ctx) {
    fake_rt *r = ctx;
    if (r->gc_count < 16) r->gc_at[r->gc_count] = (int)r->clock->now;
    r->gc_count++;
    return 0;
}
static void rt_mark_retained(void *ctx, lw_handle h, int64_t up) {
    fake_rt *r = ctx;
    r->retained_h[r->retained_n] = h;
    r->retained_up[r->retained_n++] = up;
}
static void rt_release(void *ctx, lw_handle h) {
    fake_rt *r = ctx;
    r->released_h[r->released_n++] = h;
}

typedef struct fixture {
    fake_clock clock;
    fake_exec exec;
    fake_rt rt;
    lw_runtime runtime;
    lw_clock lwclock;
    lw_executor lwexec;
    lwc_watcher_params params;
    lwc_watcher *w;
    int batches;
    size_t last_retained_now, last_newly;
    char log[4096];
} fixture;

static void on_batch(void *user, size_t retained_now, size_t newly) {
    fixture *f = user;
    f->batches++;
    f->last_retained_now = retained_now;
    f->last_newly = newly;
}

static void capture_log(void *user, int level, const char *msg) {
    fixture *f = user;
    (void)level;
    size_t len = strlen(f->log);
    snprintf(f->log + len, sizeof f->log - len, "%s\n", msg);
}

static fixture *make_fixture(unsigned gc_rounds, unsigned max_watched) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->clock.wall_base = 1700000000000LL;
    f->exec.clock = &f->clock;
    f->rt.clock = &f->clock;
    for (int i = 0; i < MAX_H; i++) f->rt.reclaim_after[i] = -1;
    f->runtime = (lw_runtime){.struct_size = sizeof(lw_runtime), .ctx = &f->rt, .is_reclaimed = rt_is_reclaimed,
                              .run_gc = rt_run_gc, .mark_retained = rt_mark_retained, .release = rt_release};
    f->lwclock = (lw_clock){.ctx = &f->clock, .uptime_ms = fc_uptime, .wall_ms = fc_wall};
    f->lwexec = (lw_executor){.ctx = &f->exec, .post = fx_post};
    lw_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.struct_size = sizeof cfg;
    cfg.gc_rounds = gc_rounds;
    cfg.max_watched = max_watched;
    assert_int_equal(lwc_watcher_params_from_config(&f->params, &cfg), LW_SDK_OK);
    assert_int_equal(f->params.retained_delay_ms, 5000);
    assert_int_equal(f->params.gc_round_interval_ms, 100);
    f->params.on_batch_done = on_batch;
    f->params.user = f;
    lwc_log log = {capture_log, f};
    assert_int_equal(lwc_watcher_new(&f->w, &f->runtime, &f->lwclock, &f->lwexec, &f->params, log), LW_SDK_OK);
    return f;
}

static void free_fixture(fixture *f) {
    lwc_watcher_free(f->w);
    free(f);
}

static void watch(fixture *f, lw_handle h, const char *desc) {
    assert_int_equal(lwc_watcher_watch(f->w, h, desc, NULL), LW_SDK_OK);
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* Three objects due at once: one GC per round for the batch, not one per object. */
static void test_batched_gc(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0); /* defaults: 3 rounds, 100 ms apart */
    watch(f, 1, "a");
    watch(f, 2, "b");
    watch(f, 3, "c");
    fx_run_until(&f->exec, 4999);
    assert_int_equal(f->rt.gc_count, 0);
    assert_int_equal(f->rt.is_reclaimed_calls, 0);
    fx_run_until(&f->exec, 5000);
    assert_int_equal(f->rt.gc_count, 1); /* round 1 runs at once after the first check */
    assert_int_equal(f->rt.is_reclaimed_calls, 6);
    fx_run_until(&f->exec, 5099);
    assert_int_equal(f->rt.gc_count, 1);
    fx_run_until(&f->exec, 5100);
    assert_int_equal(f->rt.gc_count, 2);
    fx_run_until(&f->exec, 10000);
    assert_int_equal(f->rt.gc_count, 3); /* exactly gc_rounds, however many objects */
    assert_int_equal(f->rt.gc_at[0], 5000);
    assert_int_equal(f->rt.gc_at[1], 5100);
    assert_int_equal(f->rt.gc_at[2], 5200);
    assert_int_equal(f->rt.retained_n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(f->rt.retained_up[i], 5200);
    assert_int_equal(lwc_watcher_retained_count(f->w), 3);
    assert_int_equal(f->batches, 1);
    assert_int_equal(f->last_retained_now, 3);
    assert_int_equal(f->last_newly, 3);
    assert_int_equal(f->rt.released_n, 0);
    free_fixture(f);
}

/* The configured number of rounds is the maximum. */
static void test_exact_rounds(void **state) {
    (void)state;
    fixture *f = make_fixture(5, 0);
    watch(f, 1, "a");
    fx_run_until(&f->exec, 60000);
    assert_int_equal(f->rt.gc_count, 5);
    assert_int_equal(f->rt.retained_n, 1);
    assert_int_equal(f->rt.retained_up[0], 5400);
    free_fixture(f);
}

/* Stops as soon as none remain; reclaimed objects leave the set and are released. */
static void test_stops_early(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    f->rt.reclaim_after[1] = 1;
    f->rt.reclaim_after[2] = 2;
    f->rt.reclaim_after[3] = 0; /* already gone: no GC needed for it */
    watch(f, 1, "a");
    watch(f, 2, "b");
    watch(f, 3, "c");
    fx_run_until(&f->exec, 60000);
    assert_int_equal(f->rt.gc_count, 2);
    assert_int_equal(f->rt.retained_n, 0);
    assert_int_equal(f->rt.released_n, 3);
    assert_int_equal(lwc_watcher_retained_count(f->w), 0);
    lwc_watcher_stats st;
    lwc_watcher_get_stats(f->w, &st);
    assert_int_equal(st.watched, 0);
    assert_int_equal(st.reclaimed, 3);
    assert_int_equal(f->batches, 1);
    assert_int_equal(f->last_newly, 0);
    free_fixture(f);
}

/* All reclaimed at the first check: no GC at all. */
static void test_no_gc_when_all_reclaimed(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    f->rt.reclaim_after[1] = 0;
    f->rt.reclaim_after[2] = 0;
    watch(f, 1, "a");
    watch(f, 2, "b");
    fx_run_until(&f->exec, 60000);
    assert_int_equal(f->rt.gc_count, 0);
    assert_int_equal(f->rt.released_n, 2);
    free_fixture(f);
}

/* Only objects whose delay has passed are checked; later ones get their own batch. */
static void test_retained_delay_per_object(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    watch(f, 1, "first");
    f->clock.now = 1000;
    watch(f, 2, "second");
    fx_run_until(&f->exec, 5999);
    assert_int_equal(f->rt.gc_count, 3);
    assert_int_equal(f->rt.retained_n, 1);
    assert_int_equal(f->rt.retained_h[0], 1);
    assert_int_equal(f->rt.retained_up[0], 5200);
    fx_run_until(&f->exec, 7000);
    assert_int_equal(f->rt.gc_count, 6);
    assert_int_equal(f->rt.retained_n, 2);
    assert_int_equal(f->rt.retained_h[1], 2);
    assert_int_equal(f->rt.retained_up[1], 6200);
    assert_int_equal(f->batches, 2);
    assert_int_equal(lwc_watcher_retained_count(f->w), 2);
    free_fixture(f);
}

/* Screens destroyed within a moment of each other (here 40 ms apart) are checked in one
 * batch: one series of GCs, not one each. */
static void test_watches_close_together_share_a_batch(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0); /* 3 rounds 100 ms apart: a 300 ms window */
    for (int i = 0; i < 6; i++) {
        f->clock.now = 40 * i;
        watch(f, (lw_handle)(i + 1), "screen");
    }
    fx_run_until(&f->exec, 10000);
    assert_int_equal(f->batches, 1);
    assert_int_equal(f->rt.gc_count, 3);
    assert_int_equal(f->rt.retained_n, 6);
    assert_int_equal(f->rt.gc_at[0], 5000); /* when the first one was due */
    free_fixture(f);
}

/* An object watched while a batch runs waits for the next batch. */
static void test_watch_during_batch(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    watch(f, 1, "a");
    fx_run_until(&f->exec, 5050); /* batch running, round 2 pending */
    watch(f, 2, "b");             /* due at 10050 */
    fx_run_until(&f->exec, 10049);
    assert_int_equal(f->rt.retained_n, 1);
    fx_run_until(&f->exec, 20000);
    assert_int_equal(f->rt.retained_n, 2);
    assert_int_equal(f->rt.retained_up[1], 10250);
    free_fixture(f);
}

/* After a dump, objects watched at or before it leave the set (released); later ones stay. */
static void test_forget_before(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    watch(f, 1, "NewsScreen destroyed");
    watch(f, 2, "Other destroyed");
    fx_run_until(&f->exec, 6000);
    assert_int_equal(lwc_watcher_retained_count(f->w), 2);
    f->clock.now = 7000;
    watch(f, 3, "later");

    lwc_retained_list list;
    assert_int_equal(lwc_watcher_retained_list(f->w, 6500, &list), LW_SDK_OK);
    assert_int_equal(list.count, 2);
    assert_string_equal(list.items[0].description, "NewsScreen destroyed");
    assert_int_equal(list.items[0].watch_ms, 6500);
    assert_int_equal(list.items[0].retained_ms, 6500 - 5200);
    assert_int_equal(list.items[0].retained_uptime_ms, 5200);
    assert_int_equal(strlen(list.items[0].key), 36);
    lwc_retained_list_free(&list);

    assert_int_equal(lwc_watcher_forget_before(f->w, 6500), 2);
    assert_int_equal(lwc_watcher_retained_count(f->w), 0);
    assert_int_equal(f->rt.released_n, 2);
    lwc_watcher_stats st;
    lwc_watcher_get_stats(f->w, &st);
    assert_int_equal(st.watched, 1);
    assert_int_equal(st.reclaimed, 0); /* forgotten, not reclaimed */
    assert_int_equal(lwc_watcher_forget_before(f->w, 6500), 0);
    /* The later one is still checked. */
    fx_run_until(&f->exec, 20000);
    assert_int_equal(f->rt.retained_n, 3);
    assert_int_equal(f->rt.retained_h[2], 3);
    free_fixture(f);
}

/* Forgetting objects that are in a running batch: they leave when the round ends, never retained. */
static void test_forget_during_batch(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    watch(f, 1, "a");
    watch(f, 2, "b");
    fx_run_until(&f->exec, 5000);
    assert_int_equal(f->rt.gc_count, 1);
    assert_int_equal(lwc_watcher_forget_before(f->w, 5000), 2);
    assert_int_equal(f->rt.released_n, 0);
    fx_run_until(&f->exec, 5100);
    assert_int_equal(f->rt.gc_count, 2);
    assert_int_equal(f->rt.released_n, 2);
    fx_run_until(&f->exec, 20000);
    assert_int_equal(f->rt.gc_count, 2);
    assert_int_equal(f->rt.retained_n, 0);
    lwc_watcher_stats st;
    lwc_watcher_get_stats(f->w, &st);
    assert_int_equal(st.watched, 0);
    free_fixture(f);
}

static void test_max_watched(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 3);
    watch(f, 1, "a");
    watch(f, 2, "b");
    watch(f, 3, "c");
    char key[37] = "untouched";
    assert_int_equal(lwc_watcher_watch(f->w, 4, "d", key), LW_SDK_ERR_LIMIT);
    assert_string_equal(key, "untouched");
    assert_int_equal(lwc_watcher_watch(f->w, 5, "e", NULL), LW_SDK_ERR_LIMIT);
    lwc_watcher_stats st;
    lwc_watcher_get_stats(f->w, &st);
    assert_int_equal(st.refused, 2);
    assert_int_equal(st.watched, 3);
    assert_non_null(strstr(f->log, "max_watched"));
    /* Reclaimed objects make room. */
    f->rt.reclaim_after[1] = 0;
    f->rt.reclaim_after[2] = 0;
    fx_run_until(&f->exec, 6000);
    watch(f, 4, "d");
    lwc_watcher_get_stats(f->w, &st);
    assert_int_equal(st.watched, 2);
    free_fixture(f);
}

static int is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

static void test_keys_and_descriptions(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    char k1[37], k2[37];
    assert_int_equal(lwc_watcher_watch(f->w, 1, "x", k1), LW_SDK_OK);
    assert_int_equal(lwc_watcher_watch(f->w, 2, NULL, k2), LW_SDK_OK);
    assert_int_equal(strlen(k1), 36);
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) assert_int_equal(k1[i], '-');
        else assert_true(is_hex(k1[i]));
    }
    assert_int_equal(k1[14], '4');                    /* version 4 */
    assert_non_null(strchr("89ab", k1[19]));          /* RFC 4122 variant */
    assert_string_not_equal(k1, k2);

    /* A long description is cut at LWC_MAX_DESCRIPTION bytes, on a UTF-8 boundary. */
    char big[LWC_MAX_DESCRIPTION + 10];
    memset(big, 'a', sizeof big);
    big[LWC_MAX_DESCRIPTION - 1] = (char)0xc3; /* "é" straddling the cut */
    big[LWC_MAX_DESCRIPTION] = (char)0xa9;
    big[sizeof big - 1] = '\0';
    watch(f, 3, big);
    fx_run_until(&f->exec, 6000);
    lwc_retained_list list;
    assert_int_equal(lwc_watcher_retained_list(f->w, 6000, &list), LW_SDK_OK);
    assert_int_equal(list.count, 3);
    size_t found = 0;
    for (size_t i = 0; i < list.count; i++) {
        if (!strcmp(list.items[i].key, k2)) assert_string_equal(list.items[i].description, "");
        if (strlen(list.items[i].description) > 1) {
            assert_int_equal(strlen(list.items[i].description), LWC_MAX_DESCRIPTION - 1);
            found++;
        }
    }
    assert_int_equal(found, 1);
    lwc_retained_list_free(&list);
    free_fixture(f);
}

static void test_bad_arguments(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    lwc_watcher *w = (lwc_watcher *)1;
    lw_runtime bad = f->runtime;
    bad.run_gc = NULL;
    lwc_log nolog = {NULL, NULL};
    assert_int_equal(lwc_watcher_new(&w, &bad, &f->lwclock, &f->lwexec, &f->params, nolog), LW_SDK_ERR_USAGE);
    assert_null(w);
    lwc_watcher_params p = f->params;
    p.max_watched = 0;
    assert_int_equal(lwc_watcher_new(&w, &f->runtime, &f->lwclock, &f->lwexec, &p, nolog), LW_SDK_ERR_USAGE);
    assert_int_equal(lwc_watcher_watch(NULL, 1, "x", NULL), LW_SDK_ERR_USAGE);
    lw_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.retained_delay_ms = -1;
    assert_int_equal(lwc_watcher_params_from_config(&p, &cfg), LW_SDK_ERR_USAGE);
    lwc_watcher_free(NULL);
    free_fixture(f);
}

/* Freeing the watcher releases what it still holds (a batch in progress included). */
static void test_free_releases(void **state) {
    (void)state;
    fixture *f = make_fixture(0, 0);
    watch(f, 1, "a");
    watch(f, 2, "b");
    fx_run_until(&f->exec, 5050); /* mid-batch */
    lwc_watcher_free(f->w);
    f->w = NULL;
    assert_int_equal(f->rt.released_n, 2);
    free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_gc),
        cmocka_unit_test(test_exact_rounds),
        cmocka_unit_test(test_stops_early),
        cmocka_unit_test(test_no_gc_when_all_reclaimed),
        cmocka_unit_test(test_retained_delay_per_object),
        cmocka_unit_test(test_watches_close_together_share_a_batch),
        cmocka_unit_test(test_watch_during_batch),
        cmocka_unit_test(test_forget_before),
        cmocka_unit_test(test_forget_during_batch),
        cmocka_unit_test(test_max_watched),
        cmocka_unit_test(test_keys_and_descriptions),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_free_releases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
