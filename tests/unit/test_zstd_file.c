/* test_zstd_file.c — zstd stream helpers: round trip, the decompression cap (bombs),
 * truncated and corrupt frames, frames longer than they state, and lw_heap_open on a
 * compressed dump (refused after its first bytes when they are no HPROF). */
#define _GNU_SOURCE
#include <dirent.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "common.h"
#include "heap_builder.h"
#include "hprof_format.h"
#include "zstd_file.h"

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

static int dir_entries(const char *dir) {
    DIR *dd = opendir(dir);
    assert_non_null(dd);
    int entries = 0;
    for (struct dirent *e; (e = readdir(dd));) entries += e->d_name[0] != '.';
    closedir(dd);
    return entries;
}

/* Appends to `f` a zstd frame written by hand, as a bomb would be: window 2^17; a content
 * size field stating `fcs` (none when UINT64_MAX); a raw block of `raw` zero bytes (when not
 * 0), then `rle` zero bytes (a multiple of 128 KiB) as RLE blocks of 128 KiB, 4 bytes each. */
static void put_frame(FILE *f, uint64_t fcs, size_t raw, uint64_t rle) {
    uint8_t hdr[14] = {0x28, 0xb5, 0x2f, 0xfd, fcs == UINT64_MAX ? 0x00 : 0xc0, (17 - 10) << 3};
    size_t hn = 6;
    for (int i = 0; fcs != UINT64_MAX && i < 8; i++) hdr[hn++] = (uint8_t)(fcs >> (8 * i));
    assert_int_equal(fwrite(hdr, 1, hn, f), hn);
    uint64_t blocks = rle / (128 * 1024);
    assert_true(raw <= 128 * 1024 && rle % (128 * 1024) == 0 && (raw || blocks));
    if (raw) {
        uint32_t bh = (uint32_t)raw << 3 | (blocks == 0); /* raw block, last if no RLE follows */
        uint8_t b[3] = {(uint8_t)bh, (uint8_t)(bh >> 8), (uint8_t)(bh >> 16)};
        assert_int_equal(fwrite(b, 1, 3, f), 3);
        for (size_t i = 0; i < raw; i++) fputc(0, f);
    }
    for (uint64_t i = 0; i < blocks; i++) {
        uint32_t bh = (128u * 1024) << 3 | 1u << 1 | (i == blocks - 1);
        uint8_t b[4] = {(uint8_t)bh, (uint8_t)(bh >> 8), (uint8_t)(bh >> 16), 0};
        assert_int_equal(fwrite(b, 1, 4, f), 4);
    }
}

/* Runs `fn(arg)` in a child that may write at most `limit` bytes to any file (RLIMIT_FSIZE:
 * one byte more fails with EFBIG), and returns what it _exits with. */
static int in_child_writing_at_most(rlim_t limit, int (*fn)(void *), void *arg) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {limit, limit};
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(99);
        _exit(fn(arg));
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
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
    /* a skippable frame (magic 0x184D2A5x, a length, then that many bytes) before the frame:
     * still zstd, and it decompresses to the same content */
    size_t zn;
    uint8_t *zd = hb_read_file(z, &zn);
    static const uint8_t skip[] = {0x5E, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 'l', 'w', '!'};
    uint8_t *with = malloc(sizeof skip + zn);
    memcpy(with, skip, sizeof skip);
    memcpy(with + sizeof skip, zd, zn);
    write_file(z, with, sizeof skip + zn);
    assert_int_equal(lw_zstd_magic(with, sizeof skip + zn), 1);
    assert_int_equal(lw_zstd_magic(with, 3), 0);
    assert_int_equal(lw_zstd_magic("\x60\x2A\x4D\x18", 4), 0); /* not a skippable frame's */
    assert_int_equal(lw_is_zstd_file(z), 1);
    assert_int_equal(lw_zstd_decompress_file(z, out, n, &err), LW_OK);
    back = hb_read_file(out, &m);
    assert_int_equal(m, n);
    assert_memory_equal(back, d, n);
    free(back);
    free(with);
    free(zd);
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

