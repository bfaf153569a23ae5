/* multipart.c — streaming multipart/form-data parser: a byte-driven state machine that finds
 * the delimiter "\r\n--boundary" without buffering part bodies (see multipart.h). */
#include "multipart.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How the body is read. The parser pretends the body starts with "\r\n", so the first
 * boundary (which may be at offset 0, with no CRLF before it) is found by the same search as
 * every later delimiter; those two virtual bytes are never counted or reported. */
typedef enum mp_state {
    S_BODY,     /* preamble or part body: searching for the delimiter; `k` bytes matched */
    S_AFTER,    /* the whole delimiter matched; the next byte decides what it was */
    S_DASH,     /* delimiter + "-": a second "-" closes the body */
    S_PAD,      /* delimiter + transport padding */
    S_CR,       /* delimiter [+ padding] + CR: an LF ends the boundary line */
    S_HEADERS,  /* a part's header block */
    S_EPILOGUE, /* after the close delimiter: everything is ignored */
    S_FAILED,   /* an error or a callback's stop: `rc` is returned from now on */
} mp_state;

typedef enum mp_where { W_PREAMBLE, W_PART } mp_where;

struct ld_mp {
    ld_mp_callbacks cb;
    void *user;
    ld_mp_limits lim;

    mp_state state;
    mp_where where;
    int rc;             /* the sticky result once S_FAILED */
    uint64_t base;      /* body offset of the current chunk's first byte */
    size_t parts;       /* boundary lines that opened a part */
    size_t begun;       /* parts whose headers were complete */

    char pat[4 + LD_MP_BOUNDARY_CAP]; /* "\r\n--" boundary */
    size_t m;                         /* strlen(pat) */
    size_t k;                         /* bytes of pat matched (S_BODY) */
    size_t virt;                      /* virtual leading bytes not yet passed (preamble) */
    size_t preamble;                  /* real preamble bytes skipped */
    char pad[LD_MP_MAX_PADDING];
    size_t npad;

    /* The current header block: hdr[0..hlen), lines already parsed up to line_start. */
    uint64_t hdr_base; /* body offset of hdr[0] */
    size_t hlen, line_start;
    size_t name_off, name_len, ct_off, ct_len;
    int has_cd, has_name, has_ct;

    char err[192];
    char hdr[]; /* lim.max_header_bytes + 1 */
};

/* ---- small helpers -------------------------------------------------------------------- */

static int fail(ld_mp *p, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(ld_mp *p, uint64_t off, const char *fmt, ...) {
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->err, sizeof p->err, "%s at byte %llu", what, (unsigned long long)off);
    p->state = S_FAILED;
    p->rc = LD_MP_ERROR;
    return LD_MP_ERROR;
}

/* A callback said stop: remember its value. */
static int stop(ld_mp *p, int rc, const char *which, uint64_t off) {
    snprintf(p->err, sizeof p->err, "stopped by the %s callback (%d) at byte %llu", which, rc,
             (unsigned long long)off);
    p->state = S_FAILED;
    p->rc = rc;
    return rc;
}

static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

static int is_ows(int c) { return c == ' ' || c == '\t'; }

/* RFC 7230 tchar. */
static int is_tchar(int c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* RFC 2046 bchars. */
static int is_bchar(int c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c != 0 && strchr("'()+_,-./:=? ", c) != NULL;
}

static int valid_boundary(const char *b, size_t n) {
    if (n < 1 || n > LD_MP_BOUNDARY_CAP - 1 || b[n - 1] == ' ') return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_bchar((unsigned char)b[i])) return 0;
    return 1;
}

/* Case-insensitive comparison of s[0..n) with the lower-case C string `lit`. */
static int eq_ci(const char *s, size_t n, const char *lit) {
    size_t i = 0;
    for (; i < n; i++)
        if (lit[i] == '\0' || lower((unsigned char)s[i]) != lit[i]) return 0;
    return lit[i] == '\0';
}

/* ---- parameters: `; name=value` lists of Content-Type and Content-Disposition ---------- */

/* A cursor over s[pos..end). */
typedef struct mp_cur {
    char *s;
    size_t pos, end;
} mp_cur;

static void skip_ows(mp_cur *c) {
    while (c->pos < c->end && is_ows((unsigned char)c->s[c->pos])) c->pos++;
}

static size_t take_token(mp_cur *c) {
    size_t start = c->pos;
    while (c->pos < c->end && is_tchar((unsigned char)c->s[c->pos])) c->pos++;
    return c->pos - start;
}

