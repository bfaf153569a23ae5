/* bench_sdk.c — what libleakwatch costs, with the REAL SDK (leakwatch.h) and the REAL trimmer
 * (leakcore.h), on a dump from gen_sdk_heap. Prints "figure: value" lines that run.py reads.
 *
 * bench_sdk DUMP.hprof WORKDIR [--watch-calls N] [--leakscan PATH] [--no-pipeline]
 *
 *  1. watch: N lw_watch calls on a client with a fake runtime adapter (nothing is checked:
 *     retained_delay_ms is an hour) -> mean and p50/p99 µs per call.
 *  2. trim: lw_trim_file(DUMP, WORKDIR/trimmed.hprof.zst, zstd level 3) on this thread (one
 *     core) -> MB/s of raw input; lw_zstd_compress_file(DUMP, WORKDIR/raw.hprof.zst, 3), the
 *     plain zstd-3 of the raw dump in the same run -> the size ratio. Both after a warm-up read.
 *  3. pipeline: a client whose fake adapter keeps one object retained and "dumps" by linking
 *     DUMP into the spool (background: one retained object triggers) -> the time from
 *     mark_retained to on_report ("report spooled"), in heap mode, and in traces mode with
 *     --leakscan. Speed never fails it; exit 1 only when an SDK call fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "leakcore.h"
#include "leakwatch.h"

static double now_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static double mono(void) { return now_s(CLOCK_MONOTONIC); }

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void warm(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    static char buf[1 << 20];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
}

/* ---- the fake runtime adapter ---------------------------------------------------------- */

typedef struct fake {
    const char *dump_src;
    int retained;               /* is_reclaimed answers 0 */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double t_retained, t_dump_start, t_dump_end, t_spooled;
    double gc_s;                /* time inside run_gc */
    unsigned gcs;
    char report_id[37];
    int verbose;
} fake;

static int f_is_reclaimed(void *ctx, lw_handle h) {
    (void)h;
    return ((fake *)ctx)->retained ? 0 : 1;
}
static int f_run_gc(void *ctx) {
    fake *f = ctx;
    double t = mono();
    f->gc_s += mono() - t;
    f->gcs++;
    return 0;
}
static void f_mark_retained(void *ctx, lw_handle h, int64_t uptime_ms) {
    (void)h;
    (void)uptime_ms;
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    if (f->t_retained == 0) f->t_retained = mono();
    pthread_mutex_unlock(&f->mu);
}
static int f_dump_heap(void *ctx, const char *path, int forked, char *err, size_t cap) {
    (void)forked;
    fake *f = ctx;
    f->t_dump_start = mono();
    unlink(path);
    if (link(f->dump_src, path) != 0) {
        /* another file system: copy */
        int in = open(f->dump_src, O_RDONLY), out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ssize_t n = 1;
        while (in >= 0 && out >= 0 && (n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0)) > 0) {
        }
        if (in >= 0) close(in);
        if (out >= 0) close(out);
        if (in < 0 || out < 0 || n < 0) {
            snprintf(err, cap, "cannot copy %s to %s: %s", f->dump_src, path, strerror(errno));
            return -1;
        }
    }
    f->t_dump_end = mono();
    return 0;
}
static int f_heap_usage(void *ctx, uint64_t *used, uint64_t *max) {
    fake *f = ctx;
    *used = file_size(f->dump_src) / 2;
    *max = *used * 2;
    return 0;
}
static void f_on_report(void *user, const char *report_id, const char *spool_path) {
    (void)spool_path;
    fake *f = user;
    pthread_mutex_lock(&f->mu);
    f->t_spooled = mono();
    snprintf(f->report_id, sizeof f->report_id, "%s", report_id);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}
static void f_log(void *user, int level, const char *msg) {
    fake *f = user;
    if (level >= LW_LOG_WARN || f->verbose) fprintf(stderr, "  [sdk] %s\n", msg);
}

static lw_runtime fake_runtime(fake *f) {
    lw_runtime rt = {
        .struct_size = sizeof rt,
        .ctx = f,
        .is_reclaimed = f_is_reclaimed,
        .run_gc = f_run_gc,
        .mark_retained = f_mark_retained,
        .dump_heap = f_dump_heap,
        .can_fork = 0,
        .heap_usage = f_heap_usage,
    };
    return rt;
}

