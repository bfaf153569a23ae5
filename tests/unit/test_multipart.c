/* test_multipart.c — the streaming multipart/form-data parser: the same callbacks and bytes
 * whatever the chunking, delimiter look-alikes kept as data, every limit and malformation
 * refused with a message, callback stops, and a 64 MiB part streamed through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "multipart.h"

/* ---- a recorder: every callback appended to one byte log ------------------------------ */

/* Events are written as "\x01B" name "\x01" type "\x01", "\x01D" (once per run of data; the
 * bytes follow, \x01 and \x02 escaped with \x02) and "\x01E", so a log does not depend on how
 * the data was chunked. */
typedef struct rec {
    char *log;
    size_t len, cap;
    int in_data;
    int begins, ends;
    uint64_t data_bytes;
    int stop_begin, stop_data, stop_end; /* return this from the nth... see below */
    int stop_value;
} rec;

static void put(rec *r, const void *s, size_t n) {
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->len + n + 1) cap *= 2;
        r->log = realloc(r->log, cap);
        assert_non_null(r->log);
        r->cap = cap;
    }
    memcpy(r->log + r->len, s, n);
    r->len += n;
    r->log[r->len] = '\0';
}

static void puts_(rec *r, const char *s) { put(r, s, strlen(s)); }

static int on_begin(void *user, const char *name, const char *ct) {
    rec *r = user;
    r->in_data = 0;
    r->begins++;
    puts_(r, "\x01" "B");
    puts_(r, name);
    puts_(r, "\x01");
    puts_(r, ct);
    puts_(r, "\x01");
    return r->stop_begin && r->begins == r->stop_begin ? r->stop_value : 0;
}

static int on_data(void *user, const void *data, size_t len) {
    rec *r = user;
    assert_true(len > 0);
    assert_true(r->begins == r->ends + 1); /* only inside a part */
    if (!r->in_data) puts_(r, "\x01" "D");
    r->in_data = 1;
    const unsigned char *d = data;
    for (size_t i = 0; i < len; i++) {
        if (d[i] == 1 || d[i] == 2) put(r, "\x02", 1);
        put(r, d + i, 1);
    }
    r->data_bytes += len;
    return r->stop_data && r->data_bytes >= (uint64_t)r->stop_data ? r->stop_value : 0;
}

static int on_end(void *user) {
    rec *r = user;
    r->in_data = 0;
    r->ends++;
    puts_(r, "\x01" "E");
    return r->stop_end && r->ends == r->stop_end ? r->stop_value : 0;
}

static const ld_mp_callbacks k_cb = {on_begin, on_data, on_end};

/* The log that a list of parts gives: "name", "type", data, length, ... NULL. */
static void expect_part(rec *r, const char *name, const char *ct, const void *data, size_t len) {
    rec tmp = {0};
    on_begin(&tmp, name, ct);
    if (len) on_data(&tmp, data, len);
    on_end(&tmp);
    put(r, tmp.log, tmp.len);
    free(tmp.log);
}

/* The outcome of one parse. */
typedef struct outcome {
    int feed_rc, finish_rc;
    size_t parts;
    char err[256];
    rec r;
} outcome;

static void outcome_free(outcome *o) { free(o->r.log); }

/* Parses `body` fed in the pieces that `cuts` (ascending offsets, ncuts of them) make. */
static void parse_cuts(const char *boundary, const ld_mp_limits *lim, const void *body, size_t len,
                       const size_t *cuts, size_t ncuts, const rec *proto, outcome *o) {
    memset(o, 0, sizeof *o);
    if (proto) o->r = *proto;
    o->r.log = NULL, o->r.len = o->r.cap = 0;
    ld_mp *p = ld_mp_new(boundary, lim, &k_cb, &o->r);
    assert_non_null(p);
    const char *b = body;
    size_t at = 0;
    for (size_t c = 0; c <= ncuts && o->feed_rc == 0; c++) {
        size_t to = c < ncuts ? cuts[c] : len;
        o->feed_rc = ld_mp_feed(p, b + at, to - at);
        at = to;
    }
    o->finish_rc = ld_mp_finish(p);
    o->parts = ld_mp_parts(p);
    snprintf(o->err, sizeof o->err, "%s", ld_mp_error(p));
    ld_mp_free(p);
    if (!o->r.log) puts_(&o->r, "");
}

