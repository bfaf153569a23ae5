/* test_trigger.c — the dump trigger's state machine on a fake clock and a manually-stepped
 * fake executor: thresholds, the dump interval, the daily limit, the free-disk check, manual
 * dumps; and the trigger wired to a watcher the way client.c wires them. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trigger.h"
#include "watcher.h"

/* ---- fakes: clock and executor ----------------------------------------------------------------- */

#include "fake_time.h"

/* ---- the fixture: a fake glue around one trigger ----------------------------------------------- */

#define MIB (1024ull * 1024)
#define DAY LWC_DAY_MS

typedef struct fixture {
    fake_clock clock;
    fake_exec exec;
    lw_runtime runtime;
    lw_clock lwclock;
    lw_executor lwexec;
    lwc_trigger_params params;
    lwc_trigger *t;
    size_t retained;          /* what retained_count returns */
    uint64_t heap_used;
    uint64_t free_bytes;
    int dumps;
    char reason[32];
    int64_t dump_uptime[16];
    int dump_result;          /* what the dump callback returns */
    int done_inline;          /* the dump callback calls dump_done itself */
    lwc_watcher *w;           /* the wired test only */
    char log[8192];
} fixture;

static size_t cb_retained(void *user) {
    fixture *f = user;
    return f->w ? lwc_watcher_retained_count(f->w) : f->retained;
}

static int cb_dump(void *user, const char *reason, int64_t up) {
    fixture *f = user;
    snprintf(f->reason, sizeof f->reason, "%s", reason);
    if (f->dumps < 16) f->dump_uptime[f->dumps] = up;
    f->dumps++;
    if (f->w) lwc_watcher_forget_before(f->w, up); /* the glue's part after writing the dump */
    if (f->done_inline) lwc_trigger_dump_done(f->t, 1);
    return f->dump_result;
}

static int cb_free_disk(void *user, uint64_t *out) {
    *out = ((fixture *)user)->free_bytes;
    return 0;
}

static int rt_heap_usage(void *ctx, uint64_t *used, uint64_t *max) {
    fixture *f = ctx;
    *used = f->heap_used;
    *max = 4 * f->heap_used;
    return 0;
}

static void capture_log(void *user, int level, const char *msg) {
    fixture *f = user;
    (void)level;
    size_t len = strlen(f->log);
    snprintf(f->log + len, sizeof f->log - len, "%s\n", msg);
}

static fixture *make_fixture_cfg(int visible, const lw_config *cfg) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->clock.wall_base = 1700000000000LL;
    f->exec.clock = &f->clock;
    f->heap_used = 100 * MIB;
    f->free_bytes = 100000 * MIB;
    f->runtime = (lw_runtime){.struct_size = sizeof(lw_runtime), .ctx = f, .heap_usage = rt_heap_usage};
    f->lwclock = (lw_clock){.ctx = &f->clock, .uptime_ms = fc_uptime, .wall_ms = fc_wall};
    f->lwexec = (lw_executor){.ctx = &f->exec, .post = fx_post};
    assert_int_equal(lwc_trigger_params_from_config(&f->params, cfg), LW_SDK_OK);
    f->params.visible = visible;
    f->params.retained_count = cb_retained;
    f->params.dump = cb_dump;
    f->params.free_disk = cb_free_disk;
    f->params.user = f;
    lwc_log log = {capture_log, f};
    assert_int_equal(lwc_trigger_new(&f->t, &f->runtime, &f->lwclock, &f->lwexec, &f->params, log), LW_SDK_OK);
    return f;
}

static fixture *make_fixture(int visible) {
    lw_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.struct_size = sizeof cfg;
    return make_fixture_cfg(visible, &cfg);
}

static void free_fixture(fixture *f) {
    lwc_trigger_free(f->t);
    lwc_watcher_free(f->w);
    free(f);
}

static lwc_trigger_state state_of(fixture *f) { return lwc_trigger_get_state(f->t); }