/* Big-endian u4 at `p`. */
static void put_u4(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* The 31-byte header of an HPROF with 4-byte identifiers. */
#define HPROF_HEADER HB_JVM "\0\0\0\0\4\0\0\0\0\0\0\0\0"
#define HPROF_HEADER_LEN (sizeof HPROF_HEADER - 1)

/* Writes at the start of `f`, which holds `size` zero bytes, an HPROF whose one heap-dump
 * segment is a byte array of zeros to the end: a bomb that is a valid dump. */
static void put_valid_bomb(FILE *f, uint64_t size) {
    uint8_t rec[9 + 14] = {LW_TAG_HEAP_DUMP_SEGMENT};
    put_u4(rec + 5, (uint32_t)(size - HPROF_HEADER_LEN - 9));
    rec[9] = LW_SUB_PRIMITIVE_ARRAY_DUMP;
    put_u4(rec + 9 + 9, (uint32_t)(size - HPROF_HEADER_LEN - sizeof rec));
    rec[9 + 13] = LW_T_BYTE;
    assert_int_equal(fwrite(HPROF_HEADER, 1, HPROF_HEADER_LEN, f), HPROF_HEADER_LEN);
    assert_int_equal(fwrite(rec, 1, sizeof rec, f), sizeof rec);
}

static void test_decompression_bomb_hits_cap_and_output_is_removed(void **state) {
    (void)state;
    char *in = hb_temp_path(".bin"), *z = hb_temp_path(".zst"), *out = hb_temp_path(".out");
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 64 << 20), 0); /* 64 MiB of zeros */
    /* that are a valid HPROF: what lw_heap_open judges as it decompresses passes, the cap stops it */
    put_valid_bomb(f, 64 << 20);
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

/* ---- what is decompressed is judged before it is written --------------------------------- */

typedef struct judged_args {
    const char *path;
    const lw_heap_options *o;
    const char *says; /* the end of the message expected */
} judged_args;

static int open_refused(void *arg) {
    const judged_args *a = arg;
    lw_error err = {0};
    lw_heap *heap = NULL;
    lw_status st = lw_heap_open(&heap, a->path, a->o, &err);
    if (heap) return 2;
    if (st != LW_ERR_FORMAT) {
        fprintf(stderr, "child: %s\n", err.message);
        return 10 + (int)st;
    }
    size_t n = strlen(err.message), k = strlen(a->says);
    if (n < k || strcmp(err.message + n - k, a->says) != 0) {
        fprintf(stderr, "child: %s\n", err.message);
        return 3;
    }
    return 0;
}

/* The plain HPROF at `in` (removed after) is refused by the reader with a message that ends in
 * `says`. Compressed, it is refused as it is decompressed with the same message, by a process
 * that may write at most `written` bytes, and leaves no temp file. */
static void expect_refused_as_decompressed(char *in, const char *says, uint64_t written) {
    char *z = hb_temp_path(".zst");
    lw_error err = {0};
    assert_int_equal(lw_zstd_compress_file(in, z, 3, &err), LW_OK);
    char dir[] = "/tmp/lw-unit-zdir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    lw_heap_options o = {.struct_size = sizeof o, .max_decompressed_bytes = 1ull << 30, .tmp_dir = dir};
    judged_args plain = {in, NULL, says}, packed = {z, &o, says};
    assert_int_equal(open_refused(&plain), 0);
    assert_int_equal(in_child_writing_at_most((rlim_t)written, open_refused, &packed), 0);
    lw_heap *heap = NULL;
    assert_int_equal(lw_heap_open(&heap, z, &o, &err), LW_ERR_FORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s: decompressed content: %s", z, says);
    assert_string_equal(err.message, want);
    assert_int_equal(dir_entries(dir), 0);
    rmdir(dir);
    unlink(in);
    unlink(z);
    free(in);
    free(z);
}

/* A valid header, then zeros: before, the header passed, and the zeros were written out to the
 * cap (LEAKD_MAX_DECOMPRESSED_BYTES: 16 GiB) and read as millions of records of tag 0. */
static void test_heap_open_refuses_zeros_after_a_valid_header_before_writing_them(void **state) {
    (void)state;
    char *in = hb_temp_path(".bin");
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 64 << 20), 0);
    assert_int_equal(fwrite(HPROF_HEADER, 1, HPROF_HEADER_LEN, f), HPROF_HEADER_LEN);
    fclose(f);
    /* the reader's own verdict on the plain file, now given before a byte of it is written */
    expect_refused_as_decompressed(in, "offset 31: unknown record tag 0x00: corrupt or unsupported file", 0);
}