static void parse_chunked(const char *boundary, const ld_mp_limits *lim, const void *body, size_t len,
                          size_t chunk, const rec *proto, outcome *o) {
    size_t n = chunk && len ? (len - 1) / chunk : 0;
    size_t *cuts = calloc(n + 1, sizeof *cuts);
    assert_non_null(cuts);
    for (size_t i = 0; i < n; i++) cuts[i] = (i + 1) * chunk;
    parse_cuts(boundary, lim, body, len, cuts, n, proto, o);
    free(cuts);
}

static void parse_whole(const char *boundary, const ld_mp_limits *lim, const void *body, size_t len, outcome *o) {
    parse_cuts(boundary, lim, body, len, NULL, 0, NULL, o);
}

static void assert_same(const outcome *a, const outcome *b) {
    assert_int_equal(a->feed_rc, b->feed_rc);
    assert_int_equal(a->finish_rc, b->finish_rc);
    assert_int_equal(a->parts, b->parts);
    assert_string_equal(a->err, b->err);
    assert_int_equal(a->r.len, b->r.len);
    assert_memory_equal(a->r.log, b->r.log, a->r.len);
}

/* Parses `body` whole, one byte at a time, split at every point, in several fixed chunk
 * sizes and at every pair of split points (short bodies): all must agree. Returns the whole
 * parse in *o. */
static void parse_every_way(const char *boundary, const ld_mp_limits *lim, const void *body, size_t len, outcome *o) {
    parse_whole(boundary, lim, body, len, o);
    outcome x;
    parse_chunked(boundary, lim, body, len, 1, NULL, &x);
    assert_same(o, &x);
    outcome_free(&x);
    static const size_t sizes[] = {2, 3, 5, 7, 13, 64, 4096};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        parse_chunked(boundary, lim, body, len, sizes[s], NULL, &x);
        assert_same(o, &x);
        outcome_free(&x);
    }
    for (size_t c = 0; c <= len; c++) {
        parse_cuts(boundary, lim, body, len, &c, 1, NULL, &x);
        assert_same(o, &x);
        outcome_free(&x);
    }
    if (len <= 400) {
        for (size_t c1 = 0; c1 <= len; c1++)
            for (size_t c2 = c1; c2 <= len; c2++) {
                size_t cuts[2] = {c1, c2};
                parse_cuts(boundary, lim, body, len, cuts, 2, NULL, &x);
                assert_same(o, &x);
                outcome_free(&x);
            }
    }
}

#define CD_X "Content-Disposition: form-data; name=x\r\n"

/* ---- well-formed bodies ---------------------------------------------------------------- */

static const char k_meta[] = "{\"report_id\":\"0b6f3c1e-2d4a-4c43-9a51-7c1f0e2b3a4d\",\"mode\":\"heap\"}";

static void test_well_formed_any_chunking(void **state) {
    (void)state;
    unsigned char heap[300];
    for (size_t i = 0; i < sizeof heap; i++) heap[i] = (unsigned char)(i * 37 + 11);
    heap[5] = '\r', heap[6] = '\n', heap[7] = '-', heap[8] = '-'; /* a partial delimiter */
    char body[1024];
    int n = snprintf(body, sizeof body,
                     "--XyZ-b0und.ary\r\n"
                     "Content-Disposition: form-data; name=\"meta\"\r\n"
                     "Content-Type: application/json\r\n"
                     "\r\n%s\r\n"
                     "--XyZ-b0und.ary\r\n"
                     "content-disposition: form-data; name=heap; filename=\"h.hprof.zst\"\r\n"
                     "CONTENT-TYPE: Application/ZSTD\r\n"
                     "\r\n",
                     k_meta);
    size_t len = (size_t)n;
    memcpy(body + len, heap, sizeof heap);
    len += sizeof heap;
    const char *tail = "\r\n--XyZ-b0und.ary--\r\nepilogue, ignored\r\n--XyZ-b0und.ary\r\n";
    memcpy(body + len, tail, strlen(tail));
    len += strlen(tail);

    rec want = {0};
    expect_part(&want, "meta", "application/json", k_meta, strlen(k_meta));
    expect_part(&want, "heap", "application/zstd", heap, sizeof heap);

    outcome o;
    parse_every_way("XyZ-b0und.ary", NULL, body, len, &o);
    assert_int_equal(o.feed_rc, 0);
    assert_int_equal(o.finish_rc, 0);
    assert_int_equal(o.parts, 2);
    assert_string_equal(o.err, "");
    assert_int_equal(o.r.len, want.len);
    assert_memory_equal(o.r.log, want.log, want.len);
    outcome_free(&o);
    free(want.log);
}

