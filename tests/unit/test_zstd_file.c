/* test_zstd_file.c — zstd stream helpers: round trip, the decompression cap (bombs),
 * truncated and corrupt frames, and lw_heap_open on a compressed dump. */
#define _GNU_SOURCE
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "heap_builder.h"
#include "hprof_format.h"

static void write_file(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(d, 1, n, f), n);
    fclose(f);
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void test_compress_decompress_round_trip(void **state) {
    (void)state;
    size_t n = 3 * 1024 * 1024 + 17; /* spans several stream buffers */
    uint8_t *d = malloc(n);
    uint32_t x = 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        d[i] = (uint8_t)(i % 7 == 0 ? x >> 24 : i / 1000);
    }
    char *in = hb_temp_path(".bin"), *z = hb_temp_path(".zst"), *out = hb_temp_path(".out");
    write_file(in, d, n);
    lw_error err = {0};
    assert_int_equal(lw_zstd_compress_file(in, z, 0, &err), LW_OK);
    assert_int_equal(lw_is_zstd_file(z), 1);
    assert_int_equal(lw_is_zstd_file(in), 0);
    assert_int_equal(lw_zstd_decompress_file(z, out, n, &err), LW_OK); /* exactly at the cap */
    size_t m;
    uint8_t *back = hb_read_file(out, &m);
    assert_int_equal(m, n);
    assert_memory_equal(back, d, n);
    free(back);
    /* an empty file round-trips too */
    write_file(in, "", 0);
    assert_int_equal(lw_zstd_compress_file(in, z, 19, &err), LW_OK);
    assert_int_equal(lw_zstd_decompress_file(z, out, 10, &err), LW_OK);
    back = hb_read_file(out, &m);
    assert_int_equal(m, 0);
    free(back);
    unlink(in);
    unlink(z);
    unlink(out);
    free(in);
    free(z);
    free(out);
    free(d);
}

static void test_decompression_bomb_hits_cap_and_output_is_removed(void **state) {
    (void)state;
    char *in = hb_temp_path(".bin"), *z = hb_temp_path(".zst"), *out = hb_temp_path(".out");
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 64 << 20), 0); /* 64 MiB of zeros */
    fclose(f);
    lw_error err = {0};
    assert_int_equal(lw_zstd_compress_file(in, z, 3, &err), LW_OK);
    struct stat sb;
    assert_int_equal(stat(z, &sb), 0);
    assert_true(sb.st_size < 64 * 1024);
    unlink(in);
    assert_int_equal(lw_zstd_decompress_file(z, out, 1 << 20, &err), LW_ERR_LIMIT);
    assert_int_equal(err.status, LW_ERR_LIMIT);
    assert_false(exists(out));
    /* lw_heap_open refuses it under its own cap, and leaves no temp file */
    char dir[] = "/tmp/lw-unit-zdir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    lw_heap_options o = {.struct_size = sizeof o, .max_decompressed_bytes = 1 << 20, .tmp_dir = dir};
    lw_heap *heap = NULL;
    assert_int_equal(lw_heap_open(&heap, z, &o, &err), LW_ERR_LIMIT);
    assert_null(heap);
    DIR *dd = opendir(dir);
    int entries = 0;
    for (struct dirent *e; (e = readdir(dd));) entries += e->d_name[0] != '.';
    closedir(dd);
    assert_int_equal(entries, 0);
    rmdir(dir);
    unlink(z);
    free(in);
    free(z);
    free(out);
}

static void test_truncated_and_corrupt_zstd_are_format_errors(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    for (int i = 0; i < 200; i++) hb_jstring(b, "some string content to compress");
    char *plain = hb_write_temp(b);
    char *z = hb_temp_path(".zst"), *cut = hb_temp_path(".zst"), *out = hb_temp_path(".out");
    lw_error err = {0};
    assert_int_equal(lw_zstd_compress_file(plain, z, 3, &err), LW_OK);
    size_t n;
    uint8_t *zd = hb_read_file(z, &n);
    assert_true(n > 16);
    size_t cuts[] = {4, 5, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(cut, zd, cuts[i]);
        lw_status st = lw_zstd_decompress_file(cut, out, 1 << 30, &err);
        if (st != LW_ERR_FORMAT) fail_msg("cut at %zu: %s", cuts[i], lw_strerror(st));
        assert_false(exists(out));
        lw_heap *heap = NULL;
        assert_int_equal(lw_heap_open(&heap, cut, NULL, &err), LW_ERR_FORMAT);
    }
    /* a flipped byte in the middle: the checksum or the decoder catches it */
    zd[n / 2] ^= 0x55;
    write_file(cut, zd, n);
    assert_int_equal(lw_zstd_decompress_file(cut, out, 1 << 30, &err), LW_ERR_FORMAT);
    assert_false(exists(out));
    /* missing input */
    assert_int_equal(lw_zstd_decompress_file("/nonexistent.zst", out, 1, &err), LW_ERR_IO);
    assert_int_equal(lw_is_zstd_file("/nonexistent.zst"), -1);
    free(zd);
    unlink(plain);
    unlink(z);
    unlink(cut);
    free(plain);
    free(z);
    free(cut);
    free(out);
    hb_free(b);
}

