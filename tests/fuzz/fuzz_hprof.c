/* fuzz_hprof.c — libFuzzer target for the HPROF reader and everything that reads a heap:
 * pass-1 index, leak finder, path finder, trace builder, retained sizes, rendering,
 * histograms. The input bytes are opened from memory (no disk I/O). The check that judges a
 * dump as it is decompressed (lw__hprof_check) must refuse nothing the reader takes.
 *
 * Build: see tests/fuzz/README.md. The same file links into fuzz_hprof_replay (replay.c
 * provides main) so ctest re-runs the corpus and regressions/ without libFuzzer. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hprof_reader.h"
#include "leakcore.h"

/* Internal to libleakcore (heap_objects.c): opens a dump held in memory. */
lw_status lw__heap_open_memory(lw_heap **out, const void *data, size_t size, lw_error *err);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Touch every byte of a returned string so ASan sees any missing terminator or stale buffer. */
static size_t consume(const char *s) {
    return s ? strlen(s) : 0;
}

static void exercise_report(const lw_leak_report *report) {
    char *text = lw_leak_report_to_text(report);
    consume(text);
    free(text);
    char *json = lw_leak_report_to_json(report, 0);
    consume(json);
    free(json);
    char *pretty = lw_leak_report_to_json(report, 1);
    consume(pretty);
    free(pretty);
}

/* Feeds the input to the check in pieces of a size the input chooses; aborts when the check
 * refuses what the reader took. */
static void check_agrees(const uint8_t *data, size_t size, int reader_took) {
    lw__hprof_check c;
    lw__hprof_check_init(&c);
    size_t piece = 1 + (size ? data[size / 2] : 0) % 97u;
    lw_error e;
    memset(&e, 0, sizeof e);
    lw_status st = LW_OK;
    for (size_t at = 0; at < size && st == LW_OK; at += piece)
        st = lw__hprof_check_feed(&c, data + at, size - at < piece ? size - at : piece, &e);
    if (st == LW_OK) st = lw__hprof_check_end(&c, &e);
    lw__hprof_check_free(&c);
    if (st != LW_OK && (e.message[0] == '\0' || reader_took)) {
        fprintf(stderr, "the check refused %s: %s\n", reader_took ? "what the reader took" : "without a message",
                e.message);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lw_heap *heap = NULL;
    lw_error err;
    memset(&err, 0, sizeof err);
    lw_status opened = lw__heap_open_memory(&heap, data, size, &err);
    check_agrees(data, size, opened == LW_OK);
    if (opened != LW_OK) {
        /* A failure must say why. */
        if (err.status == LW_OK || err.message[0] == '\0') {
            fprintf(stderr, "open failed without an lw_error: status %d\n", (int)err.status);
            abort();
        }
        return 0;
    }

    lw_heap_summary summary;
    lw_heap_get_summary(heap, &summary);
    consume(summary.hprof_version);

    lw_analysis_options opts;
    memset(&opts, 0, sizeof opts);
    opts.struct_size = sizeof opts;
    lw_leak_report *report = NULL;
    if (lw_heap_analyze(heap, &opts, &report, &err) == LW_OK) {
        exercise_report(report);
        lw_leak_report_free(report);
    }

    opts.compute_retained = 1;
    report = NULL;
    if (lw_heap_analyze(heap, &opts, &report, &err) == LW_OK) {
        exercise_report(report);
        lw_leak_report_free(report);
    }

    lw_class_stat stats[16];
    for (int by_bytes = 0; by_bytes <= 1; by_bytes++) {
        size_t n = lw_heap_class_histogram(heap, by_bytes, stats, sizeof stats / sizeof *stats, &err);
        if (n > sizeof stats / sizeof *stats) {
            fprintf(stderr, "histogram wrote %zu entries into 16\n", n);
            abort();
        }
        for (size_t i = 0; i < n; i++) consume(stats[i].class_name);
    }

    lw_heap_free(heap);
    return 0;
}
