/* test_memory_budget.c — lw_heap_options.memory_budget: a budget too small for the index fails
 * lw_heap_open, one that fits the index but not the analysis fails lw_heap_analyze, both with
 * LW_ERR_BUDGET and a message naming the budget; the peak an unlimited run measures is enough
 * and gives the same traces; every budget in between gives the traces or LW_ERR_BUDGET, never a
 * different result; older callers' smaller options struct still works. The ASan pass checks
 * that the failures leak nothing. */
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
#include "heap_index.h"
#include "hprof_format.h"

/* Leaks through a static array, a static field and a thread's local, among `filler` objects
 * on a list: with enough of them, what the analysis holds on top of the index (5 bytes an
 * object) outweighs the index's temporaries (a 64 KiB name cache), so the two peaks differ. */
static hb *leaky_dump(uint32_t filler) {
    hb *b = hb_new(HB_JVM, 8);
    uint64_t reg = hb_class(b, "com.example.Registry", NULL, NULL, "listeners:O single:O all:O");
    hb_class(b, "com.example.Node", NULL, "next:O v:I", NULL);
    hb_add_screen_leaks(b, reg);
    uint64_t prev = 0;
    for (uint32_t i = 0; i < filler; i++) {
        uint64_t n = hb_instance(b, "com.example.Node");
        hb_set(b, n, "next", prev);
        prev = n;
    }
    hb_set_static(b, reg, "all", prev);
    hb_add_local_leak(b);
    return b;
}

typedef struct {
    char *path;
    char *json;         /* the traces without a budget */
    uint64_t open_peak; /* lw_heap_memory_peak after lw_heap_open, without a budget */
    uint64_t peak;      /* and after lw_heap_analyze */
} fixture;

/* The budget counts the bytes malloc really holds, which vary a little from run to run: glibc
 * hands out a free chunk up to 24 bytes larger than asked for when the rest is too small to
 * split off. A run's peak is matched within this. */
static uint64_t slack(uint64_t peak) { return peak / 100; }

static lw_status open_with(const char *path, uint64_t budget, lw_heap **heap, lw_error *err) {
    lw_heap_options o = {.struct_size = sizeof o, .memory_budget = budget};
    *heap = NULL;
    return lw_heap_open(heap, path, &o, err);
}

static void measure(fixture *f, uint32_t filler) {
    hb *b = leaky_dump(filler);
    f->path = hb_write_temp(b);
    hb_free(b);
    lw_heap *heap = NULL;
    assert_int_equal(open_with(f->path, 0, &heap, NULL), LW_OK);
    f->open_peak = lw_heap_memory_peak(heap);
    lw_leak_report *r = hb_analyze(heap, NULL);
    f->peak = lw_heap_memory_peak(heap);
    assert_int_equal(r->leak_count, 3); /* listeners (3), single, local */
    f->json = hb_report_json(r);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    assert_true(f->open_peak > 0 && f->peak > f->open_peak); /* the analysis holds more on top of the index */
}

static void release(fixture *f) {
    unlink(f->path);
    free(f->path);
    free(f->json);
}

static void test_budget_far_too_small_fails_open_naming_it(void **state) {
    (void)state;
    fixture f;
    measure(&f, 20000);
    lw_heap *heap = (lw_heap *)1;
    lw_error err = {0};
    assert_int_equal(open_with(f.path, 4096, &heap, &err), LW_ERR_BUDGET);
    assert_null(heap);
    assert_int_equal(err.status, LW_ERR_BUDGET);
    assert_non_null(strstr(err.message, "the analysis needs more than its memory budget of 4096 bytes (index: "));
    /* a budget too small even for the heap's own struct */
    assert_int_equal(open_with(f.path, 1, &heap, &err), LW_ERR_BUDGET);
    assert_null(heap);
    assert_non_null(strstr(err.message, "memory budget of 1 bytes (index: 0 bytes held when "));
    release(&f);
}

