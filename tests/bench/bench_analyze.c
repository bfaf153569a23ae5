/* bench_analyze.c — times the analyzer (public API only) on one dump against a memchr floor.
 *
 * bench_analyze DUMP [--runs N] [--no-retained]
 *
 * Measures, in one process and with the file warm in the page cache: the floor (one memchr
 * scan over the mapped file for bytes that do not occur, after a warm-up scan); pass 1
 * (lw_heap_open); pass 2 (lw_heap_analyze without retained sizes); the peak anonymous memory
 * (RssAnon, sampled every 10 ms by a thread) during open + analyze; then one more analysis
 * with retained sizes. Checks the result against gen_heap's known leak and prints PASS/FAIL.
 * Speed and memory are reported against their targets (OK/OVER) but never fail the run;
 * only a wrong result (or an API error) does: exit 0 PASS, 1 FAIL, 2 usage, 3 API error. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "leakcore.h"

#define LEAK_KEY "b3c8a7e0-0000-4000-8000-000000000001"
#define TARGET_RATIO 25.0                 /* total <= 25 x floor */
#define BUDGET_PER_OBJECT 24.0            /* peak anon <= 24 B/object + 64 MB */
#define BUDGET_FIXED (64.0 * 1024 * 1024)
#define MAX_RUNS 20
#define FLOOR_SCANS 10 /* cheap; the minimum of several tames a noisy machine */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- RssAnon sampler -------------------------------------------------------------------- */

static uint64_t rss_anon_bytes(void) {
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *p = strstr(buf, "RssAnon:");
    if (!p) return 0;
    return strtoull(p + 8, NULL, 10) * 1024; /* "RssAnon:   1234 kB" */
}

typedef struct sampler {
    pthread_t thread;
    atomic_int stop;
    atomic_uint_fast64_t peak;
} sampler;

static void sample(sampler *s) {
    uint64_t v = rss_anon_bytes();
    uint64_t cur = atomic_load(&s->peak);
    while (v > cur && !atomic_compare_exchange_weak(&s->peak, &cur, v)) {
    }
}

static void *sampler_main(void *arg) {
    sampler *s = arg;
    struct timespec ten_ms = {0, 10 * 1000 * 1000};
    while (!atomic_load(&s->stop)) {
        sample(s);
        nanosleep(&ten_ms, NULL);
    }
    return NULL;
}

static int sampler_start(sampler *s) {
    atomic_init(&s->stop, 0);
    atomic_init(&s->peak, 0);
    sample(s);
    return pthread_create(&s->thread, NULL, sampler_main, s) == 0 ? 0 : -1;
}

static uint64_t sampler_stop(sampler *s) {
    sample(s);
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    return atomic_load(&s->peak);
}

/* ---- the floor: one memchr pass ------------------------------------------------------------ */

/* A dump contains every byte value somewhere (ids, hashes, array contents), so no byte is
 * absent from the whole file, and searching for the rarest one restarts memchr at every hit
 * (hundreds of thousands of times on the 10 M dump: ~20 % slower than a clean scan). The
 * warm-up pass therefore notes which byte values each 4 KiB page holds; the file is cut into
 * maximal runs of pages that share an absent value, and the timed pass calls memchr once
 * per run for that value — one clean scan over every byte of the mapped file. Pages holding
 * all 256 values (pure random data, rare) are searched for their rarest value, restarting. */

#define FLOOR_PAGE 4096u

typedef struct floor_window {
    size_t start, len;
    int byte;    /* absent from the window, or its rarest value when `full` */
    int full;    /* the window holds all 256 values */
} floor_window;

typedef struct floor_result {
    double seconds;
    size_t windows, full_pages;
    uint64_t restarts;
} floor_result;

static int lowest_bit(const uint64_t m[4]) {
    for (int w = 0; w < 4; w++)
        if (m[w]) return w * 64 + __builtin_ctzll(m[w]);
    return -1;
}

static uint64_t scan_window(const unsigned char *map, const floor_window *w) {
    const unsigned char *q = map + w->start, *end = q + w->len;
    uint64_t hits = 0;
    while (q < end && (q = memchr(q, w->byte, (size_t)(end - q))) != NULL) {
        hits++;
        q++;
    }
    return hits;
}

