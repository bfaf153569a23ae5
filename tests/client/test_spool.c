/* test_spool.c — the crash-safe spool: whole reports only after SIGKILL at random moments,
 * adoption of dead processes' run directories (never of live ones), quota eviction counted in
 * `dropped`, the install id, the per-report dropped claim. Real files, real processes. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "spool.h"
#include "uuid.h"

/* ---- helpers ------------------------------------------------------------------------------- */

typedef struct {
    char text[16384];
    size_t len;
} logbuf;

static void test_log(void *user, int level, const char *msg) {
    logbuf *b = user;
    if (getenv("LWC_TEST_VERBOSE")) fprintf(stderr, "  [log %d] %s\n", level, msg);
    if (!b) return;
    int n = snprintf(b->text + b->len, sizeof b->text - b->len, "%s\n", msg);
    if (n > 0 && b->len + (size_t)n < sizeof b->text) b->len += (size_t)n;
}

static void make_tmpdir(char *out, size_t cap) {
    snprintf(out, cap, "/tmp/lwc-spool.XXXXXX");
    assert_non_null(mkdtemp(out));
}

static void rm_rf(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Writes `size` bytes of a pattern derived from `seed`. */
static int write_pattern(const char *path, size_t size, unsigned seed) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    for (size_t i = 0; i < size; i++) fputc((int)((seed + i * 7) & 0xff), f);
    return fclose(f);
}

static int check_pattern(const char *path, size_t size, unsigned seed) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t i = 0;
    int c, ok = 1;
    while ((c = fgetc(f)) != EOF) {
        if (i >= size || c != (int)((seed + i * 7) & 0xff)) ok = 0;
        i++;
    }
    fclose(f);
    return ok && i == size ? 0 : -1;
}

static void make_id(char out[37], unsigned a, unsigned b) {
    snprintf(out, 37, "%08x-0000-4000-8000-%012x", a, b);
}

/* Adds a report with `size` data bytes; meta names its size and pattern seed. */
static lw_sdk_status add_report(lwc_spool *s, const char *id, size_t size, unsigned seed, char *err, size_t cap) {
    char data[LWC_SPOOL_PATH_MAX], meta[256], name[64];
    snprintf(name, sizeof name, "data-%s", id);
    lw_sdk_status rc = lwc_spool_work_path(s, name, data, sizeof data, err, cap);
    if (rc != LW_SDK_OK) return rc;
    if (write_pattern(data, size, seed) != 0) return LW_SDK_ERR_IO;
    snprintf(meta, sizeof meta, "{\"report_id\":\"%s\",\"mode\":\"heap\",\"size\":%zu,\"seed\":%u}", id, size, seed);
    return lwc_spool_add(s, id, meta, data, "heap", err, cap);
}

static lwc_spool *open_ok(const char *dir, uint64_t max_bytes, unsigned max_reports, logbuf *lb) {
    lwc_spool *s = NULL;
    char err[512] = "";
    lw_sdk_status rc = lwc_spool_open(&s, dir, max_bytes, max_reports, test_log, lb, err, sizeof err);
    if (rc != LW_SDK_OK) fail_msg("lwc_spool_open: %s", err);
    return s;
}

static unsigned count_of(lwc_spool *s) {
    unsigned n = 0;
    char err[256];
    assert_int_equal(lwc_spool_count(s, &n, NULL, err, sizeof err), LW_SDK_OK);
    return n;
}