/* Reads one parameter value at the cursor: a quoted-string (unescaped in place; the result
 * never extends past the closing quote) or a run of `bare` characters. Sets *off and *len to the
 * value in s. 0 or -1 when malformed. */
static int take_value(mp_cur *c, int (*bare)(int), size_t *off, size_t *len) {
    if (c->pos < c->end && c->s[c->pos] == '"') {
        size_t w = ++c->pos;
        *off = w;
        for (;;) {
            if (c->pos >= c->end) return -1; /* no closing quote */
            char ch = c->s[c->pos++];
            if (ch == '"') break;
            if (ch == '\\') {
                if (c->pos >= c->end) return -1;
                ch = c->s[c->pos++];
            }
            c->s[w++] = ch;
        }
        *len = w - *off;
        return 0;
    }
    *off = c->pos;
    while (c->pos < c->end && bare((unsigned char)c->s[c->pos])) c->pos++;
    *len = c->pos - *off;
    return *len ? 0 : -1;
}

/* Unquoted boundary characters: lenient (clients often leave '/', ':', '=', '?' unquoted),
 * only what ends a parameter is excluded. */
static int is_bare_boundary(int c) { return is_bchar(c) && c != ' '; }

/* Calls `each(ctx, name, name_len, value_off, value_len)` for every `; name=value` at the
 * cursor up to its end; stops with its nonzero return. -1 when malformed. A trailing ';'
 * is tolerated. */
static int each_param(mp_cur *c, int (*bare)(int),
                      int (*each)(void *ctx, const char *name, size_t nlen, size_t voff, size_t vlen),
                      void *ctx) {
    for (;;) {
        skip_ows(c);
        if (c->pos >= c->end) return 0;
        if (c->s[c->pos] != ';') return -1;
        c->pos++;
        skip_ows(c);
        if (c->pos >= c->end) return 0;
        size_t nstart = c->pos, nlen = take_token(c);
        if (nlen == 0) return -1;
        skip_ows(c);
        if (c->pos >= c->end || c->s[c->pos] != '=') return -1;
        c->pos++;
        skip_ows(c);
        size_t voff, vlen;
        if (take_value(c, bare, &voff, &vlen) != 0) return -1;
        int rc = each(ctx, c->s + nstart, nlen, voff, vlen);
        if (rc) return rc;
    }
}

/* ---- ld_mp_boundary -------------------------------------------------------------------- */

typedef struct bparam {
    const char *s;
    size_t off, len;
    int seen;
} bparam;

static int on_boundary_param(void *ctx, const char *name, size_t nlen, size_t voff, size_t vlen) {
    bparam *b = ctx;
    if (!eq_ci(name, nlen, "boundary")) return 0;
    if (b->seen) return -1;
    b->seen = 1;
    b->off = voff;
    b->len = vlen;
    return 0;
}

int ld_mp_boundary(const char *content_type, char *out, size_t cap) {
    if (out && cap) out[0] = '\0';
    if (!content_type || !out) return -1;
    /* A private copy: quoted values are unescaped in place. Header values longer than this
     * are not a sane Content-Type. */
    char buf[1024];
    size_t n = strlen(content_type);
    if (n >= sizeof buf) return -1;
    memcpy(buf, content_type, n + 1);

    mp_cur c = {buf, 0, n};
    skip_ows(&c);
    size_t tstart = c.pos;
    if (take_token(&c) == 0 || c.pos >= c.end || buf[c.pos] != '/') return -1;
    c.pos++;
    if (take_token(&c) == 0) return -1;
    if (!eq_ci(buf + tstart, c.pos - tstart, "multipart/form-data")) return -1;
    bparam b = {buf, 0, 0, 0};
    if (each_param(&c, is_bare_boundary, on_boundary_param, &b) != 0 || !b.seen) return -1;
    if (!valid_boundary(buf + b.off, b.len) || b.len + 1 > cap) return -1;
    memcpy(out, buf + b.off, b.len);
    out[b.len] = '\0';
    return 0;
}

/* ---- new / free ------------------------------------------------------------------------ */

