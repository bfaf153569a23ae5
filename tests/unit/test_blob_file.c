/* test_blob_file.c — a heap upload's temp file (server/blob_file.c): what reaches the disk is
 * exactly what was written, direct or through the page cache, in any chunking; a full file
 * stops its writer until it catches up; a file freed mid-write is deleted; a failed write is
 * an error, not a short file. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "blob_file.h"

static char dir[256];

/* Byte i of every test body: no two 4 KiB blocks alike, so a misplaced block shows. */
static unsigned char byte_at(uint64_t i) { return (unsigned char)((i * 2654435761u) >> 13 ^ i >> 12); }

static int files_in(const char *d) {
    DIR *dp = opendir(d);
    assert_non_null(dp);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (e->d_name[0] != '.') n++;
    closedir(dp);
    return n;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
} waiter;

static void on_ready(void *arg) {
    waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    w->ready = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* After LD_BLOB_FULL, as the server does (there: suspended until ready is called). */
static void wait_until_ready(ld_blob_file *f) {
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    ld_blob_file_wait(f, on_ready, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.ready) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
}

/* Writes `total` bytes in chunks of 1..max_chunk (a fixed sequence), waiting after
 * LD_BLOB_FULL as the server does (unless `ignore_full`); returns how often it was full. */
static int write_body(ld_blob_file *f, uint64_t total, size_t max_chunk, int ignore_full) {
    unsigned char *chunk = malloc(max_chunk);
    assert_non_null(chunk);
    uint64_t at = 0, seed = 7;
    int fulls = 0;
    char err[512];
    while (at < total) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = (size_t)(seed >> 33) % max_chunk + 1;
        if (n > total - at) n = (size_t)(total - at);
        for (size_t i = 0; i < n; i++) chunk[i] = byte_at(at + i);
        int rc = ld_blob_file_write(f, chunk, n, err, sizeof err);
        assert_true(rc == 0 || rc == LD_BLOB_FULL);
        at += n;
        if (rc == LD_BLOB_FULL) {
            fulls++;
            if (!ignore_full) wait_until_ready(f);
        }
    }
    assert_int_equal(ld_blob_file_bytes(f), total);
    free(chunk);
    return fulls;
}

static void assert_body(const char *path, uint64_t total) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    static unsigned char buf[1 << 16];
    uint64_t at = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) {
        for (size_t i = 0; i < n; i++)
            if (buf[i] != byte_at(at + i)) fail_msg("%s: byte %llu differs", path, (unsigned long long)(at + i));
        at += n;
    }
    fclose(fp);
    assert_int_equal(at, total);
}

