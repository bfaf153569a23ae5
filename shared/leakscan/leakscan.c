/* leakscan — analyze, inspect and trim HPROF heap dumps from the command line.
 * Uses only libleakcore's public API (leakcore.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "leakcore.h"

enum { EXIT_NO_LEAK = 0, EXIT_LEAKS = 1, EXIT_USAGE = 2, EXIT_BAD_INPUT = 3, EXIT_IO = 4 };

static const char *usage_main =
    "usage: leakscan <command> [options]\n"
    "\n"
    "Find memory leaks in Java heap dumps (HPROF from HotSpot or Android, plain or .zst).\n"
    "\n"
    "commands:\n"
    "  analyze FILE[.zst]   print the leak traces (LeakCanary layout) or their JSON\n"
    "  info FILE[.zst]      header, record counts, class histogram, index memory\n"
    "  strip IN OUT[.zst]   write a trimmed copy without user data (compressed if OUT ends in .zst)\n"
    "  help [COMMAND]       this text, or a command's\n"
    "\n"
    "options for every command: --help, --version\n"
    "\n"
    "exit codes: 0 no leak found (or success), 1 leaks found, 2 usage error,\n"
    "            3 bad input (corrupt or truncated file), 4 I/O error or out of memory\n"
    "            (also: over --memory-budget)\n";

static const char *usage_analyze =
    "usage: leakscan analyze FILE[.zst] [--json] [--pretty] [--key UUID] [--retained] [--quiet]\n"
    "                        [--memory-budget BYTES]\n"
    "\n"
    "Finds the objects watched by a KeyedWeakReference (LeakCanary 1 and 2, Leakwatch) that were\n"
    "retained, and prints the shortest strong path from a GC root to each, grouped by signature.\n"
    "\n"
    "  --json       print the trace JSON (format 1, docs/trace-json.md) instead of text\n"
    "  --pretty     indent the JSON\n"
    "  --key UUID   only the object watched with this key (retained or not)\n"
    "  --retained   also compute retained bytes and objects per leaking object (slower)\n"
    "  --quiet      no progress on stderr (progress is shown only when stderr is a terminal)\n"
    "  --memory-budget BYTES\n"
    "               fail (exit 4) rather than hold more than BYTES of memory for the index and\n"
    "               the analysis (the dump itself is mapped, not counted); 0 = no budget\n"
    "\n"
    "exit: 0 no leak, 1 leaks found, 2 usage error or unknown key, 3 bad input,\n"
    "      4 I/O error or out of memory (over --memory-budget)\n";

static const char *usage_info =
    "usage: leakscan info FILE[.zst] [--top N] [--memory-budget BYTES]\n"
    "\n"
    "Prints the dump's header, record counts, the N classes with the most instances and the N\n"
    "with the largest shallow size (default 20), the memory the index takes, and the most memory\n"
    "held at once (what --memory-budget counts; analyze needs more).\n"
    "\n"
    "  --memory-budget BYTES  fail (exit 4) rather than hold more than BYTES; 0 = no budget\n";

static const char *usage_strip =
    "usage: leakscan strip IN OUT[.zst] [--level N]\n"
    "\n"
    "Writes a copy of IN in which every primitive array that analysis does not read keeps its\n"
    "length but has its contents zeroed: the result is a valid HPROF that analyzes to the same\n"
    "traces and ships no user strings. OUT ending in .zst is compressed with zstd (--level,\n"
    "default 3). Prints the output size as a fraction of the input.\n";

static int exit_for(lw_status st) {
    switch (st) {
    case LW_OK: return EXIT_NO_LEAK;
    case LW_ERR_USAGE: case LW_ERR_NOT_FOUND: return EXIT_USAGE;
    case LW_ERR_FORMAT: case LW_ERR_LIMIT: return EXIT_BAD_INPUT;
    default: return EXIT_IO; /* LW_ERR_IO, LW_ERR_NOMEM, LW_ERR_BUDGET */
    }
}

