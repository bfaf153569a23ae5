/* test_analysis.c — lw_heap_analyze as a whole: determinism, retained sizes, progress,
 * argument checks, and allocation failure at every allocation (never a crash or a leak). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "heap_builder.h"
#include "hprof_format.h"

/* A dump with several leaks of different shapes (static, array, local, library on Android). */
static hb *mixed_dump(const char *version, unsigned ids) {
    hb *b = hb_new(version, ids);
    uint64_t reg = hb_class(b, "com.example.Registry", NULL, NULL, "listeners:O single:O");
    hb_add_screen_leaks(b, reg);
    hb_class(b, "android.app.Activity$1", NULL, "this$0:O", NULL);
    uint64_t g = hb_class(b, "com.example.Global", NULL, NULL, "cb:O");
    uint64_t cb = hb_instance(b, "android.app.Activity$1"), act = hb_instance(b, "com.example.Screen");
    hb_set(b, cb, "this$0", act);
    hb_set_static(b, g, "cb", cb);
    hb_watch(b, act, "act", "activity", 1);
    hb_add_local_leak(b);
    return b;
}

static void test_same_dump_analyzed_twice_gives_identical_json(void **state) {
    (void)state;
    hb *b = mixed_dump(HB_ANDROID, 4);
    char *path = hb_write_temp(b);
    char *json[3];
    for (int i = 0; i < 2; i++) {
        lw_heap *heap = NULL;
        assert_int_equal(lw_heap_open(&heap, path, NULL, NULL), LW_OK);
        lw_leak_report *r = hb_analyze(heap, NULL);
        assert_int_equal(r->leak_count, 4); /* listeners (3), single, library, local */
        json[i] = hb_report_json(r);
        if (i == 1) { /* the same heap analyzed again */
            lw_leak_report *again = hb_analyze(heap, NULL);
            json[2] = hb_report_json(again);
            lw_leak_report_free(again);
        }
        lw_leak_report_free(r);
        lw_heap_free(heap);
    }
    assert_string_equal(json[0], json[1]);
    assert_string_equal(json[0], json[2]);
    for (int i = 0; i < 3; i++) free(json[i]);
    unlink(path);
    free(path);
    hb_free(b);
}