/* Entries of `dir` whose name starts with `prefix`. */
static int count_entries(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

/* ---- report ids ------------------------------------------------------------------------------ */

static uint64_t uuid7_ms(const char *u) {
    char hex[13];
    memcpy(hex, u, 8);
    memcpy(hex + 8, u + 9, 4);
    hex[12] = 0;
    return strtoull(hex, NULL, 16);
}

static int cmp_id(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* Report ids are UUID v7: valid, version 7, the variant, the current Unix time in ms first (so
 * they sort by time), and all different. */
static void test_report_ids_are_time_ordered(void **state) {
    (void)state;
    enum { N = 2000 };
    static char ids[N][37];
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(lw__uuid7(ids[i]), 0);
        assert_true(lw__uuid_valid(ids[i]));
        assert_int_equal(ids[i][14], '7');
        assert_non_null(strchr("89ab", ids[i][19]));
        if (i) assert_true(uuid7_ms(ids[i]) >= uuid7_ms(ids[i - 1]));
    }
    clock_gettime(CLOCK_REALTIME, &t1);
    uint64_t ms0 = (uint64_t)t0.tv_sec * 1000u + (uint64_t)t0.tv_nsec / 1000000u;
    uint64_t ms1 = (uint64_t)t1.tv_sec * 1000u + (uint64_t)t1.tv_nsec / 1000000u;
    assert_true(uuid7_ms(ids[0]) >= ms0 && uuid7_ms(ids[N - 1]) <= ms1);
    qsort(ids, N, sizeof ids[0], cmp_id);
    for (int i = 1; i < N; i++) assert_true(strcmp(ids[i - 1], ids[i]) != 0);
}

/* ---- install id ------------------------------------------------------------------------------ */

static void test_install_id_stable(void **state) {
    (void)state;
    char dir[64], a[37], b[37], c[37];
    make_tmpdir(dir, sizeof dir);
    lwc_spool *s = open_ok(dir, 0, 0, NULL);
    lwc_spool_install_id(s, a);
    assert_true(lw__uuid_valid(a));
    assert_int_equal(a[14], '4');                       /* version 4 */
    assert_non_null(strchr("89ab", a[19]));             /* RFC 4122 variant */
    lwc_spool *s2 = open_ok(dir, 0, 0, NULL);           /* a second process/handle at the same time */
    lwc_spool_install_id(s2, c);
    assert_string_equal(a, c);
    lwc_spool_close(s2);
    lwc_spool_close(s);
    s = open_ok(dir, 0, 0, NULL);
    lwc_spool_install_id(s, b);
    assert_string_equal(a, b);
    lwc_spool_close(s);
    /* After close, only the shared files remain: no run directory, no lock of ours. */
    assert_int_equal(count_entries(dir, "run-"), 0);
    rm_rf(dir);
}

/* ---- add, next, backoff, remove ---------------------------------------------------------------- */

static void test_add_next_backoff_remove(void **state) {
    (void)state;
    char dir[64], id1[37], id2[37], err[512] = "", work[LWC_SPOOL_PATH_MAX];
    make_tmpdir(dir, sizeof dir);
    make_id(id1, 1, 1);
    make_id(id2, 1, 2);
    lwc_spool *s = open_ok(dir, 0, 0, NULL);
    assert_int_equal(add_report(s, id1, 1000, 1, err, sizeof err), LW_SDK_OK);
    assert_int_equal(add_report(s, id2, 2000, 2, err, sizeof err), LW_SDK_OK);
    /* The data file was moved in. */
    char name[64];
    snprintf(name, sizeof name, "data-%s", id1);
    assert_int_equal(lwc_spool_work_path(s, name, work, sizeof work, err, sizeof err), LW_SDK_OK);
    assert_false(exists(work));
    /* Same id twice: refused, the data stays. */
    assert_int_equal(add_report(s, id1, 10, 3, err, sizeof err), LW_SDK_ERR_USAGE);
    assert_non_null(strstr(err, "already"));
    snprintf(name, sizeof name, "data-%s", id1);
    lwc_spool_work_path(s, name, work, sizeof work, err, sizeof err);
    assert_true(exists(work));
    /* Bad arguments. */
    assert_int_equal(lwc_spool_add(s, "NOT-A-UUID", "{}", work, "heap", err, sizeof err), LW_SDK_ERR_USAGE);
    assert_int_equal(lwc_spool_add(s, id1, "{}", work, "tarball", err, sizeof err), LW_SDK_ERR_USAGE);
    assert_int_equal(lwc_spool_work_path(s, "../x", work, sizeof work, err, sizeof err), LW_SDK_ERR_USAGE);
    assert_int_equal(lwc_spool_work_path(s, ".add-x", work, sizeof work, err, sizeof err), LW_SDK_ERR_USAGE);

    int64_t now = 1000000, wake = 0;
    int found = 0;
    lwc_spooled r;
    assert_int_equal(lwc_spool_next(s, now, &r, &found, &wake, err, sizeof err), LW_SDK_OK);
    assert_true(found);
    assert_string_equal(r.id, id1);
    assert_string_equal(r.kind, "heap");
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.dropped, -1);
    assert_int_equal(check_pattern(r.data_path, 1000, 1), 0);
    assert_true(r.bytes > 1000);
    assert_int_equal(wake, 0);

    assert_int_equal(lwc_spool_backoff(s, id1, now + 5000, err, sizeof err), LW_SDK_OK);
    assert_int_equal(lwc_spool_next(s, now, &r, &found, &wake, err, sizeof err), LW_SDK_OK);
    assert_true(found);
    assert_string_equal(r.id, id2);
    assert_int_equal(lwc_spool_backoff(s, id2, now + 3000, err, sizeof err), LW_SDK_OK);
    assert_int_equal(lwc_spool_next(s, now, &r, &found, &wake, err, sizeof err), LW_SDK_OK);
    assert_false(found);
    assert_int_equal(wake, now + 3000);
    /* Due again: the oldest first. */
    assert_int_equal(lwc_spool_next(s, now + 5000, &r, &found, &wake, err, sizeof err), LW_SDK_OK);
    assert_true(found);
    assert_string_equal(r.id, id1);
    assert_int_equal(r.attempts, 1);
    lwc_spool_close(s);

    /* Persisted across a reopen. */
    s = open_ok(dir, 0, 0, NULL);
    assert_int_equal(lwc_spool_next(s, now + 5000, &r, &found, NULL, err, sizeof err), LW_SDK_OK);
    assert_string_equal(r.id, id1);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.next_attempt_ms, now + 5000);
    assert_int_equal(lwc_spool_remove(s, id1, LWC_SPOOL_DELIVERED, err, sizeof err), LW_SDK_OK);
    assert_int_equal(lwc_spool_remove(s, id1, LWC_SPOOL_DELIVERED, err, sizeof err), LW_SDK_OK); /* gone: fine */
    assert_int_equal(lwc_spool_backoff(s, id1, now, err, sizeof err), LW_SDK_OK);                 /* gone: fine */
    assert_false(exists(r.data_path));
    assert_int_equal(count_of(s), 1);
    lwc_spool_close(s);
    rm_rf(dir);
}