ld_mp *ld_mp_new(const char *boundary, const ld_mp_limits *limits, const ld_mp_callbacks *cb, void *user) {
    if (!boundary) return NULL;
    size_t blen = 0;
    while (blen < LD_MP_BOUNDARY_CAP && boundary[blen]) blen++;
    if (!valid_boundary(boundary, blen)) return NULL;

    ld_mp_limits lim = {LD_MP_DEFAULT_MAX_HEADER_BYTES, LD_MP_DEFAULT_MAX_PARTS, LD_MP_DEFAULT_MAX_PREAMBLE};
    if (limits) {
        if (limits->max_header_bytes) lim.max_header_bytes = limits->max_header_bytes;
        if (limits->max_parts) lim.max_parts = limits->max_parts;
        if (limits->max_preamble) lim.max_preamble = limits->max_preamble;
    }
    if (lim.max_header_bytes > SIZE_MAX - sizeof(ld_mp) - 1) return NULL;

    ld_mp *p = malloc(sizeof(ld_mp) + lim.max_header_bytes + 1);
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    if (cb) p->cb = *cb;
    p->user = user;
    p->lim = lim;
    p->state = S_BODY;
    p->where = W_PREAMBLE;
    memcpy(p->pat, "\r\n--", 4);
    memcpy(p->pat + 4, boundary, blen);
    p->pat[4 + blen] = '\0';
    p->m = 4 + blen;
    p->k = 2; /* the virtual CRLF before the body */
    p->virt = 2;
    return p;
}

void ld_mp_free(ld_mp *p) { free(p); }

/* ---- the state machine ----------------------------------------------------------------- */

/* Passes bytes that turned out to be data: to part_data inside a part, counted and dropped
 * in the preamble. `off` is the body offset for messages. */
static int emit(ld_mp *p, const void *data, size_t len, uint64_t off) {
    if (p->where == W_PREAMBLE) {
        size_t v = len < p->virt ? len : p->virt;
        p->virt -= v;
        len -= v;
        if (len > p->lim.max_preamble - p->preamble)
            /* The preamble starts at byte 0, so its first byte over the limit is here. A client
             * sees this when its body is not delimited by the boundary its Content-Type names
             * (another boundary, or another case). */
            return fail(p, p->lim.max_preamble, "no delimiter of the Content-Type's boundary in the first %zu bytes",
                        p->lim.max_preamble);
        p->preamble += len;
        return 0;
    }
    if (len == 0 || !p->cb.part_data) return 0;
    int rc = p->cb.part_data(p->user, data, len);
    return rc ? stop(p, rc, "part_data", off) : 0;
}

/* What looked like a delimiter is data after all: pass it on and search again. */
static int not_delimiter(ld_mp *p, uint64_t off) {
    static const char dash = '-';
    int rc = emit(p, p->pat, p->m, off);
    if (rc == 0 && p->state == S_DASH) rc = emit(p, &dash, 1, off);
    if (rc == 0) rc = emit(p, p->pad, p->npad, off);
    if (rc) return rc;
    p->state = S_BODY;
    p->k = 0;
    p->npad = 0;
    return 0;
}

/* A boundary line ended (at offset `off`, its LF): the current part ends, the next begins. */
static int on_delimiter(ld_mp *p, uint64_t off) {
    if (p->where == W_PART && p->cb.part_end) {
        int rc = p->cb.part_end(p->user);
        if (rc) return stop(p, rc, "part_end", off);
    }
    if (p->parts >= p->lim.max_parts) return fail(p, off, "more than %zu parts", p->lim.max_parts);
    p->parts++;
    p->state = S_HEADERS;
    p->hdr_base = off + 1;
    p->hlen = p->line_start = 0;
    p->has_cd = p->has_name = p->has_ct = 0;
    p->npad = 0;
    return 0;
}

static int on_close(ld_mp *p, uint64_t off) {
    if (p->where == W_PREAMBLE) return fail(p, off, "close delimiter before any part");
    if (p->cb.part_end) {
        int rc = p->cb.part_end(p->user);
        if (rc) return stop(p, rc, "part_end", off);
    }
    p->state = S_EPILOGUE;
    return 0;
}

typedef struct cdparam {
    ld_mp *p;
    int bad;
} cdparam;

static int on_cd_param(void *ctx, const char *name, size_t nlen, size_t voff, size_t vlen) {
    cdparam *c = ctx;
    if (!eq_ci(name, nlen, "name")) return 0; /* filename, filename*, anything else: ignored */
    if (c->p->has_name) {
        c->bad = 1;
        return -1;
    }
    c->p->has_name = 1;
    c->p->name_off = voff;
    c->p->name_len = vlen;
    return 0;
}

/* Parameter values of Content-Disposition that are not quoted. */
static int is_tchar_param(int c) { return is_tchar(c); }