/* A short body, checked at every pair of split points too. */
static void test_small_body_every_pair_of_splits(void **state) {
    (void)state;
    const char *ok = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b\r\n"
                     "Content-Disposition: form-data; name=\"\\\"q\\\\\"\r\nContent-Type: Text/Plain ; charset=utf-8\r\n\r\n"
                     "\r\n--b--";
    rec w2 = {0};
    expect_part(&w2, "a", "", "x", 1);
    expect_part(&w2, "\"q\\", "text/plain", NULL, 0);
    outcome o;
    parse_every_way("b", NULL, ok, strlen(ok), &o);
    assert_int_equal(o.finish_rc, 0);
    assert_int_equal(o.r.len, w2.len);
    assert_memory_equal(o.r.log, w2.log, w2.len);
    outcome_free(&o);
    free(w2.log);

    /* A delimiter right after the header block ends an empty part; the headers of the next
     * part then never end. */
    const char *body = "preamble\r\n--b\r\n" CD_X "\r\n\r\n--b\r\n--b--";
    parse_every_way("b", NULL, body, strlen(body), &o);
    assert_int_equal(o.feed_rc, 0);
    assert_int_equal(o.finish_rc, LD_MP_ERROR);
    assert_int_equal(o.r.begins, 1);
    assert_int_equal(o.r.ends, 1);
    assert_string_equal(o.err, "body ends inside a part's headers at byte 69");
    outcome_free(&o);
}

/* Data that contains the delimiter's prefix, or the whole delimiter not followed by CRLF
 * or "--", is data. */
static void test_boundary_lookalikes_are_data(void **state) {
    (void)state;
    static const char *const datas[] = {
        "--XyZ",                      /* no CRLF before */
        "a\r\n--XyZa",                /* followed by a boundary char */
        "\r\n--XyZ-x",                /* one dash */
        "\r\n--XyZ \tq",              /* padding, then not CR */
        "\r\n--XyZ\rq",               /* CR without LF */
        "\r\n--XyZ\r",                /* CR then the real delimiter's CR */
        "\r\n--XyZ  \r",              /* padding, CR, then the real delimiter */
        "\r\n--Xy",                   /* a partial delimiter */
        "\r\n-",                      /* a shorter one */
        "\r\r\r\n\r\n-\r\n--\r\n--X", /* CRs and restarts */
        "\r\n--XyZX\r\n--XyZ-",       /* twice */
        "\r\n--xyz\r\n",              /* the boundary is case-sensitive */
        "\r",
        "\n",
        "",
    };
    for (size_t t = 0; t < sizeof datas / sizeof *datas; t++) {
        const char *data = datas[t];
        char body[256];
        int n = snprintf(body, sizeof body,
                         "--XyZ\r\nContent-Disposition: form-data; name=d\r\n\r\n%s\r\n--XyZ--", data);
        rec want = {0};
        expect_part(&want, "d", "", data, strlen(data));
        outcome o;
        parse_every_way("XyZ", NULL, body, (size_t)n, &o);
        assert_int_equal(o.feed_rc, 0);
        assert_int_equal(o.finish_rc, 0);
        assert_int_equal(o.r.len, want.len);
        assert_memory_equal(o.r.log, want.log, want.len);
        outcome_free(&o);
        free(want.log);
    }
}

static void test_binary_data(void **state) {
    (void)state;
    unsigned char data[1024];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)i; /* every byte, NULs, CR, LF */
    static const char look[] = "\r\n--bin\r\x00\r\n--bi\n\r\n--bin-x\r\n--bin\t-";
    memcpy(data + 600, look, sizeof look - 1);
    const char *head = "--bin\r\nContent-Disposition: form-data; name=\"heap\"\r\nContent-Type: application/zstd\r\n\r\n";
    const char *tail = "\r\n--bin--\r\n";
    size_t len = strlen(head) + sizeof data + strlen(tail);
    char *body = malloc(len);
    assert_non_null(body);
    memcpy(body, head, strlen(head));
    memcpy(body + strlen(head), data, sizeof data);
    memcpy(body + strlen(head) + sizeof data, tail, strlen(tail));
    rec want = {0};
    expect_part(&want, "heap", "application/zstd", data, sizeof data);
    outcome o;
    parse_every_way("bin", NULL, body, len, &o);
    assert_int_equal(o.finish_rc, 0);
    assert_int_equal(o.r.len, want.len);
    assert_memory_equal(o.r.log, want.log, want.len);
    assert_int_equal(o.r.data_bytes, sizeof data);
    outcome_free(&o);
    free(want.log);
    free(body);
}