/* A dump corrupt in its middle stops there: what comes before is written, not what follows. */
static void test_heap_open_stops_at_a_bad_subrecord_in_the_middle(void **state) {
    (void)state;
    char *in = hb_temp_path(".bin");
    const uint64_t size = 32 << 20, array = 1 << 20, arrays = 6;
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)size), 0);
    uint8_t rec[9] = {LW_TAG_HEAP_DUMP_SEGMENT};
    put_u4(rec + 5, (uint32_t)(size - HPROF_HEADER_LEN - 9));
    assert_int_equal(fwrite(HPROF_HEADER, 1, HPROF_HEADER_LEN, f), HPROF_HEADER_LEN);
    assert_int_equal(fwrite(rec, 1, 9, f), 9);
    uint64_t at = HPROF_HEADER_LEN + 9;
    for (uint64_t i = 0; i < arrays; i++) { /* byte arrays of zeros, then a sub-record tag 0 */
        uint8_t sub[14] = {LW_SUB_PRIMITIVE_ARRAY_DUMP};
        put_u4(sub + 1, (uint32_t)(i + 1));
        put_u4(sub + 9, (uint32_t)array);
        sub[13] = LW_T_BYTE;
        assert_int_equal(fseek(f, (long)at, SEEK_SET), 0);
        assert_int_equal(fwrite(sub, 1, sizeof sub, f), sizeof sub);
        at += sizeof sub + array;
    }
    fclose(f);
    char says[128];
    snprintf(says, sizeof says, "offset %llu: unknown heap-dump sub-record tag 0x00: corrupt or unsupported file",
             (unsigned long long)at);
    /* no byte past the bad one is written */
    expect_refused_as_decompressed(in, says, at);
}

/* ---- the content's head is judged before any of it is written ---------------------------- */

/* A frame without a content size (legitimate: the zstd CLI reading a pipe writes none) of
 * RLE blocks of zeros: 2 GiB from 64 KiB. lw_heap_open used to write it all to its temp file,
 * up to the cap, before it looked at the header. */