/* ---- quota ------------------------------------------------------------------------------------- */

static void test_quota_by_count(void **state) {
    (void)state;
    char dir[64], id[37], err[512] = "";
    logbuf lb = {0};
    make_tmpdir(dir, sizeof dir);
    lwc_spool *s = open_ok(dir, 0, 3, &lb);
    for (unsigned i = 1; i <= 5; i++) {
        make_id(id, 2, i);
        assert_int_equal(add_report(s, id, 100, i, err, sizeof err), LW_SDK_OK);
    }
    assert_int_equal(count_of(s), 3);
    assert_non_null(strstr(lb.text, "spool_max_reports"));
    int found = 0;
    lwc_spooled r;
    assert_int_equal(lwc_spool_next(s, 0, &r, &found, NULL, err, sizeof err), LW_SDK_OK);
    make_id(id, 2, 3); /* 1 and 2 were the oldest */
    assert_string_equal(r.id, id);
    assert_int_equal(lwc_spool_take_dropped(s), 2);
    assert_int_equal(lwc_spool_take_dropped(s), 0);
    lwc_spool_close(s);

    /* A smaller quota at the next open evicts too. */
    s = open_ok(dir, 0, 1, &lb);
    assert_int_equal(count_of(s), 1);
    assert_int_equal(lwc_spool_take_dropped(s), 2);
    lwc_spool_close(s);
    rm_rf(dir);
}

