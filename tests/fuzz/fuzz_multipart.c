/* fuzz_multipart.c — libFuzzer target for leakd's streaming multipart/form-data parser
 * (untrusted: every upload body goes through it). Each input is parsed twice, fed whole and
 * fed in small chunks; both runs must give the same callbacks, bytes, result and message,
 * and the callbacks must be well-formed (data only inside a part, begin/end paired).
 *
 * Input layout: byte 0 is the mode —
 *   bits 0-5: chunk size - 1 for the chunked run (1..64 bytes),
 *   bit 6:    small limits (64-byte header blocks, 3 parts, 16-byte preamble) instead of
 *             the defaults,
 *   bit 7:    the boundary comes from the first line, read as a Content-Type value through
 *             ld_mp_boundary (the line is consumed); otherwise the boundary is "XyZ".
 * The rest is the body.
 *
 * Build: see tests/fuzz/README.md (sources: this file + server/multipart.c, -Iserver).
 * Linked with replay.c into fuzz_multipart_replay. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what) {
    fprintf(stderr, "fuzz_multipart: %s\n", what);
    abort();
}

typedef struct run {
    uint64_t hash;       /* FNV-1a over the event stream, independent of data chunking */
    uint64_t data_bytes; /* bytes passed to part_data */
    size_t begins, ends;
    int in_part;
    int feed_rc, finish_rc;
    size_t parts;
    char err[256];
} run;

static void mix(run *r, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        r->hash ^= b[i];
        r->hash *= 0x100000001b3u;
    }
}

static int on_begin(void *user, const char *name, const char *ct) {
    run *r = user;
    if (r->in_part) die("part_begin inside a part");
    if (!name || !name[0]) die("empty part name");
    if (!ct) die("NULL content type");
    for (const char *c = ct; *c; c++)
        if ((*c >= 'A' && *c <= 'Z') || *c == ';' || *c == ' ' || *c == '\t') die("content type not normalised");
    r->in_part = 1;
    r->begins++;
    mix(r, "B", 1);
    mix(r, name, strlen(name) + 1);
    mix(r, ct, strlen(ct) + 1);
    return 0;
}

static int on_data(void *user, const void *data, size_t len) {
    run *r = user;
    if (!r->in_part) die("part_data outside a part");
    if (len == 0 || !data) die("empty part_data");
    r->data_bytes += len;
    mix(r, data, len);
    return 0;
}

static int on_end(void *user) {
    run *r = user;
    if (!r->in_part) die("part_end outside a part");
    r->in_part = 0;
    r->ends++;
    mix(r, "E", 1);
    return 0;
}

static const ld_mp_callbacks k_cb = {on_begin, on_data, on_end};
static const ld_mp_limits k_small = {64, 3, 16};

static void parse(const char *boundary, const ld_mp_limits *lim, const uint8_t *body, size_t size, size_t chunk,
                  run *r) {
    memset(r, 0, sizeof *r);
    r->hash = 0xcbf29ce484222325u;
    ld_mp *p = ld_mp_new(boundary, lim, &k_cb, r);
    if (!p) die("ld_mp_new refused a boundary that ld_mp_boundary gave");
    for (size_t at = 0; at < size && r->feed_rc == 0; at += chunk) {
        size_t n = size - at < chunk ? size - at : chunk;
        r->feed_rc = ld_mp_feed(p, body + at, n);
    }
    r->finish_rc = ld_mp_finish(p);
    r->parts = ld_mp_parts(p);
    snprintf(r->err, sizeof r->err, "%s", ld_mp_error(p));

    if (r->feed_rc != 0 && r->feed_rc != LD_MP_ERROR) die("unexpected feed result");
    if (r->feed_rc && r->finish_rc != r->feed_rc) die("an error is not sticky");
    if (r->finish_rc == 0) {
        if (r->err[0]) die("success with an error message");
        if (r->in_part || r->begins == 0 || r->begins != r->ends) die("closed body with unbalanced parts");
    } else if (!r->err[0]) {
        die("error without a message");
    }
    if (r->parts != r->begins) die("ld_mp_parts disagrees with the callbacks");
    if (r->parts > (lim ? lim->max_parts : LD_MP_DEFAULT_MAX_PARTS)) die("more parts than the limit");
    if (r->data_bytes > size) die("more data out than in");
    if (ld_mp_offset(p) > size) die("offset past the input");
    ld_mp_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    data++, size--;
    char boundary[LD_MP_BOUNDARY_CAP] = "XyZ";
    if (mode & 0x80) {
        const uint8_t *nl = memchr(data, '\n', size);
        if (!nl) return 0;
        size_t ln = (size_t)(nl - data);
        char ct[512];
        if (ln >= sizeof ct) return 0;
        memcpy(ct, data, ln);
        ct[ln] = '\0';
        if (ld_mp_boundary(ct, boundary, sizeof boundary) != 0) {
            if (boundary[0]) die("ld_mp_boundary failed but filled the output");
            /* The raw line as a boundary: ld_mp_new must refuse it or cope. */
            ld_mp *q = ld_mp_new(ct, NULL, NULL, NULL);
            if (q && ld_mp_feed(q, nl + 1, size - ln - 1) == 0) (void)ld_mp_finish(q);
            ld_mp_free(q);
            return 0;
        }
        size_t bl = strlen(boundary);
        if (bl < 1 || bl > 70) die("ld_mp_boundary gave a bad length");
        data = nl + 1;
        size -= ln + 1;
    }
    const ld_mp_limits *lim = (mode & 0x40) ? &k_small : NULL;
    size_t chunk = (size_t)(mode & 0x3f) + 1;

    run whole, chunked;
    parse(boundary, lim, data, size, size ? size : 1, &whole);
    parse(boundary, lim, data, size, chunk, &chunked);
    if (whole.feed_rc != chunked.feed_rc || whole.finish_rc != chunked.finish_rc) die("result depends on chunking");
    if (strcmp(whole.err, chunked.err) != 0) {
        fprintf(stderr, "whole: %s\nchunked (%zu): %s\n", whole.err, chunk, chunked.err);
        die("message depends on chunking");
    }
    if (whole.hash != chunked.hash || whole.data_bytes != chunked.data_bytes || whole.begins != chunked.begins ||
        whole.ends != chunked.ends)
        die("callbacks depend on chunking");
    return 0;
}