/* Writes, syncs and renames one body; checks the kept file. */
static void round_trip(ld_blob_files *s, uint64_t total, size_t max_chunk, int want_direct, int ignore_full) {
    char err[512], path[512];
    ld_blob_file *f = ld_blob_file_create(s, err, sizeof err);
    assert_non_null(f);
    if (want_direct >= 0) assert_int_equal(ld_blob_file_direct(f), want_direct);
    int fulls = write_body(f, total, max_chunk, ignore_full);
    if (!ld_blob_file_direct(f)) assert_int_equal(fulls, 0); /* the page cache never is */
    assert_int_equal(ld_blob_file_sync(f, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/kept", dir);
    assert_int_equal(ld_blob_file_rename(f, path, dir, err, sizeof err), 0);
    ld_blob_file_free(f);
    assert_body(path, total);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(files_in(dir), 0);
}

/* Whether this file system takes O_DIRECT (tmpfs before Linux 6.6 does not): the direct
 * tests then check the page-cache fallback instead, and say so. */
static int direct_works(void) {
    char err[512];
    ld_blob_files *s = ld_blob_files_start(dir, 1, err, sizeof err);
    assert_non_null(s);
    ld_blob_file *f = ld_blob_file_create(s, err, sizeof err);
    assert_non_null(f);
    int d = ld_blob_file_direct(f);
    ld_blob_file_free(f);
    ld_blob_files_stop(s);
    if (!d) fprintf(stderr, "note: %s refuses O_DIRECT; checking the page-cache fallback instead\n", dir);
    return d;
}

static void test_direct_bodies_arrive_whole(void **state) {
    (void)state;
    char err[512];
    int d = direct_works();
    ld_blob_files *s = ld_blob_files_start(dir, 4, err, sizeof err);
    assert_non_null(s);
    /* odd sizes, around and far from the block and buffer sizes, small and large chunks */
    const uint64_t sizes[] = {0, 1, 4095, 4096, 4097, (1u << 20) - 1, 1u << 20, (1u << 20) + 1, (5u << 20) + 1234,
                              (9u << 20) + 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        round_trip(s, sizes[i], 100, d, 0);
        round_trip(s, sizes[i], 128 << 10, d, 0);
    }
    ld_blob_files_stop(s);
}

static void test_page_cache_bodies_arrive_whole(void **state) {
    (void)state;
    char err[512];
    ld_blob_files *s = ld_blob_files_start(dir, 0, err, sizeof err);
    assert_non_null(s);
    round_trip(s, 0, 100, 0, 0);
    round_trip(s, 4097, 100, 0, 0);
    round_trip(s, (3u << 20) + 5, 128 << 10, 0, 0);
    ld_blob_files_stop(s);
}

/* A caller that writes on after LD_BLOB_FULL (more than the slack) is held, not overrun. */
static void test_writing_past_full_waits(void **state) {
    (void)state;
    char err[512];
    ld_blob_files *s = ld_blob_files_start(dir, 1, err, sizeof err);
    assert_non_null(s);
    round_trip(s, (16u << 20) + 77, 700 << 10, -1, 1);
    ld_blob_files_stop(s);
}

/* direct_max bounds the uploads written directly at once (their buffers' memory); the rest
 * go through the page cache, and a freed slot is taken again. */
static void test_direct_uploads_are_bounded(void **state) {
    (void)state;
    if (!direct_works()) skip();
    char err[512];
    ld_blob_files *s = ld_blob_files_start(dir, 2, err, sizeof err);
    assert_non_null(s);
    ld_blob_file *a = ld_blob_file_create(s, err, sizeof err), *b = ld_blob_file_create(s, err, sizeof err),
                 *c = ld_blob_file_create(s, err, sizeof err);
    assert_true(a && b && c);
    assert_int_equal(ld_blob_file_direct(a) + ld_blob_file_direct(b), 2);
    assert_int_equal(ld_blob_file_direct(c), 0);
    ld_blob_file_free(a);
    ld_blob_file *d = ld_blob_file_create(s, err, sizeof err);
    assert_non_null(d);
    assert_int_equal(ld_blob_file_direct(d), 1);
    ld_blob_file_free(b);
    ld_blob_file_free(c);
    ld_blob_file_free(d);
    assert_int_equal(files_in(dir), 0);
    ld_blob_files_stop(s);
}

/* A client gone mid-upload: the file is freed while its write is under way; the writer
 * finishes, then deletes it. */
static void test_file_freed_mid_write_is_deleted(void **state) {
    (void)state;
    char err[512];
    ld_blob_files *s = ld_blob_files_start(dir, 4, err, sizeof err);
    assert_non_null(s);
    for (int i = 0; i < 20; i++) {
        ld_blob_file *f = ld_blob_file_create(s, err, sizeof err);
        assert_non_null(f);
        write_body(f, (2u << 20) + (uint64_t)i * 4099, 64 << 10, 1);
        ld_blob_file_free(f); /* usually while a write is under way */
    }
    ld_blob_files_stop(s); /* ends those writes */
    assert_int_equal(files_in(dir), 0);
}

/* A write the disk refuses (here: over the process's file size limit) is reported, at a
 * later write or at the sync, never a short file kept. */
static void test_failed_write_is_an_error(void **state) {
    (void)state;
    char err[512];
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_IGN);
    for (int direct = 0; direct <= 1; direct++) {
        ld_blob_files *s = ld_blob_files_start(dir, direct, err, sizeof err);
        assert_non_null(s);
        ld_blob_file *f = ld_blob_file_create(s, err, sizeof err);
        assert_non_null(f);
        lim = old;
        lim.rlim_cur = 3u << 20;
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        static unsigned char chunk[64 << 10];
        int rc = 0;
        err[0] = 0;
        for (int i = 0; i < 128 && rc >= 0; i++) { /* 8 MiB */
            rc = ld_blob_file_write(f, chunk, sizeof chunk, err, sizeof err);
            if (rc == LD_BLOB_FULL) wait_until_ready(f);
        }
        if (rc >= 0) rc = ld_blob_file_sync(f, err, sizeof err);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err, strerror(EFBIG)));
        ld_blob_file_free(f);
        ld_blob_files_stop(s);
        assert_int_equal(files_in(dir), 0);
    }
    signal(SIGXFSZ, SIG_DFL);
}

static int setup(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/test_blob_file.XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_bodies_arrive_whole),
        cmocka_unit_test(test_page_cache_bodies_arrive_whole),
        cmocka_unit_test(test_writing_past_full_waits),
        cmocka_unit_test(test_direct_uploads_are_bounded),
        cmocka_unit_test(test_file_freed_mid_write_is_deleted),
        cmocka_unit_test(test_failed_write_is_an_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