/* A retained burst at the current time: the watcher's batch ends, the glue evaluates. */
static void burst(fixture *f, size_t count) {
    f->retained = count;
    lwc_trigger_evaluate(f->t);
    fx_run_until(&f->exec, f->clock.now);
}

/* The glue's completion: objects watched before the dump are forgotten, then dump_done. */
static void complete(fixture *f) {
    f->retained = 0;
    lwc_trigger_dump_done(f->t, 1);
    fx_run_until(&f->exec, f->clock.now);
}

/* ---- tests -------------------------------------------------------------------------------------- */

static void test_defaults(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    assert_int_equal(f->params.threshold_visible, 5);
    assert_int_equal(f->params.threshold_background, 1);
    assert_int_equal(f->params.dump_interval_ms, 60000);
    assert_int_equal(f->params.max_dumps_per_day, 5);
    assert_int_equal(state_of(f), LWC_TRIGGER_IDLE);
    assert_string_equal(lwc_trigger_state_name(LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT), "waiting_for_retained_count");
    assert_string_equal(lwc_trigger_state_name(LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL), "waiting_for_dump_interval");
    assert_string_equal(lwc_trigger_state_name(LWC_TRIGGER_UPLOADING), "uploading");
    free_fixture(f);
}

/* Visible: 5 retained objects dump, 4 don't. */
static void test_threshold_visible(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    burst(f, 4);
    assert_int_equal(state_of(f), LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT);
    assert_int_equal(f->dumps, 0);
    f->clock.now = 1234;
    lwc_trigger_evaluate(f->t);
    assert_int_equal(f->dumps, 0);
    f->retained = 5;
    lwc_trigger_evaluate(f->t);
    assert_int_equal(state_of(f), LWC_TRIGGER_DUMPING);
    assert_int_equal(f->dumps, 0); /* the callback runs on the executor */
    fx_run_until(&f->exec, f->clock.now);
    assert_int_equal(f->dumps, 1);
    assert_string_equal(f->reason, "retained_count");
    assert_int_equal(f->dump_uptime[0], 1234);
    assert_int_equal(lwc_trigger_set_phase(f->t, LWC_TRIGGER_ANALYZING), LW_SDK_OK);
    assert_int_equal(state_of(f), LWC_TRIGGER_ANALYZING);
    assert_int_equal(lwc_trigger_set_phase(f->t, LWC_TRIGGER_UPLOADING), LW_SDK_OK);
    assert_int_equal(state_of(f), LWC_TRIGGER_UPLOADING);
    assert_int_equal(lwc_trigger_set_phase(f->t, LWC_TRIGGER_IDLE), LW_SDK_ERR_USAGE);
    complete(f);
    assert_int_equal(state_of(f), LWC_TRIGGER_IDLE);
    assert_int_equal(lwc_trigger_set_phase(f->t, LWC_TRIGGER_ANALYZING), LW_SDK_ERR_USAGE);
    free_fixture(f);
}

/* Background: one retained object is enough; going to the background re-evaluates. */
static void test_threshold_background(void **state) {
    (void)state;
    fixture *f = make_fixture(0);
    burst(f, 1);
    assert_int_equal(f->dumps, 1);
    complete(f);

    fixture *g = make_fixture(1);
    burst(g, 1);
    assert_int_equal(state_of(g), LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT);
    assert_int_equal(g->dumps, 0);
    lwc_trigger_set_visible(g->t, 0);
    fx_run_until(&g->exec, g->clock.now);
    assert_int_equal(g->dumps, 1);
    complete(g);
    /* Back to the foreground with 2 retained: below 5 again. */
    g->clock.now += 120000;
    lwc_trigger_set_visible(g->t, 1);
    burst(g, 2);
    assert_int_equal(g->dumps, 1);
    assert_int_equal(state_of(g), LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT);
    free_fixture(f);
    free_fixture(g);
}

