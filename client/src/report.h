/* report.h — what a heap dump becomes before it enters the spool: the `meta` of the wire
 * protocol, and the data part (mode heap: the trimmed dump, zstd-compressed; mode traces:
 * the trace JSON from the analyzer, run as a helper executable, never in a fork of the app). */
#ifndef LWC_REPORT_H
#define LWC_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "leakwatch.h"

typedef struct lwc_retained_info {
    const char *key;
    const char *description;
    int64_t watch_ms;     /* from watch to the dump */
    int64_t retained_ms;  /* from retained to the dump */
} lwc_retained_info;

typedef struct lwc_meta_in {
    const char *report_id;
    const char *install_id;
    const char *trigger;  /* "retained_count", "manual" */
    int64_t created_wall_ms;
    uint64_t heap_used, heap_max;
    const lwc_retained_info *retained;
    size_t retained_count;
} lwc_meta_in;

/* The meta JSON (malloc'd; "dropped" is set by the uploader when it sends). NULL when out of memory. */
char *lwc_meta_json(const lw_config *cfg, const lwc_meta_in *in);

/* Turns the raw dump at `dump_path` into the data file `out_path`. Returns 0, or -1 with a
 * message in `err`. The raw dump is left for the caller to delete. */
int lwc_report_data(const lw_config *cfg, const char *dump_path, const char *out_path, char *err, size_t cap);

#endif