static int measure_floor(const char *path, uint64_t *size_out, floor_result *out) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "bench_analyze: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        fprintf(stderr, "bench_analyze: %s: empty or unreadable\n", path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    const unsigned char *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        fprintf(stderr, "bench_analyze: mmap %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t pages = (size + FLOOR_PAGE - 1) / FLOOR_PAGE;
    uint64_t (*present)[4] = calloc(pages, sizeof *present);
    floor_window *win = calloc(pages, sizeof *win);
    if (!present || !win) {
        fprintf(stderr, "bench_analyze: out of memory\n");
        free(present);
        free(win);
        munmap((void *)map, size);
        return -1;
    }
    /* warm-up: reads every byte once (faults the mapping in) and notes the values per page */
    for (size_t pg = 0; pg < pages; pg++) {
        size_t a = pg * FLOOR_PAGE, b = a + FLOOR_PAGE < size ? a + FLOOR_PAGE : size;
        uint64_t m[4] = {0, 0, 0, 0};
        for (size_t i = a; i < b; i++) m[map[i] >> 6] |= 1ull << (map[i] & 63);
        memcpy(present[pg], m, sizeof m);
    }
    size_t nwin = 0;
    for (size_t pg = 0; pg < pages;) {
        uint64_t absent[4];
        for (int k = 0; k < 4; k++) absent[k] = ~present[pg][k];
        floor_window *w = &win[nwin++];
        w->start = pg * FLOOR_PAGE;
        if (lowest_bit(absent) < 0) { /* all 256 values: search for the page's rarest one */
            size_t a = w->start, b = a + FLOOR_PAGE < size ? a + FLOOR_PAGE : size;
            unsigned count[256] = {0};
            for (size_t i = a; i < b; i++) count[map[i]]++;
            int best = 0;
            for (int v = 1; v < 256; v++)
                if (count[v] < count[best]) best = v;
            w->byte = best;
            w->full = 1;
            w->len = b - a;
            out->full_pages++;
            pg++;
            continue;
        }
        size_t end = pg + 1;
        for (; end < pages; end++) {
            uint64_t next[4], any = 0;
            for (int k = 0; k < 4; k++) any |= next[k] = absent[k] & ~present[end][k];
            if (!any) break;
            memcpy(absent, next, sizeof next);
        }
        w->byte = lowest_bit(absent);
        w->full = 0;
        w->len = (end * FLOOR_PAGE < size ? end * FLOOR_PAGE : size) - w->start;
        pg = end;
    }
    free(present);
    out->windows = nwin;
    out->seconds = 1e30;
    for (int r = 0; r < FLOOR_SCANS + 1; r++) { /* the first timed scan is one more warm-up */
        uint64_t hits = 0;
        double t0 = now();
        for (size_t i = 0; i < nwin; i++) hits += scan_window(map, &win[i]);
        double t = now() - t0;
        out->restarts = hits;
        if (r > 0 && t < out->seconds) out->seconds = t;
    }
    free(win);
    munmap((void *)map, size);
    *size_out = size;
    return 0;
}

/* ---- the known leak ----------------------------------------------------------------------- */

static int fail(char *why, size_t cap, const char *msg) {
    snprintf(why, cap, "%s", msg);
    return 0;
}

/* 1 if `r` is exactly gen_heap's leak: STICKY_CLASS LeakRegistry.listeners -> ArrayList
 * .elementData -> Object[][3] -> LeakedScreen with LEAK_KEY; else 0 with the reason. */