static void test_preamble_padding_epilogue(void **state) {
    (void)state;
    const char *body = "This is the preamble. --b is not it, nor \r\n--bb.\r\n"
                       "--b \t \r\nContent-Disposition: form-data; name=x\r\nX-Other: whatever; \"q\r\n\r\nv\r\n"
                       "--b--  \r\nanything\r\n--b\r\ngarbage";
    rec want = {0};
    expect_part(&want, "x", "", "v", 1);
    outcome o;
    parse_every_way("b", NULL, body, strlen(body), &o);
    assert_int_equal(o.finish_rc, 0);
    assert_int_equal(o.parts, 1);
    assert_int_equal(o.r.len, want.len);
    assert_memory_equal(o.r.log, want.log, want.len);
    outcome_free(&o);
    free(want.log);

    /* A preamble of exactly the limit is fine, one byte more is not. */
    ld_mp_limits lim = {0, 0, 10};
    const char *at_limit = "0123456789\r\n--b\r\nContent-Disposition: form-data; name=x\r\n\r\n\r\n--b--";
    parse_every_way("b", &lim, at_limit, strlen(at_limit), &o);
    assert_int_equal(o.finish_rc, 0);
    outcome_free(&o);
    const char *over = "0123456789A\r\n--b\r\nContent-Disposition: form-data; name=x\r\n\r\n\r\n--b--";
    parse_every_way("b", &lim, over, strlen(over), &o);
    assert_int_equal(o.feed_rc, LD_MP_ERROR);
    assert_string_equal(o.err, "no delimiter of the Content-Type's boundary in the first 10 bytes at byte 10");
    outcome_free(&o);
    /* Default limit: 1 KiB of preamble without any boundary. */
    char big[2000];
    memset(big, 'p', sizeof big);
    parse_whole("b", NULL, big, sizeof big, &o);
    assert_int_equal(o.feed_rc, LD_MP_ERROR);
    assert_string_equal(o.err, "no delimiter of the Content-Type's boundary in the first 1024 bytes at byte 1024");
    outcome_free(&o);

    /* Padding over the limit. */
    char pad[128];
    snprintf(pad, sizeof pad, "--b%40s\r\nContent-Disposition: form-data; name=x\r\n\r\n\r\n--b--", "");
    parse_every_way("b", NULL, pad, strlen(pad), &o);
    assert_int_equal(o.feed_rc, LD_MP_ERROR);
    assert_string_equal(o.err, "transport padding longer than 32 bytes at byte 35");
    outcome_free(&o);
}

/* ---- malformed bodies and limits --------------------------------------------------------- */

static void expect_error(const char *boundary, const ld_mp_limits *lim, const char *body, int at_finish,
                         const char *msg) {
    outcome o;
    parse_every_way(boundary, lim, body, strlen(body), &o);
    if (at_finish) {
        assert_int_equal(o.feed_rc, 0);
        assert_int_equal(o.finish_rc, LD_MP_ERROR);
    } else {
        assert_int_equal(o.feed_rc, LD_MP_ERROR);
        assert_int_equal(o.finish_rc, LD_MP_ERROR); /* sticky */
    }
    assert_string_equal(o.err, msg);
    outcome_free(&o);
}

static void test_missing_close_delimiter(void **state) {
    (void)state;
    expect_error("b", NULL, "--b\r\n" CD_X "\r\ndata", 1, "body ends inside a part (no close delimiter) at byte 51");
    expect_error("b", NULL, "--b\r\n" CD_X "\r\ndata\r\n--b", 1, "body ends inside a boundary line at byte 56");
    expect_error("b", NULL, "--b\r\n" CD_X "\r\ndata\r\n--", 1, "body ends inside a part (no close delimiter) at byte 55");
    expect_error("b", NULL, "--b\r\n" CD_X "\r\ndata\r\n--b-", 1, "body ends inside a boundary line at byte 57");
    expect_error("b", NULL, "--b\r\n" CD_X "\r\ndata\r\n--b\r\n", 1, "body ends inside a part's headers at byte 58");
    expect_error("b", NULL, "--b\r\n" CD_X, 1, "body ends inside a part's headers at byte 45");
    expect_error("b", NULL, "", 1, "body ends before the first boundary at byte 0");
    expect_error("b", NULL, "no boundary at all", 1, "body ends before the first boundary at byte 18");
    expect_error("b", NULL, "--b--\r\n", 0, "close delimiter before any part at byte 4");
    expect_error("b", NULL, "--b\r\n", 1, "body ends inside a part's headers at byte 5");
}