static void test_the_measured_peak_is_enough_and_gives_the_same_traces(void **state) {
    (void)state;
    fixture f;
    measure(&f, 20000);
    lw_heap *heap = NULL;
    lw_error err = {0};
    assert_int_equal(open_with(f.path, f.peak + slack(f.peak), &heap, &err), LW_OK);
    lw_leak_report *r = NULL;
    assert_int_equal(lw_heap_analyze(heap, NULL, &r, &err), LW_OK);
    char *json = hb_report_json(r);
    assert_string_equal(json, f.json);
    assert_true(lw_heap_memory_peak(heap) >= f.peak - slack(f.peak) && lw_heap_memory_peak(heap) <= f.peak + slack(f.peak));
    free(json);
    lw_leak_report_free(r);
    /* the report left the count: the same heap analyzes again within the same budget */
    assert_int_equal(lw_heap_analyze(heap, NULL, &r, &err), LW_OK);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    /* a little less than the peak is not enough */
    assert_int_equal(open_with(f.path, f.peak - slack(f.peak), &heap, &err), LW_OK);
    assert_int_equal(lw_heap_analyze(heap, NULL, &r, &err), LW_ERR_BUDGET);
    assert_null(r);
    lw_heap_free(heap);
    release(&f);
}

static void test_budget_for_the_index_only_fails_analyze(void **state) {
    (void)state;
    fixture f;
    measure(&f, 20000);
    uint64_t budget = f.open_peak + (f.peak - f.open_peak) / 2;
    assert_true(budget > f.open_peak + slack(f.open_peak) && budget < f.peak - slack(f.peak));
    lw_heap *heap = NULL;
    lw_error err = {0};
    assert_int_equal(open_with(f.path, budget, &heap, &err), LW_OK);
    uint64_t held = heap->budget.used;
    lw_leak_report *r = (lw_leak_report *)1;
    assert_int_equal(lw_heap_analyze(heap, NULL, &r, &err), LW_ERR_BUDGET);
    assert_null(r);
    char want[128];
    snprintf(want, sizeof want, "the analysis needs more than its memory budget of %llu bytes (analysis: ",
             (unsigned long long)budget);
    assert_non_null(strstr(err.message, want));
    /* what the failed analysis allocated is all given back: a second try fails the same way,
     * and the heap still serves what fits */
    assert_int_equal(heap->budget.used, held);
    assert_true(lw_heap_memory_peak(heap) <= budget + 64); /* over it by malloc's rounding at most */
    assert_int_equal(lw_heap_analyze(heap, NULL, &r, &err), LW_ERR_BUDGET);
    assert_int_equal(heap->budget.used, held);
    lw_class_stat st[4];
    assert_int_equal(lw_heap_class_histogram(heap, 0, st, 4, &err), 4);
    assert_string_equal(st[0].class_name, "com.example.Node");
    lw_heap_free(heap);
    release(&f);
}

static void test_histogram_over_the_budget_fails(void **state) {
    (void)state;
    fixture f;
    measure(&f, 20000);
    lw_heap *heap = NULL;
    assert_int_equal(open_with(f.path, f.open_peak + slack(f.open_peak), &heap, NULL), LW_OK);
    heap->budget.limit = heap->budget.used + 16; /* what is left: less than one slot per class */
    lw_class_stat st[4];
    lw_error err = {0};
    assert_int_equal(lw_heap_class_histogram(heap, 0, st, 4, &err), 0);
    assert_int_equal(err.status, LW_ERR_BUDGET);
    assert_non_null(strstr(err.message, "memory budget of"));
    assert_non_null(strstr(err.message, "(class histogram: "));
    lw_heap_free(heap);
    release(&f);
}

/* Budgets from what the index needs to what the analysis needs: the same traces, or
 * LW_ERR_BUDGET naming the budget — never a report short of something an allocation refused
 * (some steps carry on without a label or a string they could not allocate, which only a
 * budget, refusing one request and granting a smaller next one, brings about). Byte by byte
 * over the last 2 KiB, where the traces are built; in coarser steps below. */
static void test_every_budget_gives_the_traces_or_nomem(void **state) {
    (void)state;
    fixture f;
    measure(&f, 8000);
    uint64_t lo = f.open_peak - 256, fine_lo = f.peak - 2048, fine_hi = f.peak + 64, hi = f.peak + slack(f.peak);
    int ok = 0, nomem_open = 0, nomem_analyze = 0;
    for (uint64_t budget = lo; budget <= hi; budget += budget >= fine_lo && budget < fine_hi ? 1 : 97) {
        lw_heap *heap = NULL;
        lw_leak_report *r = NULL;
        lw_error err = {0};
        lw_status st = open_with(f.path, budget, &heap, &err);
        if (st == LW_OK) {
            st = lw_heap_analyze(heap, NULL, &r, &err);
            if (st == LW_OK) {
                char *json = hb_report_json(r);
                if (strcmp(json, f.json) != 0) fail_msg("budget %llu: different traces:\n%s", (unsigned long long)budget, json);
                free(json);
                ok++;
            } else {
                assert_null(r);
                nomem_analyze++;
            }
        } else {
            assert_null(heap);
            nomem_open++;
        }
        if (st != LW_OK && (st != LW_ERR_BUDGET || !strstr(err.message, "memory budget of")))
            fail_msg("budget %llu: %s: %s", (unsigned long long)budget, lw_strerror(st), err.message);
        lw_leak_report_free(r);
        lw_heap_free(heap);
    }
    assert_true(ok > 0 && nomem_open > 0 && nomem_analyze > 100);
    release(&f);
}

