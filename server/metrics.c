/* metrics.c — counters and fixed-bucket histograms, rendered as Prometheus text. */
#define _GNU_SOURCE
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const double http_bounds[LD_HTTP_BUCKETS - 1] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const double analysis_bounds[LD_ANALYSIS_BUCKETS - 1] = {0.5, 1, 2.5, 5, 10, 30, 60, 120, 600};

const char *ld_route_name(ld_route r) {
    static const char *const names[LD_ROUTE_COUNT] = {"upload", "report", "leaks", "leak", "leak_patch", "version_leaks",
                                                      "healthz", "readyz", "options", "other"};
    return r < LD_ROUTE_COUNT ? names[r] : "other";
}

int ld_metrics_init(ld_metrics *m) {
    m->workers_fd = -1;
    int fd = memfd_create("leakd-metrics", 0); /* no CLOEXEC: the workers inherit it */
    if (fd < 0 || ftruncate(fd, sizeof(ld_worker_metrics)) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    void *p = mmap(NULL, sizeof(ld_worker_metrics), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    m->workers = p;
    m->workers_fd = fd;
    char v[16];
    snprintf(v, sizeof v, "%d", fd);
    setenv("LEAKD_METRICS_FD", v, 1);
    return 0;
}

ld_worker_metrics *ld_worker_metrics_attach(void) {
    const char *v = getenv("LEAKD_METRICS_FD");
    if (!v) return NULL;
    int fd = atoi(v);
    void *p = mmap(NULL, sizeof(ld_worker_metrics), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

void ld_metrics_request(ld_metrics *m, ld_route route, unsigned status, double seconds) {
    if (route >= LD_ROUTE_COUNT) route = LD_ROUTE_OTHER;
    if (status >= 100 && status <= 599) atomic_fetch_add(&m->requests[route][status - 100], 1);
    atomic_fetch_add(&m->duration_bucket[route][ld_histogram_bucket(http_bounds, LD_HTTP_BUCKETS - 1, seconds)], 1);
    atomic_fetch_add(&m->duration_us_sum[route], (unsigned long long)(seconds * 1e6));
}

void ld_metrics_analysis(ld_worker_metrics *w, ld_analysis_outcome outcome, double seconds) {
    if (!w) return;
    atomic_fetch_add(&w->analyses[outcome], 1);
    if (outcome != LD_ANALYSIS_DONE) return;
    atomic_fetch_add(&w->analysis_bucket[ld_histogram_bucket(analysis_bounds, LD_ANALYSIS_BUCKETS - 1, seconds)], 1);
    atomic_fetch_add(&w->analysis_ms_sum, (unsigned long long)(seconds * 1e3));
}

int ld_histogram_bucket(const double *bounds, int n_bounds, double v) {
    int b = 0;
    while (b < n_bounds && v > bounds[b]) b++;
    return b;
}

void ld_histogram_write(FILE *f, const char *name, const char *labels, const double *bounds, int n_bounds,
                        const unsigned long long *counts, double sum) {
    const char *sep = labels[0] ? "," : "";
    unsigned long long cum = 0;
    for (int b = 0; b <= n_bounds; b++) {
        cum += counts[b];
        if (b < n_bounds) fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[b], cum);
        else fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, cum);
    }
    if (labels[0]) {
        fprintf(f, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels, sum, name, labels, cum);
    } else {
        fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, sum, name, cum);
    }
}

/* Appends the metrics of this module to `f`. */
void ld_metrics_write(FILE *f, ld_metrics *m);
void ld_metrics_write(FILE *f, ld_metrics *m) {
    /* by the status itself: a 401 storm (a revoked key in the field), 413s (an SDK's cap above
     * the server's) and 429s (a quota too low) are different nights */
    fprintf(f, "# HELP leakd_http_requests_total HTTP requests answered, by route and status.\n"
               "# TYPE leakd_http_requests_total counter\n");
    for (int r = 0; r < LD_ROUTE_COUNT; r++)
        for (int c = 0; c < 500; c++) {
            unsigned long long v = atomic_load(&m->requests[r][c]);
            if (v) fprintf(f, "leakd_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n", ld_route_name((ld_route)r), c + 100, v);
        }
    fprintf(f, "# HELP leakd_http_request_duration_seconds Time from the request's first byte to its answer.\n"
               "# TYPE leakd_http_request_duration_seconds histogram\n");
    for (int r = 0; r < LD_ROUTE_COUNT; r++) {
        unsigned long long counts[LD_HTTP_BUCKETS], total = 0;
        for (int b = 0; b < LD_HTTP_BUCKETS; b++) total += counts[b] = atomic_load(&m->duration_bucket[r][b]);
        if (!total) continue;
        char labels[64];
        snprintf(labels, sizeof labels, "route=\"%s\"", ld_route_name((ld_route)r));
        ld_histogram_write(f, "leakd_http_request_duration_seconds", labels, http_bounds, LD_HTTP_BUCKETS - 1, counts,
                           (double)atomic_load(&m->duration_us_sum[r]) / 1e6);
    }
    fprintf(f, "# HELP leakd_worker_restarts_total Analysis workers that died and were started again.\n"
               "# TYPE leakd_worker_restarts_total counter\nleakd_worker_restarts_total %llu\n",
            (unsigned long long)atomic_load(&m->worker_restarts));
    ld_worker_metrics *w = m->workers;
    if (!w) return;
    static const char *const outcomes[4] = {"done", "failed", "retried", "released"};
    fprintf(f, "# HELP leakd_analyses_total Analyses finished by the workers, by outcome.\n# TYPE leakd_analyses_total counter\n");
    for (int o = 0; o < 4; o++)
        fprintf(f, "leakd_analyses_total{outcome=\"%s\"} %llu\n", outcomes[o], (unsigned long long)atomic_load(&w->analyses[o]));
    fprintf(f, "# HELP leakd_analysis_duration_seconds Successful analyses, from claim to result.\n"
               "# TYPE leakd_analysis_duration_seconds histogram\n");
    unsigned long long counts[LD_ANALYSIS_BUCKETS];
    for (int b = 0; b < LD_ANALYSIS_BUCKETS; b++) counts[b] = atomic_load(&w->analysis_bucket[b]);
    ld_histogram_write(f, "leakd_analysis_duration_seconds", "", analysis_bounds, LD_ANALYSIS_BUCKETS - 1, counts,
                       (double)atomic_load(&w->analysis_ms_sum) / 1e3);
}