static void test_header_too_long(void **state) {
    (void)state;
    ld_mp_limits lim = {64, 0, 0};
    /* 64 bytes of header block exactly: accepted. */
    char body[512];
    snprintf(body, sizeof body, "--b\r\n" CD_X "X-Pad: %*s\r\n\r\n\r\n--b--", 64 - 40 - 9 - 2, "y");
    outcome o;
    parse_every_way("b", &lim, body, strlen(body), &o);
    assert_int_equal(o.finish_rc, 0);
    outcome_free(&o);
    snprintf(body, sizeof body, "--b\r\n" CD_X "X-Pad: %*s\r\n\r\n\r\n--b--", 64 - 40 - 9 - 1, "y");
    expect_error("b", &lim, body, 0, "part header block longer than 64 bytes at byte 69");
    /* Default 8 KiB. */
    char *big = malloc(20000);
    assert_non_null(big);
    int n = snprintf(big, 20000, "--b\r\n" CD_X "X-Pad: ");
    memset(big + n, 'z', 9000);
    strcpy(big + n + 9000, "\r\n\r\n--b--");
    parse_whole("b", NULL, big, strlen(big), &o);
    assert_int_equal(o.feed_rc, LD_MP_ERROR);
    assert_string_equal(o.err, "part header block longer than 8192 bytes at byte 8197");
    outcome_free(&o);
    free(big);
}

static void test_too_many_parts(void **state) {
    (void)state;
    ld_mp_limits lim = {0, 2, 0};
    const char *two = "--b\r\n" CD_X "\r\n1\r\n--b\r\n" CD_X "\r\n2\r\n--b--";
    outcome o;
    parse_every_way("b", &lim, two, strlen(two), &o);
    assert_int_equal(o.finish_rc, 0);
    assert_int_equal(o.parts, 2);
    outcome_free(&o);
    expect_error("b", &lim, "--b\r\n" CD_X "\r\n1\r\n--b\r\n" CD_X "\r\n2\r\n--b\r\n" CD_X "\r\n3\r\n--b--", 0,
                 "more than 2 parts at byte 104");
    /* The default: 8. */
    char body[4096];
    size_t len = 0;
    for (int i = 0; i < 9; i++) len += (size_t)snprintf(body + len, sizeof body - len, "--b\r\n" CD_X "\r\n%d\r\n", i);
    snprintf(body + len, sizeof body - len, "--b--");
    parse_whole("b", NULL, body, strlen(body), &o);
    assert_int_equal(o.feed_rc, LD_MP_ERROR);
    assert_int_equal(o.parts, 8);
    assert_int_equal(o.r.ends, 8);
    assert_non_null(strstr(o.err, "more than 8 parts"));
    outcome_free(&o);
}

