/* analysis.c — lw_heap_analyze: leaking objects, paths, retained sizes, traces. */
#include <time.h>

#include "heap_index.h"
#include "leak_finder.h"
#include "path_finder.h"
#include "retained_size.h"
#include "trace_builder.h"

static int64_t ms_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (int64_t)(t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static lw_status analyze(lw_heap *heap, const lw_analysis_options *opts, lw_leak_report **out, lw_error *err) {
    const char *key = NULL;
    int retained = 0;
    if (opts && opts->struct_size >= sizeof *opts) {
        key = opts->key;
        retained = opts->compute_retained;
        heap->progress = opts->progress ? opts->progress : heap->progress;
        heap->progress_user = opts->progress ? opts->progress_user : heap->progress_user;
    }
    lw_status st;
    lw__leaking_object *objs = NULL;
    size_t nobjs = 0;
    uint32_t *dense = NULL;
    uint64_t *bytes = NULL, *objects = NULL;
    lw__paths paths = {0};
    lw_leak_report *r = lw__calloc(1, sizeof *r);
    if (!r) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
    r->format = 1;
    r->analyzer_name = lw__strdup("leakwatch");
    r->analyzer_version = lw__strdup(LW_CORE_VERSION_STRING);
    r->hprof_version = lw__strdup(heap->summary.hprof_version);
    r->id_size = heap->summary.id_size;
    r->objects = lw__heap_dense_count(heap);
    r->bytes = heap->summary.file_bytes;
    r->index_ms = (int64_t)(heap->summary.index_seconds * 1000.0 + 0.5);
    r->paths_ms = r->retained_ms = -1;
    if (!r->analyzer_name || !r->analyzer_version || !r->hprof_version) {
        st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
        goto out;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = lw__find_leaking_objects(heap, key, &objs, &nobjs, err);
    if (st != LW_OK) goto out;
    dense = lw__malloc((nobjs + 1) * sizeof *dense);
    if (!dense) {
        st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nobjs; i++) dense[i] = objs[i].dense;
    if (nobjs > 0 || retained) {
        st = lw__find_paths(heap, dense, nobjs, retained, &paths, err);
        if (st != LW_OK) goto out;
    }
    r->paths_ms = ms_since(&t0);
    if (retained && paths.found_count) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        bytes = lw__calloc(paths.found_count, sizeof *bytes);
        objects = lw__calloc(paths.found_count, sizeof *objects);
        if (!bytes || !objects) {
            st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
            goto out;
        }
        st = lw__retained_sizes(heap, &paths, bytes, objects, err);
        if (st != LW_OK) goto out;
        r->retained_ms = ms_since(&t1);
    }
    if (paths.found_count) {
        st = lw__build_traces(heap, &paths, objs, nobjs, bytes, objects, r, err);
        if (st != LW_OK) goto out;
    }
    if (heap->progress) heap->progress(heap->progress_user, "paths", lw__heap_dense_count(heap), lw__heap_dense_count(heap));
    *out = r;
    r = NULL;
out:
    lw_leak_report_free(r);
    lw__paths_free(&paths);
    lw__leaking_objects_free(objs, nobjs);
    lw__free(dense);
    lw__free(bytes);
    lw__free(objects);
    return st;
}

lw_status lw_heap_analyze(lw_heap *heap, const lw_analysis_options *opts, lw_leak_report **out, lw_error *err) {
    if (!heap || !out) return lw__fail(err, LW_ERR_USAGE, "lw_heap_analyze: missing argument");
    *out = NULL;
    lw__budget *outer = lw__budget_enter(&heap->budget);
    uint64_t held = heap->budget.used;
    lw_status st = analyze(heap, opts, out, err);
    lw__budget_leave(outer);
    /* Analysis keeps nothing in the heap: all it allocated is freed by now or is the report,
     * which is the caller's from here on (and freed outside any call on the heap). */
    heap->budget.used = held;
    st = lw__budget_verdict(&heap->budget, st, "analysis", err);
    if (st != LW_OK) {
        lw_leak_report_free(*out);
        *out = NULL;
    }
    return st;
}