/* A frame whose 2 GiB window does not fit the memory the process may have: out of memory,
 * not "corrupt" (the worker fails a corrupt dump for good, but retries an out-of-memory one). */
static void test_window_over_the_memory_limit_is_nomem(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* ASan's allocator aborts on a failed allocation instead of returning NULL */
#else
    /* magic; descriptor: no content size, windowed; window 2^31; a last raw block of 1 byte */
    static const uint8_t frame[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa8, 0x09, 0x00, 0x00, 'x'};
    char *z = hb_temp_path(".zst"), *out = hb_temp_path(".out");
    write_file(z, frame, sizeof frame);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit lim = {512u << 20, 512u << 20};
        setrlimit(RLIMIT_DATA, &lim);
        lw_error err = {0};
        lw_status st = lw_zstd_decompress_file(z, out, 1ull << 40, &err);
        _exit(st == LW_ERR_NOMEM && strstr(err.message, "out of memory") ? 0 : 10 + (int)st);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    unlink(z);
    unlink(out);
    free(z);
    free(out);
#endif
}

static void test_heap_open_reads_a_zstd_dump_like_the_plain_one(void **state) {
    (void)state;
    hb *b = hb_new(HB_ANDROID, 4);
    uint64_t h = hb_class(b, "Holder", NULL, NULL, "x:O");
    hb_class(b, "Leak", NULL, NULL, NULL);
    uint64_t l = hb_instance(b, "Leak");
    hb_set_static(b, h, "x", l);
    hb_watch(b, l, "k", "d", 1);
    char *plain = hb_write_temp(b);
    char *z = hb_temp_path(".zst");
    lw_error err = {0};
    assert_int_equal(lw_zstd_compress_file(plain, z, 3, &err), LW_OK);
    char dir[] = "/tmp/lw-unit-zdir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    lw_heap_options o = {.struct_size = sizeof o, .tmp_dir = dir};
    lw_heap *hp = NULL, *hz = NULL;
    assert_int_equal(lw_heap_open(&hp, plain, NULL, &err), LW_OK);
    assert_int_equal(lw_heap_open(&hz, z, &o, &err), LW_OK);
    lw_heap_summary sp, sz;
    lw_heap_get_summary(hp, &sp);
    lw_heap_get_summary(hz, &sz);
    assert_int_equal(sp.file_bytes, sz.file_bytes);
    assert_int_equal(sp.records, sz.records);
    assert_int_equal(sp.instances, sz.instances);
    lw_leak_report *rp = hb_analyze(hp, NULL), *rz = hb_analyze(hz, NULL);
    char *jp = hb_report_json(rp), *jz = hb_report_json(rz);
    assert_string_equal(jp, jz);
    free(jp);
    free(jz);
    lw_leak_report_free(rp);
    lw_leak_report_free(rz);
    lw_heap_free(hp);
    lw_heap_free(hz);
    /* the decompressed temp file is gone once the heap is freed */
    DIR *dd = opendir(dir);
    int entries = 0;
    for (struct dirent *e; (e = readdir(dd));) entries += e->d_name[0] != '.';
    closedir(dd);
    assert_int_equal(entries, 0);
    rmdir(dir);
    unlink(plain);
    unlink(z);
    free(plain);
    free(z);
    hb_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compress_decompress_round_trip),
        cmocka_unit_test(test_decompression_bomb_hits_cap_and_output_is_removed),
        cmocka_unit_test(test_truncated_and_corrupt_zstd_are_format_errors),
        cmocka_unit_test(test_window_over_the_memory_limit_is_nomem),
        cmocka_unit_test(test_heap_open_reads_a_zstd_dump_like_the_plain_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