static void test_bad_headers(void **state) {
    (void)state;
    expect_error("b", NULL, "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--", 0, "part without Content-Disposition at byte 5");
    expect_error("b", NULL, "--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--", 0, "part without a name at byte 5");
    expect_error("b", NULL, "--b\r\nContent-Disposition: form-data; filename=\"a\"\r\n\r\nx\r\n--b--", 0,
                 "part without a name at byte 5");
    expect_error("b", NULL, "--b\r\nContent-Disposition: form-data; name=\"\"\r\n\r\nx\r\n--b--", 0, "empty part name at byte 5");
    expect_error("b", NULL, "--b\r\nContent-Disposition: attachment; name=x\r\n\r\nx\r\n--b--", 0,
                 "Content-Disposition is not form-data at byte 5");
    expect_error("b", NULL, "--b\r\nContent-Disposition: form-data; name=x; name=y\r\n\r\nx\r\n--b--", 0,
                 "two name parameters in Content-Disposition at byte 5");
    expect_error("b", NULL, "--b\r\nContent-Disposition: form-data; name=\"x\r\n\r\nx\r\n--b--", 0,
                 "malformed Content-Disposition at byte 5");
    expect_error("b", NULL, "--b\r\nContent-Disposition: form-data; name=\r\n\r\nx\r\n--b--", 0,
                 "malformed Content-Disposition at byte 5");
    expect_error("b", NULL, "--b\r\nContent-Disposition: form-data name=x\r\n\r\nx\r\n--b--", 0,
                 "malformed Content-Disposition at byte 5");
    expect_error("b", NULL, "--b\r\n" CD_X CD_X "\r\nx\r\n--b--", 0, "two Content-Disposition headers in one part at byte 45");
    expect_error("b", NULL, "--b\r\n" CD_X "Content-Type: text/plain\r\ncontent-type: text/plain\r\n\r\nx\r\n--b--", 0,
                 "two Content-Type headers in one part at byte 71");
    expect_error("b", NULL, "--b\r\n" CD_X "Content-Type: text\r\n\r\nx\r\n--b--", 0, "malformed Content-Type at byte 45");
    expect_error("b", NULL, "--b\r\n" CD_X "Content-Type: text/plain junk\r\n\r\nx\r\n--b--", 0,
                 "malformed Content-Type at byte 45");
    expect_error("b", NULL, "--b\r\n" CD_X "X-Folded: a\r\n b\r\n\r\nx\r\n--b--", 0, "folded part header line at byte 58");
    expect_error("b", NULL, "--b\r\n" CD_X "X-Bare: lf\n\r\nx\r\n--b--", 0, "part header line not ended by CRLF at byte 55");
    expect_error("b", NULL, "--b\r\n" CD_X "\n\r\nx\r\n--b--", 0, "part header line not ended by CRLF at byte 45");
    expect_error("b", NULL, "--b\r\n" CD_X "No colon\r\n\r\nx\r\n--b--", 0, "malformed part header line at byte 45");
    expect_error("b", NULL, "--b\r\n" CD_X "Bad name: x\r\n\r\nx\r\n--b--", 0, "malformed part header line at byte 45");
    expect_error("b", NULL, "--b\r\n" CD_X "X-CR: a\rb\r\n\r\nx\r\n--b--", 0, "control character in part header at byte 52");
    /* A NUL in a header (also inside a quoted name) is a control character. */
    const char nul[] = "--b\r\nContent-Disposition: form-data; name=\"a\0b\"\r\n\r\nx\r\n--b--";
    outcome o;
    parse_every_way("b", NULL, nul, sizeof nul - 1, &o);
    assert_int_equal(o.feed_rc, LD_MP_ERROR);
    assert_string_equal(o.err, "control character in part header at byte 44");
    outcome_free(&o);
    /* Unknown parameters, other headers and spacing are tolerated. */
    const char *lax = "--b\r\nX-Unknown:\r\ncontent-DISPOSITION:form-data ;  NAME = \"m\\eta\" ; size=3;\r\n"
                      "Content-Transfer-Encoding: binary\r\nContent-Type:APPLICATION/json;charset=\"x\"\r\n\r\n{}\r\n--b--";
    rec want = {0};
    expect_part(&want, "meta", "application/json", "{}", 2);
    parse_every_way("b", NULL, lax, strlen(lax), &o);
    assert_int_equal(o.finish_rc, 0);
    assert_int_equal(o.r.len, want.len);
    assert_memory_equal(o.r.log, want.log, want.len);
    outcome_free(&o);
    free(want.log);
}

/* ---- ld_mp_boundary / ld_mp_new ---------------------------------------------------------- */