static int fail(const char *cmd, lw_status st, const lw_error *err) {
    fprintf(stderr, "leakscan %s: %s\n", cmd, err->message[0] ? err->message : lw_strerror(st));
    return exit_for(st);
}

static int usage_error(const char *usage, const char *fmt, const char *arg) {
    fprintf(stderr, "leakscan: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n\n%s", usage);
    return EXIT_USAGE;
}

/* A byte count: digits only (no sign, no suffix). 0 on success. */
static int parse_bytes(const char *s, uint64_t *out) {
    if (*s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* --memory-budget BYTES or --memory-budget=BYTES at argv[*i]: 1 when it is that option (its
 * value parsed into *budget, *i moved past it), 0 when it is another argument, -1 (after the
 * usage message) when its value is missing or not a byte count. */
static int memory_budget_option(int argc, char **argv, int *i, const char *usage, uint64_t *budget, int *rc) {
    static const char name[] = "--memory-budget";
    const char *a = argv[*i], *v;
    if (strcmp(a, name) == 0) {
        if (*i + 1 >= argc) {
            *rc = usage_error(usage, "%s needs a value", a);
            return -1;
        }
        v = argv[++*i];
    } else if (strncmp(a, name, sizeof name - 1) == 0 && a[sizeof name - 1] == '=') {
        v = a + sizeof name;
    } else {
        return 0;
    }
    if (parse_bytes(v, budget) != 0) {
        *rc = usage_error(usage, "--memory-budget takes a number of bytes, not %s", v);
        return -1;
    }
    return 1;
}

typedef struct {
    int on;
    struct timespec last;
} progress_state;

static void show_progress(void *user, const char *phase, uint64_t done, uint64_t total) {
    progress_state *p = user;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double since = (double)(now.tv_sec - p->last.tv_sec) + (double)(now.tv_nsec - p->last.tv_nsec) / 1e9;
    int finished = total && done >= total;
    if (!finished && since < 0.2) return;
    p->last = now;
    if (strcmp(phase, "index") == 0)
        fprintf(stderr, "\rindexing: %llu / %llu MB   ", (unsigned long long)(done / 2 >> 20), (unsigned long long)(total / 2 >> 20));
    else if (strcmp(phase, "paths") == 0)
        fprintf(stderr, "\rfinding paths: %llu objects visited   ", (unsigned long long)done);
    else
        fprintf(stderr, "\r%s: %llu / %llu MB   ", phase, (unsigned long long)(done >> 20), (unsigned long long)(total >> 20));
    if (finished) fprintf(stderr, "\n");
    fflush(stderr);
}

static int cmd_analyze(int argc, char **argv) {
    const char *file = NULL, *key = NULL;
    int json = 0, pretty = 0, retained = 0, quiet = 0, rc = 0;
    uint64_t budget = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int m = memory_budget_option(argc, argv, &i, usage_analyze, &budget, &rc);
        if (m < 0) return rc;
        if (m > 0) continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_analyze, stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) json = 1;
        else if (strcmp(a, "--pretty") == 0) pretty = json = 1;
        else if (strcmp(a, "--retained") == 0) retained = 1;
        else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) quiet = 1;
        else if (strcmp(a, "--key") == 0) {
            if (i + 1 >= argc) return usage_error(usage_analyze, "%s needs a value", a);
            key = argv[++i];
        } else if (strncmp(a, "--key=", 6) == 0) key = a + 6;
        else if (a[0] == '-' && a[1]) return usage_error(usage_analyze, "unknown option %s", a);
        else if (!file) file = a;
        else return usage_error(usage_analyze, "unexpected argument %s", a);
    }
    if (!file) return usage_error(usage_analyze, "%s", "analyze needs a FILE");
    progress_state ps = {!quiet && isatty(STDERR_FILENO), {0, 0}};
    lw_heap_options ho = {.struct_size = sizeof ho, .progress = ps.on ? show_progress : NULL, .progress_user = &ps,
                          .memory_budget = budget};
    lw_error err = {0};
    lw_heap *heap = NULL;
    lw_status st = lw_heap_open(&heap, file, &ho, &err);
    if (st != LW_OK) return fail("analyze", st, &err);
    lw_analysis_options ao = {sizeof ao, key, retained, ps.on ? show_progress : NULL, &ps};
    lw_leak_report *report = NULL;
    st = lw_heap_analyze(heap, &ao, &report, &err);
    if (st != LW_OK) {
        lw_heap_free(heap);
        return fail("analyze", st, &err);
    }
    char *out = json ? lw_leak_report_to_json(report, pretty) : lw_leak_report_to_text(report);
    rc = report->leak_count ? EXIT_LEAKS : EXIT_NO_LEAK;
    if (!out) {
        fprintf(stderr, "leakscan analyze: out of memory rendering the result\n");
        rc = EXIT_IO;
    } else {
        fputs(out, stdout);
        if (json) fputc('\n', stdout);
        free(out);
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "leakscan analyze: writing the result failed: %s\n", strerror(errno));
        rc = EXIT_IO;
    }
    lw_leak_report_free(report);
    lw_heap_free(heap);
    return rc;
}