/* A second burst within 60 s waits, then dumps at exactly +60 s. */
static void test_dump_interval(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    f->clock.now = 1000;
    burst(f, 5);
    assert_int_equal(f->dumps, 1);
    f->clock.now = 3000;
    complete(f);
    assert_int_equal(state_of(f), LWC_TRIGGER_IDLE);

    f->clock.now = 10000;
    burst(f, 6);
    assert_int_equal(state_of(f), LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL);
    assert_int_equal(f->dumps, 1);
    f->clock.now = 20000;
    lwc_trigger_evaluate(f->t); /* another batch: still waiting, no second timer needed */
    fx_run_until(&f->exec, 60999);
    assert_int_equal(f->dumps, 1);
    fx_run_until(&f->exec, 61000);
    assert_int_equal(f->dumps, 2);
    assert_int_equal(f->dump_uptime[1], 61000);
    assert_int_equal(state_of(f), LWC_TRIGGER_DUMPING);
    free_fixture(f);
}

/* While waiting for the interval the count drops to 0 (objects forgotten): no dump. */
static void test_interval_wait_then_nothing_left(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    burst(f, 5);
    complete(f);
    f->clock.now = 5000;
    burst(f, 5);
    assert_int_equal(state_of(f), LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL);
    f->retained = 0;
    fx_run_until(&f->exec, 70000);
    assert_int_equal(f->dumps, 1);
    assert_int_equal(state_of(f), LWC_TRIGGER_IDLE);
    free_fixture(f);
}

/* At most max_dumps_per_day in any 24 h: the 6th waits until 24 h after the 1st. */
static void test_max_dumps_per_day(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    for (int i = 0; i < 5; i++) {
        f->clock.now = i * 60000;
        burst(f, 5);
        assert_int_equal(f->dumps, i + 1);
        complete(f);
    }
    f->clock.now = 5 * 60000;
    burst(f, 5);
    assert_int_equal(f->dumps, 5);
    assert_int_equal(state_of(f), LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL);
    assert_non_null(strstr(f->log, "max_dumps_per_day"));
    int started = -1;
    assert_int_equal(lwc_trigger_dump_now(f->t, &started), LW_SDK_ERR_LIMIT); /* manual too */
    assert_int_equal(started, 0);
    lwc_trigger_stats st;
    lwc_trigger_get_stats(f->t, &st);
    assert_int_equal(st.skipped_daily, 2);
    fx_run_until(&f->exec, DAY - 1);
    assert_int_equal(f->dumps, 5);
    fx_run_until(&f->exec, DAY);
    assert_int_equal(f->dumps, 6);
    assert_int_equal(f->dump_uptime[5], DAY);
    complete(f);
    /* The 2nd dump (at +60 s) is still in the window: the next one waits for DAY + 60 s. */
    f->clock.now = DAY + 1000;
    burst(f, 5);
    assert_int_equal(f->dumps, 6);
    fx_run_until(&f->exec, DAY + 60000);
    assert_int_equal(f->dumps, 7);
    free_fixture(f);
}

/* Free spool disk must be >= 2 x heap in use; else skip and log why. */
static void test_free_disk_skip(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    f->heap_used = 100 * MIB;
    f->free_bytes = 150 * MIB;
    burst(f, 5);
    assert_int_equal(f->dumps, 0);
    assert_int_equal(state_of(f), LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT);
    assert_non_null(strstr(f->log, "dump skipped: 150 MiB free in the spool, need 200 MiB"));
    assert_int_equal(lwc_trigger_dump_now(f->t, NULL), LW_SDK_ERR_LIMIT);
    lwc_trigger_stats st;
    lwc_trigger_get_stats(f->t, &st);
    assert_int_equal(st.skipped_disk, 2);
    assert_int_equal(st.dumps, 0);
    /* Space is freed: the retry (one interval later) dumps without a new burst. */
    f->free_bytes = 200 * MIB;
    fx_run_until(&f->exec, 60000);
    assert_int_equal(f->dumps, 1);
    free_fixture(f);
}