/* The accountant itself, inside one call's scope: a refused request fails the call even when
 * the step that asked carried on and a smaller request after it fitted; a free of a block
 * allocated outside any call (never charged) stops the count at 0; scopes nest. */
static void test_accountant_refusal_saturation_and_nesting(void **state) {
    (void)state;
    void *outside = lw__malloc(1000); /* no scope: charged to nobody */
    lw__budget b = {.limit = 4096}, inner = {0};
    lw__budget *outer = lw__budget_enter(&b);
    assert_null(outer);
    void *small = lw__malloc(100);
    assert_non_null(small);
    uint64_t held = b.used;
    assert_true(held >= 100 && held < 200);
    assert_null(lw__malloc(8000));          /* refused: over the limit */
    assert_null(lw__calloc(1000, 8));       /* and as calloc */
    assert_null(lw__realloc(small, 8000));  /* and as realloc, which keeps the block */
    void *more = lw__strdup("fits");        /* a smaller request still fits */
    assert_non_null(more);
    assert_true(b.refusals == 3 && b.refused_bytes == 8000 && b.refused_held == held);
    assert_ptr_equal(lw__budget_enter(&inner), &b); /* nested: inner counts alone */
    void *x = lw__malloc(50000);
    assert_non_null(x);
    lw__free(x);
    lw__budget_leave(&b);
    assert_true(inner.peak >= 50000 && inner.used == 0);
    assert_true(b.peak < 4096);
    lw__free(outside); /* never charged: the count stops at 0, never wraps */
    lw__free(small);
    lw__free(more);
    assert_int_equal(b.used, 0);
    lw__budget_leave(outer);
    lw_error err = {0};
    assert_int_equal(lw__budget_verdict(&b, LW_OK, "test", &err), LW_ERR_BUDGET);
    char want[200];
    snprintf(want, sizeof want,
             "the analysis needs more than its memory budget of 4096 bytes (test: %llu bytes held when 8000 more were asked for)",
             (unsigned long long)held);
    assert_string_equal(err.message, want);
    void *after = lw__malloc(10); /* out of scope again: charged to nobody */
    lw__free(after);
    assert_int_equal(b.used, 0);
}

/* A caller built before memory_budget existed passes the smaller struct_size: its progress
 * callback is still called, and what lies past its struct is not read as a budget. */
static void on_progress(void *user, const char *phase, uint64_t done, uint64_t total) {
    (void)phase, (void)done, (void)total;
    ++*(int *)user;
}

static void test_older_callers_options_still_work(void **state) {
    (void)state;
    fixture f;
    measure(&f, 20000);
    int calls = 0;
    lw_heap_options o = {.struct_size = offsetof(lw_heap_options, memory_budget), .progress = on_progress,
                         .progress_user = &calls, .memory_budget = 1};
    lw_heap *heap = NULL;
    lw_error err = {0};
    assert_int_equal(lw_heap_open(&heap, f.path, &o, &err), LW_OK);
    assert_true(calls > 0);
    assert_int_equal(heap->budget.limit, 0);
    lw_heap_free(heap);
    release(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_far_too_small_fails_open_naming_it),
        cmocka_unit_test(test_the_measured_peak_is_enough_and_gives_the_same_traces),
        cmocka_unit_test(test_budget_for_the_index_only_fails_analyze),
        cmocka_unit_test(test_histogram_over_the_budget_fails),
        cmocka_unit_test(test_every_budget_gives_the_traces_or_nomem),
        cmocka_unit_test(test_accountant_refusal_saturation_and_nesting),
        cmocka_unit_test(test_older_callers_options_still_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