static int cmd_info(int argc, char **argv) {
    const char *file = NULL;
    long top = 20;
    uint64_t budget = 0;
    int rc = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int m = memory_budget_option(argc, argv, &i, usage_info, &budget, &rc);
        if (m < 0) return rc;
        if (m > 0) continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_info, stdout);
            return 0;
        } else if (strcmp(a, "--top") == 0) {
            if (i + 1 >= argc) return usage_error(usage_info, "%s needs a value", a);
            char *end;
            top = strtol(argv[++i], &end, 10);
            if (*end || top < 1 || top > 100000) return usage_error(usage_info, "--top takes a number from 1 to 100000, not %s", argv[i]);
        } else if (a[0] == '-' && a[1]) return usage_error(usage_info, "unknown option %s", a);
        else if (!file) file = a;
        else return usage_error(usage_info, "unexpected argument %s", a);
    }
    if (!file) return usage_error(usage_info, "%s", "info needs a FILE");
    progress_state ps = {isatty(STDERR_FILENO), {0, 0}};
    lw_heap_options ho = {.struct_size = sizeof ho, .progress = ps.on ? show_progress : NULL, .progress_user = &ps,
                          .memory_budget = budget};
    lw_error err = {0};
    lw_heap *heap = NULL;
    lw_status st = lw_heap_open(&heap, file, &ho, &err);
    if (st != LW_OK) return fail("info", st, &err);
    lw_heap_summary s;
    lw_heap_get_summary(heap, &s);
    uint64_t objects = s.classes + s.instances + s.object_arrays + s.primitive_arrays;
    printf("file:               %s (%llu bytes)\n", file, (unsigned long long)s.file_bytes);
    printf("format:             %s, %u-byte identifiers\n", s.hprof_version, s.id_size);
    time_t ts = (time_t)(s.timestamp_ms / 1000);
    struct tm tm;
    char when[64] = "?";
    if (gmtime_r(&ts, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("dumped at:          %s\n", when);
    printf("records:            %llu top-level, %llu heap-dump segments\n", (unsigned long long)s.records,
           (unsigned long long)s.heap_dump_segments);
    printf("strings:            %llu\n", (unsigned long long)s.strings);
    printf("classes:            %llu (%llu LOAD_CLASS)\n", (unsigned long long)s.classes, (unsigned long long)s.load_classes);
    printf("instances:          %llu\n", (unsigned long long)s.instances);
    printf("object arrays:      %llu\n", (unsigned long long)s.object_arrays);
    printf("primitive arrays:   %llu\n", (unsigned long long)s.primitive_arrays);
    printf("objects in all:     %llu\n", (unsigned long long)objects);
    printf("GC roots:           %llu\n", (unsigned long long)s.gc_roots);
    printf("stack traces:       %llu (%llu frames)\n", (unsigned long long)s.stack_traces, (unsigned long long)s.stack_frames);
    printf("index memory:       %llu bytes (%.1f bytes per object)\n", (unsigned long long)s.index_bytes,
           objects ? (double)s.index_bytes / (double)objects : 0.0);
    printf("index time:         %.3f s\n", s.index_seconds);
    lw_class_stat *stats = calloc((size_t)top, sizeof *stats);
    if (!stats) {
        lw_heap_free(heap);
        fprintf(stderr, "leakscan info: out of memory\n");
        return EXIT_IO;
    }
    for (int by_bytes = 0; by_bytes < 2; by_bytes++) {
        err.status = LW_OK;
        size_t n = lw_heap_class_histogram(heap, by_bytes, stats, (size_t)top, &err);
        if (n == 0 && err.status != LW_OK) {
            free(stats);
            lw_heap_free(heap);
            return fail("info", err.status, &err);
        }
        printf("\ntop %zu classes by %s:\n", n, by_bytes ? "shallow size" : "instance count");
        printf("  %12s  %14s  %s\n", "instances", "shallow bytes", "class");
        for (size_t i = 0; i < n; i++)
            printf("  %12llu  %14llu  %s\n", (unsigned long long)stats[i].instances, (unsigned long long)stats[i].shallow_bytes,
                   stats[i].class_name);
    }
    free(stats);
    printf("\nmemory peak:        %llu bytes (index and histogram; what --memory-budget counts)\n",
           (unsigned long long)lw_heap_memory_peak(heap));
    lw_heap_free(heap);
    return 0;
}

static int cmd_strip(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    long level = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_strip, stdout);
            return 0;
        } else if (strcmp(a, "--level") == 0) {
            if (i + 1 >= argc) return usage_error(usage_strip, "%s needs a value", a);
            char *end;
            level = strtol(argv[++i], &end, 10);
            if (*end || level < 1 || level > 19) return usage_error(usage_strip, "--level takes 1 to 19, not %s", argv[i]);
        } else if (a[0] == '-' && a[1]) return usage_error(usage_strip, "unknown option %s", a);
        else if (!in) in = a;
        else if (!out) out = a;
        else return usage_error(usage_strip, "unexpected argument %s", a);
    }
    if (!in || !out) return usage_error(usage_strip, "%s", "strip needs IN and OUT");
    progress_state ps = {isatty(STDERR_FILENO), {0, 0}};
    lw_trim_options o = {sizeof o, (int)level, 0, ps.on ? show_progress : NULL, &ps};
    lw_trim_stats s;
    lw_error err = {0};
    lw_status st = lw_trim_file(in, out, &o, &s, &err);
    if (st != LW_OK) return fail("strip", st, &err);
    printf("%s: %llu bytes -> %s: %llu bytes (%.2f%% of the input)\n", in, (unsigned long long)s.in_bytes, out,
           (unsigned long long)s.out_bytes, s.in_bytes ? 100.0 * (double)s.out_bytes / (double)s.in_bytes : 0.0);
    printf("primitive arrays: %llu, kept %llu, %llu bytes zeroed\n", (unsigned long long)s.primitive_arrays,
           (unsigned long long)s.primitive_arrays_kept, (unsigned long long)s.bytes_zeroed);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("leakscan %s\n", lw_core_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        const char *t = argc > 2 ? argv[2] : "";
        fputs(strcmp(t, "analyze") == 0 ? usage_analyze : strcmp(t, "info") == 0 ? usage_info
              : strcmp(t, "strip") == 0 ? usage_strip : usage_main, stdout);
        return 0;
    }
    if (strcmp(cmd, "analyze") == 0) return cmd_analyze(argc - 2, argv + 2);
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "strip") == 0) return cmd_strip(argc - 2, argv + 2);
    return usage_error(usage_main, "unknown command %s", cmd);
}