/* The real statvfs path on the spool directory. */
static void test_free_disk_statvfs(void **state) {
    (void)state;
    lw_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.spool_dir = "/tmp";
    fixture *f = make_fixture_cfg(1, &cfg);
    f->params.free_disk = NULL;
    lwc_trigger_free(f->t);
    lwc_log log = {capture_log, f};
    assert_int_equal(lwc_trigger_new(&f->t, &f->runtime, &f->lwclock, &f->lwexec, &f->params, log), LW_SDK_OK);
    f->heap_used = UINT64_MAX / 4; /* no disk is that big */
    burst(f, 5);
    assert_int_equal(f->dumps, 0);
    assert_non_null(strstr(f->log, "free in the spool"));
    f->heap_used = 1;
    f->clock.now = 1000;
    burst(f, 5);
    assert_int_equal(f->dumps, 1);
    free_fixture(f);
}

/* A manual dump bypasses the count and the interval, not a dump in progress. */
static void test_manual(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    int started = -1;
    assert_int_equal(lwc_trigger_dump_now(f->t, &started), LW_SDK_OK); /* nothing retained */
    assert_int_equal(started, 0);
    assert_int_equal(f->dumps, 0);

    burst(f, 1); /* below the visible threshold */
    assert_int_equal(state_of(f), LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT);
    assert_int_equal(lwc_trigger_dump_now(f->t, &started), LW_SDK_OK);
    assert_int_equal(started, 1);
    assert_int_equal(state_of(f), LWC_TRIGGER_DUMPING);
    assert_int_equal(lwc_trigger_dump_now(f->t, &started), LW_SDK_ERR_BUSY); /* posted, not yet run */
    fx_run_until(&f->exec, f->clock.now);
    assert_int_equal(f->dumps, 1);
    assert_string_equal(f->reason, "manual");
    assert_int_equal(lwc_trigger_dump_now(f->t, &started), LW_SDK_ERR_BUSY);
    assert_int_equal(started, 0);
    lwc_trigger_set_phase(f->t, LWC_TRIGGER_UPLOADING);
    assert_int_equal(lwc_trigger_dump_now(f->t, NULL), LW_SDK_ERR_BUSY);
    /* A retained-count evaluation during the dump does nothing. */
    f->retained = 10;
    lwc_trigger_evaluate(f->t);
    fx_run_until(&f->exec, f->clock.now);
    assert_int_equal(f->dumps, 1);
    assert_int_equal(state_of(f), LWC_TRIGGER_UPLOADING);
    complete(f);
    /* 1 s after the last dump: a manual dump does not wait for the interval. */
    f->clock.now = 1000;
    f->retained = 1;
    assert_int_equal(lwc_trigger_dump_now(f->t, &started), LW_SDK_OK);
    assert_int_equal(started, 1);
    fx_run_until(&f->exec, f->clock.now);
    assert_int_equal(f->dumps, 2);
    assert_int_equal(f->dump_uptime[1], 1000);
    free_fixture(f);
}

/* The dump callback may finish synchronously (an in-process dump) without deadlock. */
static void test_done_inside_callback(void **state) {
    (void)state;
    fixture *f = make_fixture(0);
    f->done_inline = 1;
    burst(f, 1); /* the dump runs and completes; its re-evaluation is posted and run */
    assert_int_equal(f->dumps, 1);
    assert_int_equal(state_of(f), LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL); /* still 1 retained, within 60 s */
    free_fixture(f);
}

/* A dump that fails to start counts against the interval and is retried after it (no spin). */
static void test_dump_fails_to_start(void **state) {
    (void)state;
    fixture *f = make_fixture(0);
    f->dump_result = -1;
    burst(f, 1);
    assert_int_equal(f->dumps, 1);
    assert_int_equal(state_of(f), LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT);
    lwc_trigger_stats st;
    lwc_trigger_get_stats(f->t, &st);
    assert_int_equal(st.dumps_failed, 1);
    fx_run_until(&f->exec, 59999);
    assert_int_equal(f->dumps, 1);
    f->dump_result = 0;
    fx_run_until(&f->exec, 60000);
    assert_int_equal(f->dumps, 2);
    lwc_trigger_dump_done(f->t, 0);
    lwc_trigger_get_stats(f->t, &st);
    assert_int_equal(st.dumps_failed, 2);
    lwc_trigger_dump_done(f->t, 1); /* a stray completion is ignored */
    assert_non_null(strstr(f->log, "without a dump in progress"));
    free_fixture(f);
}

