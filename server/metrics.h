/* metrics.h — leakd's Prometheus metrics. HTTP counters live in the serving process; the
 * workers' analysis counters live in a small shared memory block (a memfd the workers
 * inherit), so one /metrics shows the whole process tree. */
#ifndef LD_METRICS_H
#define LD_METRICS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    LD_ROUTE_UPLOAD, LD_ROUTE_REPORT, LD_ROUTE_LEAKS, LD_ROUTE_LEAK, LD_ROUTE_LEAK_PATCH, LD_ROUTE_VERSION_LEAKS,
    LD_ROUTE_HEALTHZ, LD_ROUTE_READYZ, LD_ROUTE_OPTIONS, LD_ROUTE_OTHER, LD_ROUTE_COUNT
} ld_route;

#define LD_HTTP_BUCKETS 12     /* 5 ms .. 10 s, +Inf */
#define LD_ANALYSIS_BUCKETS 10 /* 0.5 s .. 600 s, +Inf */

/* Shared with the workers. */
typedef struct ld_worker_metrics {
    atomic_ullong analyses[4];                 /* done, failed, retried, released */
    atomic_ullong analysis_bucket[LD_ANALYSIS_BUCKETS];
    atomic_ullong analysis_ms_sum;
} ld_worker_metrics;

typedef struct ld_metrics {
    atomic_ullong requests[LD_ROUTE_COUNT][500]; /* by status, 100..599 at [status - 100] */
    atomic_ullong duration_bucket[LD_ROUTE_COUNT][LD_HTTP_BUCKETS];
    atomic_ullong duration_us_sum[LD_ROUTE_COUNT];
    atomic_ullong reports_accepted, reports_repeated, reports_refused;
    atomic_ullong upload_bytes;
    atomic_ullong unavailable;
    atomic_ullong header_timeouts;             /* connections ended by LEAKD_HEADER_TIMEOUT */
    atomic_ullong lingering_closes;            /* answered before their body: drained, then closed */
    atomic_ullong address_refusals;            /* connections over LEAKD_CONNECTIONS_PER_ADDRESS */
    atomic_int workers_alive;
    atomic_ullong worker_restarts;
    ld_worker_metrics *workers;                /* shared; NULL when it could not be made */
    int workers_fd;
} ld_metrics;

/* Makes the shared block; the fd is inherited by spawned workers (LEAKD_METRICS_FD). */
int ld_metrics_init(ld_metrics *m);
/* In a worker: the block its supervisor made (NULL when none). */
ld_worker_metrics *ld_worker_metrics_attach(void);

void ld_metrics_request(ld_metrics *m, ld_route route, unsigned status, double seconds);
typedef enum { LD_ANALYSIS_DONE = 0, LD_ANALYSIS_FAILED = 1, LD_ANALYSIS_RETRIED = 2, LD_ANALYSIS_RELEASED = 3 } ld_analysis_outcome;
void ld_metrics_analysis(ld_worker_metrics *w, ld_analysis_outcome outcome, double seconds);

const char *ld_route_name(ld_route r);

/* A histogram of `n_bounds` upper bounds and +Inf: the bucket `v` counts in. */
int ld_histogram_bucket(const double *bounds, int n_bounds, double v);
/* Its `name`_bucket (cumulative), _sum and _count lines, from per-bucket counts (n_bounds + 1 of
 * them, not cumulative); `labels` is "" or e.g. `route="x"`. */
void ld_histogram_write(FILE *f, const char *name, const char *labels, const double *bounds, int n_bounds,
                        const unsigned long long *counts, double sum);

#endif