static void test_quota_by_bytes(void **state) {
    (void)state;
    char dir[64], id[37], err[512] = "";
    logbuf lb = {0};
    make_tmpdir(dir, sizeof dir);
    lwc_spool *s = open_ok(dir, 2500, 100, &lb);
    for (unsigned i = 1; i <= 4; i++) {
        make_id(id, 3, i);
        assert_int_equal(add_report(s, id, 1000, i, err, sizeof err), LW_SDK_OK);
    }
    unsigned n = 0;
    uint64_t bytes = 0;
    assert_int_equal(lwc_spool_count(s, &n, &bytes, err, sizeof err), LW_SDK_OK);
    assert_int_equal(n, 2);
    assert_true(bytes <= 2500);
    assert_non_null(strstr(lb.text, "spool_max_bytes"));
    assert_int_equal(lwc_spool_take_dropped(s), 2);
    /* Larger than the whole spool: refused, counted, its data deleted; nothing else evicted. */
    char data[LWC_SPOOL_PATH_MAX];
    make_id(id, 3, 99);
    assert_int_equal(add_report(s, id, 3000, 9, err, sizeof err), LW_SDK_ERR_LIMIT);
    assert_non_null(strstr(err, "more than the whole spool"));
    char name[64];
    snprintf(name, sizeof name, "data-%s", id);
    lwc_spool_work_path(s, name, data, sizeof data, err, sizeof err);
    assert_false(exists(data));
    assert_int_equal(count_of(s), 2);
    assert_int_equal(lwc_spool_take_dropped(s), 1);
    lwc_spool_close(s);
    rm_rf(dir);
}

/* meta.dropped: claimed once per report, the same on every retry; evicting or rejecting a
 * report that carried drops gives them back to the counter. */
static void test_claim_dropped(void **state) {
    (void)state;
    char dir[64], id[37], x[37], y[37], err[512] = "";
    make_tmpdir(dir, sizeof dir);
    lwc_spool *s = open_ok(dir, 0, 2, NULL);
    for (unsigned i = 1; i <= 4; i++) {
        make_id(id, 4, i);
        assert_int_equal(add_report(s, id, 10, i, err, sizeof err), LW_SDK_OK);
    }
    make_id(x, 4, 3);
    make_id(y, 4, 4);
    int64_t d = -5;
    assert_int_equal(lwc_spool_claim_dropped(s, x, &d, err, sizeof err), LW_SDK_OK);
    assert_int_equal(d, 2);
    assert_int_equal(lwc_spool_claim_dropped(s, x, &d, err, sizeof err), LW_SDK_OK);
    assert_int_equal(d, 2); /* a retry sends the same meta */
    assert_int_equal(lwc_spool_claim_dropped(s, y, &d, err, sizeof err), LW_SDK_OK);
    assert_int_equal(d, 0);
    lwc_spooled r;
    int found;
    assert_int_equal(lwc_spool_next(s, 0, &r, &found, NULL, err, sizeof err), LW_SDK_OK);
    assert_string_equal(r.id, x);
    assert_int_equal(r.dropped, 2);
    /* x rejected: its 2 go back. */
    assert_int_equal(lwc_spool_remove(s, x, LWC_SPOOL_REJECTED, err, sizeof err), LW_SDK_OK);
    assert_int_equal(lwc_spool_take_dropped(s), 2);
    char z[37];
    make_id(z, 4, 5);
    assert_int_equal(add_report(s, z, 10, 5, err, sizeof err), LW_SDK_OK);
    assert_int_equal(lwc_spool_remove(s, y, LWC_SPOOL_DELIVERED, err, sizeof err), LW_SDK_OK);
    /* Five more: z (unclaimed, carrying nothing) and the first three of them are pushed out. */
    for (unsigned i = 10; i < 15; i++) {
        make_id(id, 5, i);
        assert_int_equal(add_report(s, id, 10, i, err, sizeof err), LW_SDK_OK);
    }
    uint64_t got = lwc_spool_take_dropped(s);
    assert_int_equal(got, 4);
    lwc_spool_close(s);
    rm_rf(dir);

    /* The carried share explicitly. */
    make_tmpdir(dir, sizeof dir);
    s = open_ok(dir, 0, 2, NULL);
    for (unsigned i = 1; i <= 3; i++) {
        make_id(id, 6, i);
        assert_int_equal(add_report(s, id, 10, i, err, sizeof err), LW_SDK_OK);
    }
    make_id(x, 6, 2);
    assert_int_equal(lwc_spool_claim_dropped(s, x, &d, err, sizeof err), LW_SDK_OK);
    assert_int_equal(d, 1);
    make_id(id, 6, 4);
    assert_int_equal(add_report(s, id, 10, 4, err, sizeof err), LW_SDK_OK); /* evicts x (1 + its 1) */
    assert_int_equal(lwc_spool_take_dropped(s), 2);
    lwc_spool_close(s);
    rm_rf(dir);
}

/* ---- run directories ---------------------------------------------------------------------------- */