/* ---- 1. lw_watch ------------------------------------------------------------------------ */

static int bench_watch(const char *workdir, unsigned calls) {
    fake f = {.retained = 1, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char spool[4096];
    snprintf(spool, sizeof spool, "%s/spool-watch", workdir);
    lw_runtime rt = fake_runtime(&f);
    lw_config cfg = {
        .struct_size = sizeof cfg,
        .app = "bench",
        .spool_dir = spool,
        .retained_delay_ms = 3600000,
        .max_watched = calls + 16,
        .log = f_log,
        .log_user = &f,
    };
    lw_client *c = NULL;
    char err[512];
    if (lw_client_new(&c, &cfg, &rt, err, sizeof err) != LW_SDK_OK) {
        fprintf(stderr, "bench_sdk: lw_client_new: %s\n", err);
        return -1;
    }
    double *t = malloc(calls * sizeof *t);
    if (!t) return -1;
    char key[37];
    for (unsigned i = 0; i < 1000 && i < calls / 10; i++) { /* warm-up, not timed */
        if (lw_watch(c, (lw_handle)(0x100000 + i), "bench.Screen destroyed", key) != LW_SDK_OK) return -1;
    }
    unsigned done = 0;
    double t0 = mono();
    for (unsigned i = 0; i < calls - calls / 10 - 16 && i < calls; i++) {
        double a = mono();
        lw_sdk_status st = lw_watch(c, (lw_handle)(0x200000 + i), "bench.Screen destroyed", key);
        t[done++] = mono() - a;
        if (st != LW_SDK_OK) {
            fprintf(stderr, "bench_sdk: lw_watch: %s\n", lw_sdk_strerror(st));
            return -1;
        }
    }
    double total = mono() - t0;
    qsort(t, done, sizeof *t, cmp_d);
    printf("watch_calls: %u\n", done);
    printf("watch_us_mean: %.3f\n", total / done * 1e6);
    printf("watch_us_p50: %.3f\n", t[done / 2] * 1e6);
    printf("watch_us_p99: %.3f\n", t[(size_t)(done * 0.99)] * 1e6);
    free(t);
    lw_client_free(c, 0);
    return 0;
}

/* ---- 2. trim + zstd vs plain zstd --------------------------------------------------------- */

static int bench_trim(const char *dump, const char *workdir) {
    char trimmed[4096], plain[4096];
    snprintf(trimmed, sizeof trimmed, "%s/trimmed.hprof.zst", workdir);
    snprintf(plain, sizeof plain, "%s/raw.hprof.zst", workdir);
    uint64_t in = file_size(dump);
    warm(dump);
    lw_trim_options o = {.struct_size = sizeof o, .compression_level = 3, .compress = 1};
    lw_trim_stats st;
    lw_error err;
    double w0 = mono(), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    if (lw_trim_file(dump, trimmed, &o, &st, &err) != LW_OK) {
        fprintf(stderr, "bench_sdk: lw_trim_file: %s\n", err.message);
        return -1;
    }
    double tw = mono() - w0, tc = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    warm(dump);
    double p0 = mono(), pc0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    if (lw_zstd_compress_file(dump, plain, 3, &err) != LW_OK) {
        fprintf(stderr, "bench_sdk: lw_zstd_compress_file: %s\n", err.message);
        return -1;
    }
    double pw = mono() - p0, pc = now_s(CLOCK_THREAD_CPUTIME_ID) - pc0;
    uint64_t tsz = file_size(trimmed), psz = file_size(plain);
    printf("raw_bytes: %" PRIu64 "\n", in);
    printf("trim_seconds: %.3f\n", tw);
    printf("trim_cpu_seconds: %.3f\n", tc);
    printf("trim_mb_s: %.1f\n", (double)in / 1e6 / tw);
    printf("trimmed_zst_bytes: %" PRIu64 "\n", tsz);
    printf("trim_arrays: %" PRIu64 " primitive arrays, %" PRIu64 " kept, %" PRIu64 " bytes zeroed\n",
           st.primitive_arrays, st.primitive_arrays_kept, st.bytes_zeroed);
    printf("plain_zstd3_seconds: %.3f\n", pw);
    printf("plain_zstd3_cpu_seconds: %.3f\n", pc);
    printf("plain_zstd3_mb_s: %.1f\n", (double)in / 1e6 / pw);
    printf("plain_zstd3_bytes: %" PRIu64 "\n", psz);
    printf("trimmed_vs_plain: %.4f\n", psz ? (double)tsz / (double)psz : 0);
    printf("trimmed_path: %s\n", trimmed);
    return 0;
}

/* ---- 3. retained -> report spooled --------------------------------------------------------- */

static int bench_pipeline(const char *dump, const char *workdir, const char *leakscan) {
    fake f = {.dump_src = dump, .retained = 1, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char spool[4096];
    snprintf(spool, sizeof spool, "%s/spool-%s", workdir, leakscan ? "traces" : "heap");
    lw_runtime rt = fake_runtime(&f);
    lw_config cfg = {
        .struct_size = sizeof cfg,
        .app = "bench",
        .mode = leakscan ? LW_MODE_TRACES : LW_MODE_HEAP,
        .analyzer_path = leakscan,
        .spool_dir = spool,
        .retained_delay_ms = 100,
        .on_report = f_on_report,
        .on_report_user = &f,
        .log = f_log,
        .log_user = &f,
    };
    lw_client *c = NULL;
    char err[512];
    if (lw_client_new(&c, &cfg, &rt, err, sizeof err) != LW_SDK_OK) {
        fprintf(stderr, "bench_sdk: lw_client_new: %s\n", err);
        return -1;
    }
    lw_set_visible(c, 0); /* background: one retained object is enough */
    if (lw_watch(c, (lw_handle)0x1234, "bench.Screen destroyed", NULL) != LW_SDK_OK) return -1;
    pthread_mutex_lock(&f.mu);
    double deadline = mono() + 900;
    while (f.t_spooled == 0 && mono() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&f.cv, &f.mu, &ts);
    }
    pthread_mutex_unlock(&f.mu);
    const char *m = leakscan ? "traces" : "heap";
    if (f.t_spooled == 0 || f.t_retained == 0) {
        fprintf(stderr, "bench_sdk: %s mode: no report spooled\n", m);
        lw_client_free(c, 0);
        return -1;
    }
    lw_client_stats s;
    lw_client_get_stats(c, &s);
    printf("pipeline_%s_retained_to_spooled_s: %.3f\n", m, f.t_spooled - f.t_retained);
    printf("pipeline_%s_retained_to_dump_start_s: %.3f\n", m, f.t_dump_start - f.t_retained);
    printf("pipeline_%s_dump_s: %.3f\n", m, f.t_dump_end - f.t_dump_start);
    printf("pipeline_%s_process_s: %.3f\n", m, f.t_spooled - f.t_dump_end);
    printf("pipeline_%s_pause_ms: %" PRId64 "\n", m, s.last_dump_pause_ms);
    printf("pipeline_%s_gc_rounds: %u\n", m, f.gcs);
    printf("pipeline_%s_report: %s\n", m, f.report_id);
    lw_client_free(c, 0);
    return 0;
}

int main(int argc, char **argv) {
    const char *dump = NULL, *workdir = NULL, *leakscan = NULL;
    unsigned calls = 200000;
    int pipeline = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--watch-calls") == 0 && i + 1 < argc) calls = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--leakscan") == 0 && i + 1 < argc) leakscan = argv[++i];
        else if (strcmp(argv[i], "--no-pipeline") == 0) pipeline = 0;
        else if (!dump) dump = argv[i];
        else if (!workdir) workdir = argv[i];
        else dump = NULL, i = argc;
    }
    if (!dump || !workdir || calls < 1000) {
        fprintf(stderr, "usage: bench_sdk DUMP.hprof WORKDIR [--watch-calls N>=1000] [--leakscan PATH] [--no-pipeline]\n");
        return 2;
    }
    mkdir(workdir, 0700);
    sync(); /* the freshly generated dump's dirty pages must not land in the trimmer's fsync */
    printf("sdk_version: %s\n", lw_sdk_version());
    fflush(stdout);
    if (bench_watch(workdir, calls) != 0) return 1;
    fflush(stdout);
    if (bench_trim(dump, workdir) != 0) return 1;
    fflush(stdout);
    if (pipeline) {
        if (bench_pipeline(dump, workdir, NULL) != 0) return 1;
        fflush(stdout);
        if (leakscan && bench_pipeline(dump, workdir, leakscan) != 0) return 1;
    }
    return 0;
}