/* Parses the header line hdr[line_start..hlen-2) (its CRLF already checked). */
static int header_line(ld_mp *p) {
    char *h = p->hdr;
    size_t start = p->line_start, end = p->hlen - 2;
    uint64_t off = p->hdr_base + start;
    if (is_ows((unsigned char)h[start])) return fail(p, off, "folded part header line");
    for (size_t i = start; i < end; i++) {
        unsigned char ch = (unsigned char)h[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return fail(p, off + (i - start), "control character in part header");
    }
    mp_cur c = {h, start, end};
    size_t nlen = take_token(&c);
    if (nlen == 0 || c.pos >= end || h[c.pos] != ':') return fail(p, off, "malformed part header line");
    const char *name = h + start;
    c.pos++;
    skip_ows(&c);
    while (c.end > c.pos && is_ows((unsigned char)h[c.end - 1])) c.end--;

    if (eq_ci(name, nlen, "content-disposition")) {
        if (p->has_cd) return fail(p, off, "two Content-Disposition headers in one part");
        p->has_cd = 1;
        size_t tstart = c.pos, tlen = take_token(&c);
        if (!eq_ci(h + tstart, tlen, "form-data")) return fail(p, off, "Content-Disposition is not form-data");
        cdparam cd = {p, 0};
        if (each_param(&c, is_tchar_param, on_cd_param, &cd) != 0)
            return fail(p, off, cd.bad ? "two name parameters in Content-Disposition" : "malformed Content-Disposition");
        /* The name holds no NUL: control characters were refused above, escaped or not. */
        if (p->has_name && p->name_len == 0) return fail(p, off, "empty part name");
    } else if (eq_ci(name, nlen, "content-type")) {
        if (p->has_ct) return fail(p, off, "two Content-Type headers in one part");
        p->has_ct = 1;
        size_t tstart = c.pos;
        if (take_token(&c) == 0 || c.pos >= c.end || h[c.pos] != '/') return fail(p, off, "malformed Content-Type");
        c.pos++;
        if (take_token(&c) == 0) return fail(p, off, "malformed Content-Type");
        size_t tend = c.pos;
        skip_ows(&c);
        if (c.pos < c.end && h[c.pos] != ';') return fail(p, off, "malformed Content-Type");
        for (size_t i = tstart; i < tend; i++) h[i] = (char)lower((unsigned char)h[i]);
        p->ct_off = tstart;
        p->ct_len = tend - tstart;
    }
    /* Any other header (Content-Transfer-Encoding, ...) is ignored. */
    return 0;
}

/* The empty line that ends a header block was read (its LF at offset `off`). */
static int headers_done(ld_mp *p, uint64_t off) {
    uint64_t at = p->hdr_base;
    if (!p->has_cd) return fail(p, at, "part without Content-Disposition");
    if (!p->has_name) return fail(p, at, "part without a name");
    /* Terminate the values in place: each ends at or before its own line's CR, and lines do
     * not overlap, so neither terminator touches the other value. */
    p->hdr[p->name_off + p->name_len] = '\0';
    const char *ct = "";
    if (p->has_ct) {
        p->hdr[p->ct_off + p->ct_len] = '\0';
        ct = p->hdr + p->ct_off;
    }
    p->begun++;
    p->where = W_PART;
    p->state = S_BODY;
    p->k = 0;
    if (p->cb.part_begin) {
        int rc = p->cb.part_begin(p->user, p->hdr + p->name_off, ct);
        if (rc) return stop(p, rc, "part_begin", off);
    }
    return 0;
}

/* Consumes header bytes from d[*i..n). */
static int feed_headers(ld_mp *p, const unsigned char *d, size_t n, size_t *i) {
    while (*i < n) {
        const unsigned char *lf = memchr(d + *i, '\n', n - *i);
        size_t run = lf ? (size_t)(lf - (d + *i)) + 1 : n - *i;
        size_t room = p->lim.max_header_bytes - p->hlen;
        if (run > room)
            return fail(p, p->hdr_base + p->lim.max_header_bytes, "part header block longer than %zu bytes",
                        p->lim.max_header_bytes);
        memcpy(p->hdr + p->hlen, d + *i, run);
        p->hlen += run;
        *i += run;
        if (!lf) return 0;
        uint64_t lf_off = p->base + *i - 1;
        if (p->hlen - p->line_start < 2 || p->hdr[p->hlen - 2] != '\r')
            return fail(p, lf_off, "part header line not ended by CRLF");
        if (p->hlen - p->line_start == 2) return headers_done(p, lf_off);
        int rc = header_line(p);
        if (rc) return rc;
        p->line_start = p->hlen;
    }
    return 0;
}

/* S_BODY with nothing matched: finds the next CR that could start the delimiter, passing
 * everything before it on as one piece. A CR is a candidate when the bytes after it (as many
 * as this chunk has) agree with the delimiter; the compare stops at the first difference,
 * and since CR occurs in the delimiter only at its start, no byte is compared twice. */
static size_t scan_body(const ld_mp *p, const unsigned char *d, size_t n, size_t i) {
    while (i < n) {
        const unsigned char *cr = memchr(d + i, '\r', n - i);
        if (!cr) return n;
        size_t j = (size_t)(cr - d), avail = n - j, cmp = avail < p->m ? avail : p->m;
        size_t q = 1;
        while (q < cmp && d[j + q] == (unsigned char)p->pat[q]) q++;
        if (q == cmp) return j;
        i = j + q;
    }
    return n;
}

int ld_mp_feed(ld_mp *p, const void *data, size_t len) {
    if (!p) return LD_MP_ERROR;
    if (p->state == S_FAILED) return p->rc;
    if (len == 0) return 0;
    if (!data) return fail(p, p->base, "no data");
    const unsigned char *d = data;
    size_t i = 0;
    int rc = 0;
    while (i < len && rc == 0) {
        if (p->state == S_BODY && p->k == 0) {
            size_t j = scan_body(p, d, len, i);
            rc = emit(p, d + i, j - i, p->base + i);
            i = j;
            if (rc || i == len) break;
            /* now at a candidate CR: the byte path below matches it */
        }
        uint64_t off = p->base + i;
        unsigned char c = d[i];
        switch (p->state) {
        case S_BODY:
            if (c == (unsigned char)p->pat[p->k]) {
                i++;
                if (++p->k == p->m) {
                    p->state = S_AFTER;
                    p->npad = 0;
                }
            } else {
                /* CR occurs only at pat[0], so no suffix of the matched part can start a
                 * new match: all of it is data, and c is looked at again. */
                rc = emit(p, p->pat, p->k, off);
                p->k = 0;
            }
            break;
        case S_AFTER:
            if (c == '-') p->state = S_DASH, i++;
            else if (c == '\r') p->state = S_CR, i++;
            else if (is_ows(c)) p->pad[p->npad++] = (char)c, p->state = S_PAD, i++;
            else rc = not_delimiter(p, off);
            break;
        case S_DASH:
            if (c == '-') rc = on_close(p, off), i++;
            else rc = not_delimiter(p, off);
            break;
        case S_PAD:
            if (is_ows(c)) {
                if (p->npad == LD_MP_MAX_PADDING)
                    rc = fail(p, off, "transport padding longer than %u bytes", LD_MP_MAX_PADDING);
                else p->pad[p->npad++] = (char)c, i++;
            } else if (c == '\r') {
                p->state = S_CR, i++;
            } else {
                rc = not_delimiter(p, off);
            }
            break;
        case S_CR:
            if (c == '\n') {
                rc = on_delimiter(p, off);
                i++;
            } else {
                /* The held CR cannot start a delimiter either (no LF follows), but treat it
                 * like any other: it becomes k = 1 and c is looked at again. */
                rc = not_delimiter(p, off);
                if (rc == 0) p->k = 1;
            }
            break;
        case S_HEADERS:
            rc = feed_headers(p, d, len, &i);
            break;
        case S_EPILOGUE:
            i = len;
            break;
        case S_FAILED:
            rc = p->rc;
            break;
        }
    }
    p->base += i;
    return rc;
}

int ld_mp_finish(ld_mp *p) {
    if (!p) return LD_MP_ERROR;
    switch (p->state) {
    case S_FAILED:
        return p->rc;
    case S_EPILOGUE:
        return 0;
    case S_HEADERS:
        return fail(p, p->base, "body ends inside a part's headers");
    case S_BODY:
        if (p->where == W_PREAMBLE) return fail(p, p->base, "body ends before the first boundary");
        return fail(p, p->base, "body ends inside a part (no close delimiter)");
    default:
        return fail(p, p->base, "body ends inside a boundary line");
    }
}

const char *ld_mp_error(const ld_mp *p) { return p ? p->err : "no parser"; }

size_t ld_mp_parts(const ld_mp *p) { return p ? p->begun : 0; }

uint64_t ld_mp_offset(const ld_mp *p) { return p ? p->base : 0; }