static void test_leaks_are_ordered_application_first_then_by_count(void **state) {
    (void)state;
    hb *b = mixed_dump(HB_ANDROID, 8);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    assert_int_equal(r->leak_count, 4);
    assert_int_equal(r->leaks[0].library, 0);
    assert_int_equal(r->leaks[0].count, 3);
    assert_string_equal(r->leaks[0].short_description, "Registry.listeners");
    assert_int_equal(r->leaks[1].library, 0);
    assert_int_equal(r->leaks[2].library, 0);
    assert_int_equal(r->leaks[3].library, 1);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_retained_size_counts_only_what_the_leak_alone_holds(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    uint64_t h = hb_class(b, "Holder", NULL, NULL, "screen:O shared:O");
    hb_class(b, "Screen", NULL, "data:O child:O shared:O", NULL);
    hb_class(b, "Child", NULL, "x:I", NULL);
    uint64_t s = hb_instance(b, "Screen"), c = hb_instance(b, "Child"), shared = hb_instance(b, "Child");
    hb_set(b, s, "data", hb_prim_array(b, LW_T_BYTE, NULL, 100));
    hb_set(b, s, "child", c);
    hb_set(b, s, "shared", shared);
    hb_set_static(b, h, "screen", s);
    hb_set_static(b, h, "shared", shared);
    hb_watch(b, s, "k", "d", 1);
    lw_heap *heap = hb_open(b);
    lw_analysis_options o = {sizeof o, NULL, 1, NULL, NULL};
    lw_leak_report *r = NULL;
    assert_int_equal(lw_heap_analyze(heap, &o, &r, NULL), LW_OK);
    assert_int_equal(r->leak_count, 1);
    const lw_trace *t = &r->leaks[0].traces[0];
    const lw_trace_element *last = &t->elements[t->element_count - 1];
    /* Screen (24 field bytes + 16) + byte[100] + Child (4 + 16); not the shared Child. */
    assert_int_equal(last->retained_objects, 3);
    assert_int_equal(last->retained_bytes, 40 + 100 + 20);
    assert_true(r->retained_ms >= 0);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    hb_free(b);
}

typedef struct {
    int index_calls, paths_calls;
} progress_count;

static void on_progress(void *user, const char *phase, uint64_t done, uint64_t total) {
    progress_count *p = user;
    assert_true(total == 0 || done <= total);
    if (strcmp(phase, "index") == 0) p->index_calls++;
    else if (strcmp(phase, "paths") == 0) p->paths_calls++;
    else fail_msg("unexpected phase %s", phase);
}

static void test_progress_reports_index_and_paths(void **state) {
    (void)state;
    hb *b = mixed_dump(HB_JVM, 8);
    char *path = hb_write_temp(b);
    progress_count pc = {0, 0};
    lw_heap_options ho = {.struct_size = sizeof ho, .progress = on_progress, .progress_user = &pc};
    lw_heap *heap = NULL;
    assert_int_equal(lw_heap_open(&heap, path, &ho, NULL), LW_OK);
    assert_true(pc.index_calls >= 1);
    lw_analysis_options ao = {sizeof ao, NULL, 0, on_progress, &pc};
    lw_leak_report *r = NULL;
    assert_int_equal(lw_heap_analyze(heap, &ao, &r, NULL), LW_OK);
    assert_true(pc.paths_calls >= 1);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    unlink(path);
    free(path);
    hb_free(b);
}

static void test_bad_arguments_are_usage_errors(void **state) {
    (void)state;
    lw_error err = {0};
    lw_leak_report *r = NULL;
    assert_int_equal(lw_heap_analyze(NULL, NULL, &r, &err), LW_ERR_USAGE);
    lw_heap *heap = NULL;
    assert_int_equal(lw_heap_open(&heap, NULL, NULL, &err), LW_ERR_USAGE);
    assert_int_equal(lw_heap_open(NULL, "/nonexistent", NULL, &err), LW_ERR_USAGE);
    assert_int_equal(lw_heap_open(&heap, "/nonexistent/dump.hprof", NULL, &err), LW_ERR_IO);
    assert_null(heap);
    lw_heap_free(NULL);
    lw_leak_report_free(NULL);
    assert_string_equal(lw_core_version(), LW_CORE_VERSION_STRING);
    for (int s = 0; s <= 7; s++) assert_non_null(lw_strerror((lw_status)s));
}

/* Every allocation of open + analyze (+ retained sizes, + text) made to fail in turn. */
static void alloc_failure_sweep(int retained) {
    hb *b = mixed_dump(HB_ANDROID, 4);
    char *path = hb_write_temp(b);
    lw_analysis_options o = {sizeof o, NULL, retained, NULL, NULL};
    char *reference = NULL;
    {
        lw_heap *heap = NULL;
        assert_int_equal(lw_heap_open(&heap, path, NULL, NULL), LW_OK);
        lw_leak_report *r = NULL;
        assert_int_equal(lw_heap_analyze(heap, &o, &r, NULL), LW_OK);
        reference = hb_report_json(r);
        lw_leak_report_free(r);
        lw_heap_free(heap);
    }
    int succeeded = 0;
    long n;
    for (n = 0; n < 100000 && succeeded < 5; n++) {
        lw_heap *heap = NULL;
        lw_leak_report *r = NULL;
        lw_error err = {0};
        lw__alloc_fail_after(n);
        lw_status st = lw_heap_open(&heap, path, NULL, &err);
        if (st == LW_OK) {
            st = lw_heap_analyze(heap, &o, &r, &err);
            if (st != LW_OK) assert_null(r);
        } else {
            assert_null(heap);
        }
        char *text = r ? lw_leak_report_to_text(r) : NULL;
        lw__alloc_fail_after(-1);
        if (st != LW_OK && st != LW_ERR_NOMEM)
            fail_msg("allocation %ld failing gave %s: %s", n, lw_strerror(st), err.message);
        if (st == LW_OK) {
            char *json = hb_report_json(r);
            assert_string_equal(json, reference);
            free(json);
            succeeded++;
        }
        free(text);
        lw_leak_report_free(r);
        lw_heap_free(heap);
    }
    assert_int_equal(succeeded, 5);
    assert_true(n > 20); /* the sweep really went through the allocations */
    free(reference);
    unlink(path);
    free(path);
    hb_free(b);
}

static void test_allocation_failure_anywhere_gives_nomem_or_ok(void **state) {
    (void)state;
    alloc_failure_sweep(0);
}

static void test_allocation_failure_with_retained_sizes(void **state) {
    (void)state;
    alloc_failure_sweep(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_dump_analyzed_twice_gives_identical_json),
        cmocka_unit_test(test_leaks_are_ordered_application_first_then_by_count),
        cmocka_unit_test(test_retained_size_counts_only_what_the_leak_alone_holds),
        cmocka_unit_test(test_progress_reports_index_and_paths),
        cmocka_unit_test(test_bad_arguments_are_usage_errors),
        cmocka_unit_test(test_allocation_failure_anywhere_gives_nomem_or_ok),
        cmocka_unit_test(test_allocation_failure_with_retained_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