static void test_boundary_from_content_type(void **state) {
    (void)state;
    char out[LD_MP_BOUNDARY_CAP];
    static const struct {
        const char *ct, *want;
    } ok[] = {
        {"multipart/form-data; boundary=xyz", "xyz"},
        {"Multipart/Form-Data; BOUNDARY=xyz", "xyz"},
        {"multipart/form-data;boundary=\"a b:c\"", "a b:c"},
        {"multipart/form-data; boundary=\"q\\\"x\"", NULL}, /* '"' is not a bchar */
        {"  multipart/form-data ; charset=utf-8; boundary = \"----WebKitFormBoundary7MA4YWxkTrZu0gW\" ",
         "----WebKitFormBoundary7MA4YWxkTrZu0gW"},
        {"multipart/form-data; boundary=a/b=c?d", "a/b=c?d"},
        {"multipart/form-data; boundary=\"\\a\\b\"", "ab"},
        {"multipart/form-data; boundary=------------------------d74496d66958873e", "------------------------d74496d66958873e"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        int rc = ld_mp_boundary(ok[i].ct, out, sizeof out);
        if (ok[i].want) {
            assert_int_equal(rc, 0);
            assert_string_equal(out, ok[i].want);
        } else {
            assert_int_equal(rc, -1);
            assert_string_equal(out, "");
        }
    }
    char b70[71], ct[128];
    memset(b70, 'a', 70);
    b70[70] = '\0';
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%s", b70);
    assert_int_equal(ld_mp_boundary(ct, out, sizeof out), 0);
    assert_string_equal(out, b70);
    assert_int_equal(ld_mp_boundary(ct, out, 70), -1); /* cap too small */
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%sa", b70);
    assert_int_equal(ld_mp_boundary(ct, out, sizeof out), -1); /* 71 chars */

    static const char *const bad[] = {
        "multipart/mixed; boundary=xyz",
        "text/plain; boundary=xyz",
        "multipart/form-datax; boundary=xyz",
        "multipart/form-data",
        "multipart/form-data;",
        "multipart/form-data; boundary=",
        "multipart/form-data; boundary=\"\"",
        "multipart/form-data; boundary=\"ends in space \"",
        "multipart/form-data; boundary=\"unterminated",
        "multipart/form-data; boundary=a; boundary=b",
        "multipart/form-data; boundary=a b",
        "multipart/form-data; boundary=x\x01y",
        "multipart/form-data boundary=x",
        "multipart/form-data; =x",
        "multipart; boundary=x",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        strcpy(out, "junk");
        assert_int_equal(ld_mp_boundary(bad[i], out, sizeof out), -1);
        assert_string_equal(out, "");
    }
    assert_int_equal(ld_mp_boundary(NULL, out, sizeof out), -1);
    assert_int_equal(ld_mp_boundary("multipart/form-data; boundary=x", NULL, 10), -1);
}

static void test_new_and_free(void **state) {
    (void)state;
    char b71[72];
    memset(b71, 'a', 71);
    b71[71] = '\0';
    assert_null(ld_mp_new(b71, NULL, NULL, NULL));
    assert_null(ld_mp_new("", NULL, NULL, NULL));
    assert_null(ld_mp_new("a\r\nb", NULL, NULL, NULL));
    assert_null(ld_mp_new("trailing ", NULL, NULL, NULL));
    assert_null(ld_mp_new(NULL, NULL, NULL, NULL));
    ld_mp_limits huge = {SIZE_MAX, 0, 0};
    assert_null(ld_mp_new("b", &huge, NULL, NULL));
    ld_mp_free(NULL);
    assert_int_equal(ld_mp_feed(NULL, "x", 1), LD_MP_ERROR);
    assert_int_equal(ld_mp_finish(NULL), LD_MP_ERROR);
    assert_int_equal(ld_mp_parts(NULL), 0);
    assert_non_null(ld_mp_error(NULL));

    /* No callbacks at all: parses and counts. */
    ld_mp *p = ld_mp_new("b", NULL, NULL, NULL);
    assert_non_null(p);
    const char *body = "--b\r\n" CD_X "\r\nabc\r\n--b--";
    assert_int_equal(ld_mp_feed(p, NULL, 0), 0);
    assert_int_equal(ld_mp_feed(p, body, strlen(body)), 0);
    assert_int_equal(ld_mp_finish(p), 0);
    assert_int_equal(ld_mp_parts(p), 1);
    assert_int_equal(ld_mp_offset(p), strlen(body));
    assert_string_equal(ld_mp_error(p), "");
    ld_mp_free(p);
}

/* ---- callbacks that stop --------------------------------------------------------------- */

static void test_callback_stop_propagates(void **state) {
    (void)state;
    const char *body = "--b\r\n" CD_X "\r\nabcdef\r\n--b\r\n" CD_X "\r\nghi\r\n--b--";
    size_t len = strlen(body);
    for (int which = 0; which < 3; which++) {
        rec proto = {0};
        proto.stop_value = 42 + which;
        if (which == 0) proto.stop_begin = 2;
        if (which == 1) proto.stop_data = 3;
        if (which == 2) proto.stop_end = 1;
        for (size_t chunk = 1; chunk <= len; chunk++) {
            outcome o;
            parse_chunked("b", NULL, body, len, chunk, &proto, &o);
            assert_int_equal(o.feed_rc, 42 + which);
            assert_int_equal(o.finish_rc, 42 + which); /* sticky */
            assert_non_null(strstr(o.err, "stopped by the part_"));
            if (which == 0) assert_int_equal(o.r.begins, 2);
            if (which == 1) assert_int_equal(o.r.ends, 0);
            if (which == 2) assert_int_equal(o.r.begins, 1);
            outcome_free(&o);
        }
    }
    /* A later feed after a stop returns the same value without calling back. */
    rec r = {0};
    r.stop_begin = 1;
    r.stop_value = 7;
    ld_mp *p = ld_mp_new("b", NULL, &k_cb, &r);
    assert_non_null(p);
    assert_int_equal(ld_mp_feed(p, body, len), 7);
    assert_int_equal(ld_mp_feed(p, body, len), 7);
    assert_int_equal(r.begins, 1);
    assert_string_equal(ld_mp_error(p), "stopped by the part_begin callback (7) at byte 46");
    ld_mp_free(p);
    free(r.log);
}

/* ---- a 64 MiB part -------------------------------------------------------------------- */

typedef struct counter {
    uint64_t bytes, sum, calls;
    int begins, ends;
} counter;

static int cnt_begin(void *u, const char *name, const char *ct) {
    counter *c = u;
    c->begins++;
    return strcmp(name, "heap") || strcmp(ct, "application/zstd");
}

static int cnt_data(void *u, const void *data, size_t len) {
    counter *c = u;
    const unsigned char *d = data;
    for (size_t i = 0; i < len; i++) c->sum = c->sum * 31 + d[i];
    c->bytes += len;
    c->calls++;
    return 0;
}

static int cnt_end(void *u) {
    ((counter *)u)->ends++;
    return 0;
}

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_64mib_part_streams(void **state) {
    (void)state;
    const size_t total = 64u << 20, chunk = 65536 + 7; /* an odd size: delimiter pieces straddle */
    const char *boundary = "----LeakwatchBoundary4f1c2e";
    char head[256], tail[64];
    int hn = snprintf(head, sizeof head,
                      "--%s\r\nContent-Disposition: form-data; name=\"heap\"\r\nContent-Type: application/zstd\r\n\r\n", boundary);
    int tn = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
    counter c = {0};
    ld_mp_callbacks cb = {cnt_begin, cnt_data, cnt_end};
    ld_mp *p = ld_mp_new(boundary, NULL, &cb, &c);
    assert_non_null(p);
    unsigned char *buf = malloc(chunk);
    assert_non_null(buf);
    clock_t t0 = clock();
    assert_int_equal(ld_mp_feed(p, head, (size_t)hn), 0);
    uint64_t seed = 0x9e3779b97f4a7c15u, want = 0;
    size_t sent = 0;
    while (sent < total) {
        size_t n = total - sent < chunk ? total - sent : chunk;
        for (size_t i = 0; i < n; i++) {
            /* Random bytes with many CR LF "--" runs, so the delimiter search is exercised. */
            uint64_t r = xorshift(&seed);
            buf[i] = (r & 0xf0) == 0 ? (unsigned char)"\r\n--"[r & 3] : (unsigned char)(r >> 8);
            want = want * 31 + buf[i];
        }
        assert_int_equal(ld_mp_feed(p, buf, n), 0);
        sent += n;
    }
    assert_int_equal(ld_mp_feed(p, tail, (size_t)tn), 0);
    assert_int_equal(ld_mp_finish(p), 0);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(c.bytes, total);
    assert_true(c.sum == want);
    assert_int_equal(c.begins, 1);
    assert_int_equal(c.ends, 1);
    print_message("64 MiB part: %.2f s (generation included), %llu part_data calls\n", secs,
                  (unsigned long long)c.calls);
    assert_true(secs < 30.0);
    free(buf);
    ld_mp_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed_any_chunking),
        cmocka_unit_test(test_small_body_every_pair_of_splits),
        cmocka_unit_test(test_boundary_lookalikes_are_data),
        cmocka_unit_test(test_binary_data),
        cmocka_unit_test(test_preamble_padding_epilogue),
        cmocka_unit_test(test_missing_close_delimiter),
        cmocka_unit_test(test_header_too_long),
        cmocka_unit_test(test_too_many_parts),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_boundary_from_content_type),
        cmocka_unit_test(test_new_and_free),
        cmocka_unit_test(test_callback_stop_propagates),
        cmocka_unit_test(test_64mib_part_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