static void test_adopt_dead_runs(void **state) {
    (void)state;
    char dir[64], path[512], id[37], err[512] = "";
    make_tmpdir(dir, sizeof dir);
    make_id(id, 7, 1);
    /* A child adds a report, leaves work behind and dies without closing. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        lwc_spool *s = NULL;
        char e[512], work[LWC_SPOOL_PATH_MAX];
        if (lwc_spool_open(&s, dir, 0, 0, NULL, NULL, e, sizeof e) != LW_SDK_OK) _exit(2);
        if (add_report(s, id, 500, 7, e, sizeof e) != LW_SDK_OK) _exit(3);
        if (lwc_spool_work_path(s, "dump.hprof", work, sizeof work, e, sizeof e) != LW_SDK_OK) _exit(4);
        if (write_pattern(work, 4096, 1) != 0) _exit(5);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(count_entries(dir, "run-"), 2); /* its dir and its lock */
    /* Hand-made leftovers: a dead run with its lock file, and a run dir without one. */
    snprintf(path, sizeof path, "%s/run-1-dead", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/run-1-dead/.add-x", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/run-1-dead/.add-x/data", dir);
    assert_int_equal(write_pattern(path, 100, 1), 0);
    snprintf(path, sizeof path, "%s/run-1-dead.lock", dir);
    assert_int_equal(write_pattern(path, 0, 1), 0);
    snprintf(path, sizeof path, "%s/run-2-nolock", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/install_id.tmp", dir);
    assert_int_equal(write_pattern(path, 3, 1), 0);

    logbuf lb = {0};
    lwc_spool *s = open_ok(dir, 0, 0, &lb);
    assert_int_equal(count_entries(dir, "run-"), 2); /* only ours: dir + lock */
    assert_false(exists(path));
    assert_non_null(strstr(lb.text, "dead process"));
    /* Its finished report was adopted. */
    lwc_spooled r;
    int found;
    assert_int_equal(lwc_spool_next(s, 0, &r, &found, NULL, err, sizeof err), LW_SDK_OK);
    assert_true(found);
    assert_string_equal(r.id, id);
    assert_int_equal(check_pattern(r.data_path, 500, 7), 0);
    lwc_spool_close(s);
    rm_rf(dir);
}

/* A live process's run directory is never touched; once it is SIGKILLed, it is. */
static void test_live_run_not_adopted(void **state) {
    (void)state;
    char dir[64], work[LWC_SPOOL_PATH_MAX] = "";
    make_tmpdir(dir, sizeof dir);
    int up[2], down[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        lwc_spool *s = NULL;
        char e[512], w[LWC_SPOOL_PATH_MAX];
        close(up[0]);
        close(down[1]);
        if (lwc_spool_open(&s, dir, 0, 0, NULL, NULL, e, sizeof e) != LW_SDK_OK) _exit(2);
        if (lwc_spool_work_path(s, "dump.hprof", w, sizeof w, e, sizeof e) != LW_SDK_OK) _exit(3);
        if (write_pattern(w, 4096, 1) != 0) _exit(4);
        if (write(up[1], w, sizeof w) != (ssize_t)sizeof w) _exit(5);
        char c;
        if (read(down[0], &c, 1) != 1) _exit(6); /* wait until told */
        if (c == 'c') lwc_spool_close(s);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    assert_int_equal(read(up[0], work, sizeof work), (ssize_t)sizeof work);
    assert_true(exists(work));

    lwc_spool *a = open_ok(dir, 0, 0, NULL);
    lwc_spool *b = open_ok(dir, 0, 0, NULL);      /* two handles in this process: each its own run */
    assert_string_not_equal(lwc_spool_run_dir(a), lwc_spool_run_dir(b));
    assert_true(exists(work));                     /* the child's work survives both opens */
    assert_true(exists(lwc_spool_run_dir(a)));
    lwc_spool_close(b);
    assert_true(exists(lwc_spool_run_dir(a)));     /* and b's open did not take a's */

    kill(pid, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(exists(work));
    lwc_spool *c = open_ok(dir, 0, 0, NULL);
    assert_false(exists(work));                    /* dead now: adopted and cleaned */
    assert_true(exists(lwc_spool_run_dir(a)));     /* a is alive */
    lwc_spool_close(c);
    lwc_spool_close(a);
    assert_int_equal(count_entries(dir, "run-"), 0);
    close(up[0]);
    close(down[1]);
    rm_rf(dir);
}

/* ---- crash safety -------------------------------------------------------------------------------- */

/* The child: adds reports of random sizes, backs off, claims, removes — until it is killed. */
static void crash_child(const char *dir, unsigned iter, int ready_fd) {
    lwc_spool *s = NULL;
    char e[512], id[37];
    srand(iter * 7919u + 1);
    if (lwc_spool_open(&s, dir, 400000, 6, NULL, NULL, e, sizeof e) != LW_SDK_OK) _exit(2);
    if (write(ready_fd, "r", 1) != 1) _exit(3);
    for (unsigned k = 0;; k++) {
        make_id(id, 0x1000 + iter, k);
        size_t size = (size_t)(rand() % 65536) + 1;
        unsigned seed = (unsigned)rand();
        lw_sdk_status rc = add_report(s, id, size, seed, e, sizeof e);
        if (rc != LW_SDK_OK && rc != LW_SDK_ERR_LIMIT) _exit(4);
        lwc_spooled r;
        int found = 0;
        if (lwc_spool_next(s, INT64_MAX, &r, &found, NULL, e, sizeof e) != LW_SDK_OK) _exit(5);
        if (!found) continue;
        int64_t d;
        switch (rand() % 4) {
        case 0: lwc_spool_backoff(s, r.id, 0, e, sizeof e); break;
        case 1: lwc_spool_claim_dropped(s, r.id, &d, e, sizeof e); break;
        case 2: lwc_spool_remove(s, r.id, rand() % 2 ? LWC_SPOOL_DELIVERED : LWC_SPOOL_REJECTED, e, sizeof e); break;
        default: break;
        }
    }
}

/* Checks every report directory by hand, before any open repairs anything: 0 = whole. */
static int verify_report_dir(const char *dir, const char *id, char *why, size_t cap) {
    char path[1200], buf[512];
    snprintf(path, sizeof path, "%s/reports/%s/meta.json", dir, id);
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(why, cap, "%s: no meta.json", id), -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char mid[37];
    size_t size;
    unsigned seed;
    if (sscanf(buf, "{\"report_id\":\"%36[0-9a-f-]\",\"mode\":\"heap\",\"size\":%zu,\"seed\":%u}", mid, &size, &seed) != 3)
        return snprintf(why, cap, "%s: meta.json is not whole: %.200s", id, buf), -1;
    if (strcmp(mid, id) != 0) return snprintf(why, cap, "%s: meta of %s", id, mid), -1;
    snprintf(path, sizeof path, "%s/reports/%s/data", dir, id);
    if (check_pattern(path, size, seed) != 0) return snprintf(why, cap, "%s: data is not whole", id), -1;
    snprintf(path, sizeof path, "%s/reports/%s/state", dir, id);
    f = fopen(path, "r");
    if (!f) return snprintf(why, cap, "%s: no state", id), -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (!strstr(buf, "version=1\n") || !strstr(buf, "\ndropped="))
        return snprintf(why, cap, "%s: state is not whole: %.200s", id, buf), -1;
    return 0;
}

static void test_crash_safety(void **state) {
    (void)state;
    char dir[64], why[512], err[512];
    make_tmpdir(dir, sizeof dir);
    srand(20240611); /* fixed seed: the kill moments are reproducible (up to scheduling) */
    int iterations = getenv("LWC_CRASH_ITERATIONS") ? atoi(getenv("LWC_CRASH_ITERATIONS")) : 60;
    unsigned total_seen = 0, mid_add = 0, mid_remove = 0;
    for (int it = 0; it < iterations; it++) {
        int ready[2];
        assert_int_equal(pipe(ready), 0);
        unsigned delay_us = (unsigned)(rand() % 30000);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(ready[0]);
            crash_child(dir, (unsigned)it, ready[1]);
            _exit(0);
        }
        close(ready[1]);
        char c;
        assert_int_equal(read(ready[0], &c, 1), 1);
        close(ready[0]);
        usleep(delay_us);
        kill(pid, SIGKILL);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
            fail_msg("iteration %d: the child ended by itself (status %d)", it, st);

        /* 1. Before anything repairs it: every report in reports/ is whole. */
        char rdir[256];
        snprintf(rdir, sizeof rdir, "%s/reports", dir);
        DIR *d = opendir(rdir);
        assert_non_null(d);
        struct dirent *e;
        unsigned seen = 0;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            if (!lw__uuid_valid(e->d_name)) fail_msg("iteration %d: stray entry reports/%s", it, e->d_name);
            if (verify_report_dir(dir, e->d_name, why, sizeof why) != 0) fail_msg("iteration %d: %s", it, why);
            seen++;
        }
        closedir(d);
        total_seen += seen;
        /* Did the kill land inside an add or a remove? (staging or trash left in the dead run) */
        d = opendir(dir);
        assert_non_null(d);
        while ((e = readdir(d)) != NULL) {
            char p[600];
            if (strncmp(e->d_name, "run-", 4) != 0 || strstr(e->d_name, ".lock")) continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (count_entries(p, ".add-") > 0) mid_add++;
            if (count_entries(p, ".trash-") > 0) mid_remove++;
        }
        closedir(d);

        /* 2. Opening adopts the dead run: no run directory but ours, no temp files; the same reports. */
        lwc_spool *s = open_ok(dir, 400000, 6, NULL);
        assert_int_equal(count_entries(dir, "run-"), 2);
        assert_int_equal(count_entries(dir, "install_id.tmp"), 0);
        assert_int_equal(count_entries(dir, "dropped.tmp"), 0);
        unsigned n = 0;
        assert_int_equal(lwc_spool_count(s, &n, NULL, err, sizeof err), LW_SDK_OK);
        /* A kill between a report's rename and the eviction it causes leaves one too many: the open evicts it. */
        assert_int_equal(n, seen > 6 ? 6 : seen);
        d = opendir(rdir);
        while ((e = readdir(d)) != NULL) {
            char p[600];
            if (e->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", rdir, e->d_name);
            assert_int_equal(count_entries(p, "state.tmp"), 0);
        }
        closedir(d);
        lwc_spool_close(s);
    }
    /* The children did real work between kills, and kills hit the middle of adds. */
    if (getenv("LWC_TEST_VERBOSE"))
        fprintf(stderr, "  %d kills: %u reports checked, %u mid-add, %u mid-remove\n", iterations, total_seen, mid_add,
                mid_remove);
    assert_true(total_seen > 0);
    assert_true(mid_add > 0);
    rm_rf(dir);
}

/* Threads of one process share a handle: the mutex keeps the spool consistent. */
#include <pthread.h>
typedef struct {
    lwc_spool *s;
    unsigned t;
    int failures;
} thr_arg;

static void *thr_main(void *p) {
    thr_arg *a = p;
    char id[37], e[512];
    for (unsigned k = 0; k < 30; k++) {
        make_id(id, 0x9000 + a->t, k);
        if (add_report(a->s, id, 200, k, e, sizeof e) != LW_SDK_OK) a->failures++;
        lwc_spooled r;
        int found;
        if (lwc_spool_next(a->s, INT64_MAX, &r, &found, NULL, e, sizeof e) != LW_SDK_OK) a->failures++;
        if (found && k % 3 == 0 && lwc_spool_remove(a->s, r.id, LWC_SPOOL_DELIVERED, e, sizeof e) != LW_SDK_OK)
            a->failures++;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    char dir[64];
    make_tmpdir(dir, sizeof dir);
    lwc_spool *s = open_ok(dir, 0, 10, NULL);
    pthread_t th[4];
    thr_arg args[4];
    for (unsigned i = 0; i < 4; i++) {
        args[i] = (thr_arg){s, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    assert_true(count_of(s) <= 10);
    lwc_spool_close(s);
    rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_ids_are_time_ordered),
        cmocka_unit_test(test_install_id_stable),
        cmocka_unit_test(test_add_next_backoff_remove),
        cmocka_unit_test(test_quota_by_count),
        cmocka_unit_test(test_quota_by_bytes),
        cmocka_unit_test(test_claim_dropped),
        cmocka_unit_test(test_adopt_dead_runs),
        cmocka_unit_test(test_live_run_not_adopted),
        cmocka_unit_test(test_crash_safety),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