static void test_heap_open_refuses_a_bomb_that_is_no_hprof_before_writing_it(void **state) {
    (void)state;
    char *z = hb_temp_path(".zst");
    FILE *f = fopen(z, "wb");
    assert_non_null(f);
    put_frame(f, UINT64_MAX, 0, 2ull << 30);
    fclose(f);
    char dir[] = "/tmp/lw-unit-zdir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    lw_heap_options o = {.struct_size = sizeof o, .max_decompressed_bytes = 1ull << 30, .tmp_dir = dir};
    judged_args a = {z, &o, ": decompressed content: offset 0: not an HPROF heap dump (header \"\")"};
    /* in a child that may write no byte to a file (before: "File too large", an IO error) */
    assert_int_equal(in_child_writing_at_most(0, open_refused, &a), 0);
    assert_int_equal(dir_entries(dir), 0);
    /* the format error, not the cap's, and the message says whose content it is */
    lw_error err = {0};
    lw_heap *heap = NULL;
    assert_int_equal(lw_heap_open(&heap, z, &o, &err), LW_ERR_FORMAT);
    assert_null(heap);
    assert_int_equal(err.status, LW_ERR_FORMAT);
    assert_true(strncmp(err.message, z, strlen(z)) == 0);
    assert_string_equal(err.message + strlen(z),
                        ": decompressed content: offset 0: not an HPROF heap dump (header \"\")");
    assert_int_equal(dir_entries(dir), 0);
    /* other content: quoted as for a plain file; an HPROF of another version: named */
    static const struct {
        const char *content;
        const char *says;
    } cases[] = {
        {"PK\3\4 a zip file", "not an HPROF heap dump (header \"PK?? a zip file\")"},
        {"JAVA PROFILE 1.0.9", "unsupported HPROF version \"JAVA PROFILE 1.0.9\""},
        {"", "empty file: not an HPROF heap dump"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *plain = hb_temp_path(".bin");
        write_file(plain, cases[i].content, strlen(cases[i].content) + (i < 2)); /* the NUL too */
        assert_int_equal(lw_zstd_compress_file(plain, z, 3, &err), LW_OK);
        assert_int_equal(lw_heap_open(&heap, z, &o, &err), LW_ERR_FORMAT);
        if (!strstr(err.message, "decompressed content: offset 0: ") || !strstr(err.message, cases[i].says))
            fail_msg("case %zu: %s", i, err.message);
        assert_int_equal(dir_entries(dir), 0);
        unlink(plain);
        free(plain);
    }
    rmdir(dir);
    unlink(z);
    free(z);
}

/* A real dump compressed without a content size, and one whose head is spread over frames of
 * 1, 5 and 20 bytes (each stating its size): both open as the plain file does. */
static void test_hprof_without_content_size_or_with_its_head_over_frames_opens(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    uint64_t h = hb_class(b, "Holder", NULL, NULL, "x:O");
    hb_class(b, "Leak", NULL, NULL, NULL);
    uint64_t l = hb_instance(b, "Leak");
    hb_set_static(b, h, "x", l);
    hb_watch(b, l, "k", "d", 1);
    for (int i = 0; i < 100; i++) hb_jstring(b, "some string content to compress");
    char *plain = hb_write_temp(b);
    char *z = hb_temp_path(".zst");
    size_t n;
    uint8_t *d = hb_read_file(plain, &n);
    assert_true(n > 200);
    char dir[] = "/tmp/lw-unit-zdir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    lw_heap_options o = {.struct_size = sizeof o, .tmp_dir = dir};
    lw_error err = {0};
    lw_heap *hp = NULL;
    assert_int_equal(lw_heap_open(&hp, plain, NULL, &err), LW_OK);
    lw_heap_summary sp;
    lw_heap_get_summary(hp, &sp);
    lw_heap_free(hp);
    for (int round = 0; round < 2; round++) {
        if (round == 0) {
            assert_int_equal(lw_zstd_compress_file(plain, z, 3, &err), LW_OK);
            size_t zn;
            uint8_t *zd = hb_read_file(z, &zn);
            assert_true(ZSTD_getFrameContentSize(zd, zn) == ZSTD_CONTENTSIZE_UNKNOWN);
            free(zd);
        } else {
            FILE *f = fopen(z, "wb");
            assert_non_null(f);
            size_t pieces[] = {1, 5, 20, n - 26}, at = 0;
            for (size_t i = 0; i < 4; i++) {
                size_t cap = ZSTD_compressBound(pieces[i]);
                void *out = malloc(cap);
                size_t zn = ZSTD_compress(out, cap, d + at, pieces[i], 3);
                assert_false(ZSTD_isError(zn));
                assert_int_equal(fwrite(out, 1, zn, f), zn);
                free(out);
                at += pieces[i];
            }
            fclose(f);
        }
        lw_heap *hz = NULL;
        if (lw_heap_open(&hz, z, &o, &err) != LW_OK) fail_msg("round %d: %s", round, err.message);
        lw_heap_summary sz;
        lw_heap_get_summary(hz, &sz);
        assert_int_equal(sp.file_bytes, sz.file_bytes);
        assert_int_equal(sp.records, sz.records);
        assert_int_equal(sp.instances, sz.instances);
        lw_heap_free(hz);
        assert_int_equal(dir_entries(dir), 0);
    }
    rmdir(dir);
    unlink(plain);
    unlink(z);
    free(plain);
    free(z);
    free(d);
    hb_free(b);
}

/* The head check of the internal entry: called once, on exactly head_len bytes however the
 * frames split them, or on the whole content when it is shorter; a refusal writes nothing. */
static uint8_t seen[LW__ZSTD_HEAD_MAX];
static size_t seen_n;
static int seen_calls;
static lw_status record_head(const uint8_t *head, size_t n, lw_error *err) {
    memcpy(seen, head, n);
    seen_n = n;
    seen_calls++;
    return seen[0] == 'y' ? LW_OK : lw__fail(err, LW_ERR_FORMAT, "not mine (%zu bytes)", n);
}

static void test_head_check_sees_the_first_bytes_once(void **state) {
    (void)state;
    char *z = hb_temp_path(".zst"), *out = hb_temp_path(".out");
    static const char content[] = "yes, this content is 48 bytes long, as it says.";
    lw_error err = {0};
    const size_t lens[] = {10, 48, 64}; /* the head: shorter than, as long as, longer than the content */
    for (size_t k = 0; k < 3; k++) {
        for (int refuse = 0; refuse < 2; refuse++) {
            char c[sizeof content];
            memcpy(c, content, sizeof content);
            if (refuse) c[0] = 'n';
            FILE *f = fopen(z, "wb");
            size_t pieces[] = {1, 2, 45}, at = 0;
            for (size_t i = 0; i < 3; i++) {
                uint8_t fr[128];
                size_t zn = ZSTD_compress(fr, sizeof fr, c + at, pieces[i], 1);
                assert_false(ZSTD_isError(zn));
                assert_int_equal(fwrite(fr, 1, zn, f), zn);
                at += pieces[i];
            }
            fclose(f);
            seen_calls = 0;
            lw_status st = lw__zstd_decompress_file_checked(z, out, 1 << 20, &(lw__zstd_checks){record_head, lens[k], NULL, NULL}, &err);
            assert_int_equal(seen_calls, 1);
            size_t want = lens[k] < 48 ? lens[k] : 48;
            assert_int_equal(seen_n, want);
            assert_memory_equal(seen, c, want);
            if (refuse) {
                assert_int_equal(st, LW_ERR_FORMAT);
                char msg[256];
                snprintf(msg, sizeof msg, "%s: decompressed content: not mine (%zu bytes)", z, want);
                assert_string_equal(err.message, msg);
                assert_false(exists(out));
            } else {
                assert_int_equal(st, LW_OK);
                size_t m;
                uint8_t *back = hb_read_file(out, &m);
                assert_int_equal(m, 48);
                assert_memory_equal(back, c, 48);
                free(back);
            }
        }
    }
    /* empty content: judged as empty */
    write_file(out, "", 0);
    assert_int_equal(lw_zstd_compress_file(out, z, 3, &err), LW_OK);
    seen_calls = 0;
    assert_int_equal(lw__zstd_decompress_file_checked(z, out, 1 << 20, &(lw__zstd_checks){record_head, 8, NULL, NULL}, &err), LW_ERR_FORMAT);
    assert_int_equal(seen_calls, 1);
    assert_int_equal(seen_n, 0);
    assert_false(exists(out));
    assert_int_equal(lw__zstd_decompress_file_checked(z, out, 1 << 20, &(lw__zstd_checks){record_head, LW__ZSTD_HEAD_MAX + 1, NULL, NULL}, &err),
                     LW_ERR_USAGE);
    unlink(z);
    free(z);
    free(out);
}

/* ---- a frame that decodes to more than it states --------------------------------------- */

typedef struct liar_args {
    const char *z, *out;
} liar_args;

static int decompress_liar(void *arg) {
    const liar_args *a = arg;
    lw_error err = {0};
    lw_status st = lw_zstd_decompress_file(a->z, a->out, 1ull << 40, &err);
    if (st != LW_ERR_FORMAT) fprintf(stderr, "child: %s\n", err.message);
    if (st != LW_ERR_FORMAT) return 10 + (int)st;
    if (!strstr(err.message, "zstd data corrupt: a frame decodes to more than the 1048576 bytes its header states"))
        return 3;
    return exists(a->out) ? 4 : 0;
}

/* zstd compares a frame's output with the size its header states only at the frame's end (a
 * window smaller than that size leaves the rest unchecked): stop at the first byte past it.
 * The lying frame follows an honest one, its header across two reads of the input. */
static void test_frame_that_decodes_past_its_stated_size_stops_there(void **state) {
    (void)state;
    char *z = hb_temp_path(".zst"), *out = hb_temp_path(".out");
    size_t raw = ZSTD_DStreamInSize() - 7 - 14 - 3; /* the next frame's 14-byte header: 7 bytes in each read */
    assert_true(raw <= 128 * 1024);
    FILE *f = fopen(z, "wb");
    assert_non_null(f);
    put_frame(f, raw, raw, 0);
    put_frame(f, 1 << 20, 0, 64 << 20); /* states 1 MiB, holds 64 */
    fclose(f);
    liar_args a = {z, out};
    /* before: 65 MiB written ("File too large" past 2 MiB), then "Data corruption detected" */
    assert_int_equal(in_child_writing_at_most(2 << 20, decompress_liar, &a), 0);
    /* the honest frames decode */
    f = fopen(z, "wb");
    assert_non_null(f);
    put_frame(f, raw, raw, 0);
    put_frame(f, 1 << 20, 0, 1 << 20);
    put_frame(f, UINT64_MAX, 0, 1 << 20);
    fclose(f);
    lw_error err = {0};
    assert_int_equal(lw_zstd_decompress_file(z, out, 1ull << 40, &err), LW_OK);
    struct stat sb;
    assert_int_equal(stat(out, &sb), 0);
    assert_int_equal(sb.st_size, raw + (2 << 20));
    unlink(z);
    unlink(out);
    free(z);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compress_decompress_round_trip),
        cmocka_unit_test(test_decompression_bomb_hits_cap_and_output_is_removed),
        cmocka_unit_test(test_truncated_and_corrupt_zstd_are_format_errors),
        cmocka_unit_test(test_window_over_the_memory_limit_is_nomem),
        cmocka_unit_test(test_heap_open_reads_a_zstd_dump_like_the_plain_one),
        cmocka_unit_test(test_heap_open_refuses_a_bomb_that_is_no_hprof_before_writing_it),
        cmocka_unit_test(test_hprof_without_content_size_or_with_its_head_over_frames_opens),
        cmocka_unit_test(test_head_check_sees_the_first_bytes_once),
        cmocka_unit_test(test_heap_open_refuses_zeros_after_a_valid_header_before_writing_them),
        cmocka_unit_test(test_heap_open_stops_at_a_bad_subrecord_in_the_middle),
        cmocka_unit_test(test_frame_that_decodes_past_its_stated_size_stops_there),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