static int check_report(const lw_leak_report *r, int with_retained, char *why, size_t cap) {
    char msg[256];
    if (r->leak_count != 1) {
        snprintf(msg, sizeof msg, "%zu leaks, expected exactly 1", r->leak_count);
        return fail(why, cap, msg);
    }
    const lw_leak *l = &r->leaks[0];
    if (l->count != 1) {
        snprintf(msg, sizeof msg, "leak count %" PRIu64 ", expected 1 leaking object", l->count);
        return fail(why, cap, msg);
    }
    if (l->library) return fail(why, cap, "reported as a library leak");
    if (l->trace_count < 1) return fail(why, cap, "leak without a trace");
    const lw_trace *t = &l->traces[0];
    if (!t->gc_root || strcmp(t->gc_root, "STICKY_CLASS") != 0) {
        snprintf(msg, sizeof msg, "GC root %s, expected STICKY_CLASS", t->gc_root ? t->gc_root : "(null)");
        return fail(why, cap, msg);
    }
    static const struct {
        const char *cls;
        lw_object_kind kind;
        lw_ref_kind ref;
        const char *name;
        uint64_t index;
    } want[4] = {
        {"com.example.bench.LeakRegistry", LW_OBJECT_CLASS, LW_REF_STATIC_FIELD, "listeners", 0},
        {"java.util.ArrayList", LW_OBJECT_INSTANCE, LW_REF_INSTANCE_FIELD, "elementData", 0},
        {"java.lang.Object[]", LW_OBJECT_ARRAY, LW_REF_ARRAY_ELEMENT, NULL, 3},
        {"com.example.bench.LeakedScreen", LW_OBJECT_INSTANCE, 0, NULL, 0},
    };
    if (t->element_count != 4) {
        snprintf(msg, sizeof msg, "path of %zu elements, expected 4", t->element_count);
        return fail(why, cap, msg);
    }
    for (size_t i = 0; i < 4; i++) {
        const lw_trace_element *e = &t->elements[i];
        if (!e->class_name || strcmp(e->class_name, want[i].cls) != 0 || e->object_kind != want[i].kind) {
            snprintf(msg, sizeof msg, "element %zu is %s (kind %d), expected %s (kind %d)", i,
                     e->class_name ? e->class_name : "(null)", (int)e->object_kind, want[i].cls, (int)want[i].kind);
            return fail(why, cap, msg);
        }
        if (i == 3) break;
        if (!e->has_reference || e->ref_kind != want[i].ref ||
            (want[i].name && (!e->ref_name || strcmp(e->ref_name, want[i].name) != 0)) ||
            (want[i].ref == LW_REF_ARRAY_ELEMENT && e->ref_index != want[i].index)) {
            snprintf(msg, sizeof msg, "element %zu's reference is kind %d %s [%" PRIu64 "], expected kind %d %s [%" PRIu64 "]",
                     i, (int)e->ref_kind, e->ref_name ? e->ref_name : "-", e->ref_index, (int)want[i].ref,
                     want[i].name ? want[i].name : "-", want[i].index);
            return fail(why, cap, msg);
        }
    }
    const lw_trace_element *leak = &t->elements[3];
    if (leak->leaking != LW_LEAKING_YES) return fail(why, cap, "LeakedScreen is not marked leaking YES");
    if (!leak->key || strcmp(leak->key, LEAK_KEY) != 0) {
        snprintf(msg, sizeof msg, "key %s, expected " LEAK_KEY, leak->key ? leak->key : "(null)");
        return fail(why, cap, msg);
    }
    if (!leak->description || strcmp(leak->description, "LeakedScreen destroyed") != 0)
        return fail(why, cap, "description is not \"LeakedScreen destroyed\"");
    if (with_retained && (leak->retained_bytes <= 0 || leak->retained_objects <= 0))
        return fail(why, cap, "no retained size with compute_retained = 1");
    snprintf(why, cap, "1 leak, key " LEAK_KEY ", STICKY_CLASS LeakRegistry.listeners -> elementData -> [3]");
    return 1;
}