static void test_bad_params(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    lwc_trigger *t = (lwc_trigger *)1;
    lwc_trigger_params p = f->params;
    lwc_log nolog = {NULL, NULL};
    p.dump = NULL;
    assert_int_equal(lwc_trigger_new(&t, &f->runtime, &f->lwclock, &f->lwexec, &p, nolog), LW_SDK_ERR_USAGE);
    assert_null(t);
    p = f->params;
    p.threshold_visible = 0;
    assert_int_equal(lwc_trigger_new(&t, &f->runtime, &f->lwclock, &f->lwexec, &p, nolog), LW_SDK_ERR_USAGE);
    lw_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_dumps_per_day = LWC_MAX_DUMPS_PER_DAY_LIMIT + 1;
    assert_int_equal(lwc_trigger_params_from_config(&p, &cfg), LW_SDK_ERR_USAGE);
    assert_int_equal(lwc_trigger_dump_now(NULL, NULL), LW_SDK_ERR_USAGE);
    lwc_trigger_free(NULL);
    free_fixture(f);
}

/* ---- wired to a watcher, as client.c does ----------------------------------------------------- */

static int w_reclaimed(void *ctx, lw_handle h) { (void)ctx; (void)h; return 0; }
static int w_gc(void *ctx) { (*(int *)ctx)++; return 0; }
static void w_mark(void *ctx, lw_handle h, int64_t up) { (void)ctx; (void)h; (void)up; }

static void glue_batch_done(void *user, size_t retained_now, size_t newly) {
    (void)retained_now;
    (void)newly;
    lwc_trigger_evaluate(((fixture *)user)->t);
}

static void test_wired_with_watcher(void **state) {
    (void)state;
    fixture *f = make_fixture(1);
    int gcs = 0;
    lw_runtime wrt = {.struct_size = sizeof wrt, .ctx = &gcs, .is_reclaimed = w_reclaimed, .run_gc = w_gc,
                      .mark_retained = w_mark};
    lw_config cfg;
    memset(&cfg, 0, sizeof cfg);
    lwc_watcher_params wp;
    assert_int_equal(lwc_watcher_params_from_config(&wp, &cfg), LW_SDK_OK);
    wp.on_batch_done = glue_batch_done;
    wp.user = f;
    lwc_log log = {capture_log, f};
    assert_int_equal(lwc_watcher_new(&f->w, &wrt, &f->lwclock, &f->lwexec, &wp, log), LW_SDK_OK);
    for (lw_handle h = 1; h <= 5; h++) assert_int_equal(lwc_watcher_watch(f->w, h, "Screen destroyed", NULL), LW_SDK_OK);
    fx_run_until(&f->exec, 5199);
    assert_int_equal(f->dumps, 0);
    fx_run_until(&f->exec, 5200);
    assert_int_equal(gcs, 3);
    assert_int_equal(f->dumps, 1);
    assert_int_equal(f->dump_uptime[0], 5200);
    /* The callback forgot everything watched before the dump; completing leaves nothing. */
    assert_int_equal(lwc_watcher_retained_count(f->w), 0);
    lwc_trigger_dump_done(f->t, 1);
    fx_run_until(&f->exec, 100000);
    assert_int_equal(state_of(f), LWC_TRIGGER_IDLE);
    assert_int_equal(f->dumps, 1); /* the same leak does not trigger again */
    free_fixture(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_threshold_visible),
        cmocka_unit_test(test_threshold_background),
        cmocka_unit_test(test_dump_interval),
        cmocka_unit_test(test_interval_wait_then_nothing_left),
        cmocka_unit_test(test_max_dumps_per_day),
        cmocka_unit_test(test_free_disk_skip),
        cmocka_unit_test(test_free_disk_statvfs),
        cmocka_unit_test(test_manual),
        cmocka_unit_test(test_done_inside_callback),
        cmocka_unit_test(test_dump_fails_to_start),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_wired_with_watcher),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