/* ---- main ------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(const double *v, int n) {
    double s[MAX_RUNS];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}
static double minimum(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}
static double mb(double bytes) { return bytes / (1024.0 * 1024.0); }

int main(int argc, char **argv) {
    const char *path = NULL;
    int runs = 1, retained = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--no-retained") == 0) {
            retained = 0;
        } else if (argv[i][0] == '-' || path) {
            path = NULL;
            break;
        } else {
            path = argv[i];
        }
    }
    if (!path || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: bench_analyze DUMP [--runs N (1-%d)] [--no-retained]\n", MAX_RUNS);
        return 2;
    }

    uint64_t file_bytes = 0;
    floor_result fl;
    memset(&fl, 0, sizeof fl);
    if (measure_floor(path, &file_bytes, &fl) != 0) return 3;

    double t_open[MAX_RUNS], t_index[MAX_RUNS], t_paths[MAX_RUNS], t_total[MAX_RUNS];
    uint64_t peak = 0, baseline = rss_anon_bytes();
    lw_heap_summary sum;
    memset(&sum, 0, sizeof sum);
    lw_heap *heap = NULL;
    int pass = 1;
    char why[512] = "";
    char *trace_text = NULL;
    char signature[41] = "";
    lw_error err;
    memset(&err, 0, sizeof err);

    for (int r = 0; r < runs; r++) {
        lw_heap_free(heap);
        heap = NULL;
        sampler s;
        if (sampler_start(&s) != 0) {
            fprintf(stderr, "bench_analyze: cannot start the sampler thread\n");
            return 3;
        }
        lw_heap_options hopts;
        memset(&hopts, 0, sizeof hopts);
        hopts.struct_size = sizeof hopts;
        double t0 = now();
        lw_status st = lw_heap_open(&heap, path, &hopts, &err);
        double t1 = now();
        if (st != LW_OK) {
            sampler_stop(&s);
            fprintf(stderr, "bench_analyze: lw_heap_open: %s: %s\n", lw_strerror(st), err.message);
            return 3;
        }
        lw_analysis_options aopts;
        memset(&aopts, 0, sizeof aopts);
        aopts.struct_size = sizeof aopts;
        lw_leak_report *rep = NULL;
        double t2 = now();
        st = lw_heap_analyze(heap, &aopts, &rep, &err);
        double t3 = now();
        uint64_t p = sampler_stop(&s);
        if (st != LW_OK) {
            fprintf(stderr, "bench_analyze: lw_heap_analyze: %s: %s\n", lw_strerror(st), err.message);
            lw_heap_free(heap);
            return 3;
        }
        lw_heap_get_summary(heap, &sum);
        t_open[r] = t1 - t0;
        t_index[r] = sum.index_seconds;
        t_paths[r] = t3 - t2;
        t_total[r] = t_open[r] + t_paths[r];
        if (p > peak) peak = p;
        if (!check_report(rep, 0, why, sizeof why)) pass = 0;
        if (r == 0 && rep->leak_count > 0) {
            free(trace_text);
            trace_text = lw_trace_to_text(&rep->leaks[0].traces[0]);
            memcpy(signature, rep->leaks[0].signature, sizeof signature);
        }
        fprintf(stderr, "run %d: pass 1 %.3f s, pass 2 %.3f s, peak RssAnon %.1f MB\n", r + 1, t_open[r], t_paths[r],
                mb((double)p));
        lw_leak_report_free(rep);
    }

    /* retained sizes: the full traversal, on the last opened heap */
    double t_ret = -1;
    uint64_t peak_ret = 0;
    int64_t ret_bytes = -1, ret_objects = -1;
    char why_ret[512] = "not measured (--no-retained)";
    int pass_ret = 1;
    if (retained) {
        sampler s;
        if (sampler_start(&s) != 0) return 3;
        lw_analysis_options aopts;
        memset(&aopts, 0, sizeof aopts);
        aopts.struct_size = sizeof aopts;
        aopts.compute_retained = 1;
        lw_leak_report *rep = NULL;
        double t0 = now();
        lw_status st = lw_heap_analyze(heap, &aopts, &rep, &err);
        t_ret = now() - t0;
        peak_ret = sampler_stop(&s);
        if (st != LW_OK) {
            fprintf(stderr, "bench_analyze: lw_heap_analyze (retained): %s: %s\n", lw_strerror(st), err.message);
            lw_heap_free(heap);
            return 3;
        }
        pass_ret = check_report(rep, 1, why_ret, sizeof why_ret);
        if (rep->leak_count > 0 && rep->leaks[0].trace_count > 0 && rep->leaks[0].traces[0].element_count > 0) {
            const lw_trace *t = &rep->leaks[0].traces[0];
            ret_bytes = t->elements[t->element_count - 1].retained_bytes;
            ret_objects = t->elements[t->element_count - 1].retained_objects;
        }
        lw_leak_report_free(rep);
    }
    lw_heap_free(heap);

    uint64_t objects = sum.classes + sum.instances + sum.object_arrays + sum.primitive_arrays;
    double objs = objects ? (double)objects : 1.0;
    double open_med = median(t_open, runs), paths_med = median(t_paths, runs), total_med = median(t_total, runs);
    double ratio = total_med / fl.seconds;
    double budget = BUDGET_PER_OBJECT * objs + BUDGET_FIXED;

    printf("Leakwatch analyzer benchmark (libleakcore %s)\n", lw_core_version());
    printf("  dump            %s\n", path);
    printf("  file            %.1f MB (%" PRIu64 " bytes), %s, %u-byte ids\n", mb((double)file_bytes), file_bytes,
           sum.hprof_version, sum.id_size);
    printf("  objects         %" PRIu64 " (classes %" PRIu64 ", instances %" PRIu64 ", object arrays %" PRIu64
           ", primitive arrays %" PRIu64 "), GC roots %" PRIu64 "\n",
           objects, sum.classes, sum.instances, sum.object_arrays, sum.primitive_arrays, sum.gc_roots);
    printf("  runs            %d (times are the median%s)\n\n", runs, runs > 1 ? "; min in brackets" : "");
    printf("  %-28s %10s   %s\n", "figure", "value", "note");
    printf("  %-28s %10.3f s  %.2f GB/s (min of %d; %zu memchr calls for absent bytes, %zu pages with all 256 values, %" PRIu64 " restarts)\n",
           "floor: memchr scan", fl.seconds, (double)file_bytes / fl.seconds / 1e9, FLOOR_SCANS, fl.windows, fl.full_pages,
           fl.restarts);
    printf("  %-28s %10.3f s  [%.3f]; the library's own index_seconds %.3f\n", "pass 1: lw_heap_open", open_med,
           minimum(t_open, runs), median(t_index, runs));
    printf("  %-28s %10.3f s  [%.3f]; shortest paths, no retained size\n", "pass 2: lw_heap_analyze", paths_med,
           minimum(t_paths, runs));
    printf("  %-28s %10.3f s  [%.3f]; %.2f GB/s of dump\n", "total = pass 1 + pass 2", total_med,
           minimum(t_total, runs), (double)file_bytes / total_med / 1e9);
    printf("  %-28s %10.1f x  target <= %.0f x floor: %s\n", "total / floor", ratio, TARGET_RATIO,
           ratio <= TARGET_RATIO ? "OK" : "OVER");
    printf("  %-28s %10.1f MB  %.1f B/object\n", "index memory (summary)", mb((double)sum.index_bytes),
           (double)sum.index_bytes / objs);
    printf("  %-28s %10.1f MB  %.1f B/object (baseline before open %.1f MB); budget %.1f MB = 24 B/object + 64 MB: %s\n",
           "peak RssAnon, open+analyze", mb((double)peak), (double)peak / objs, mb((double)baseline), mb(budget),
           (double)peak <= budget ? "OK" : "OVER");
    if (retained) {
        printf("  %-28s %10.3f s  +%.3f s over pass 2; peak RssAnon %.1f MB; LeakedScreen retains %" PRId64
               " bytes in %" PRId64 " objects\n",
               "pass 2 with retained size", t_ret, t_ret - paths_med, mb((double)peak_ret), ret_bytes, ret_objects);
    }
    printf("\n");
    if (trace_text) {
        printf("%s\n", trace_text);
        printf("signature %s\n\n", signature);
        free(trace_text);
    }
    printf("result          %s: %s\n", pass ? "PASS" : "FAIL", why);
    if (retained) printf("result retained %s: %s\n", pass_ret ? "PASS" : "FAIL", why_ret);
    return pass && pass_ret ? 0 : 1;
}
