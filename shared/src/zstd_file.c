/* zstd_file.c — stream a file through zstd in either direction, with a cap on output. */
#define _FILE_OFFSET_BITS 64
#include "zstd_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

int lw_zstd_magic(const void *p, size_t n) {
    const uint8_t *m = p;
    if (!m || n < 4) return 0;
    if (m[0] == 0x28 && m[1] == 0xB5 && m[2] == 0x2F && m[3] == 0xFD) return 1;
    /* a skippable frame first (metadata some tools write): taken for a plain dump, it failed
     * as "not an HPROF heap dump" though `zstd -d` reads it (audit 2026-12-04) */
    return (m[0] & 0xF0) == 0x50 && m[1] == 0x2A && m[2] == 0x4D && m[3] == 0x18;
}

int lw_is_zstd_file(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    uint8_t m[4];
    ssize_t n = read(fd, m, 4);
    int saved = errno;
    close(fd);
    errno = saved;
    if (n < 0) return -1;
    return n == 4 && lw_zstd_magic(m, 4);
}

static int write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Opens `in_path` for reading and creates `out_path`; on failure closes what it opened. */
static lw_status open_pair(const char *in_path, const char *out_path, int mode, int *in, int *out, lw_error *err) {
    *in = open(in_path, O_RDONLY | O_CLOEXEC);
    if (*in < 0) return lw__fail(err, LW_ERR_IO, "%s: cannot open: %s", in_path, strerror(errno));
    *out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (*out < 0) {
        lw_status st = lw__fail(err, LW_ERR_IO, "%s: cannot create: %s", out_path, strerror(errno));
        close(*in);
        *in = -1;
        return st;
    }
    return LW_OK;
}

/* Closes both; removes the output when the operation failed. */
static lw_status close_pair(int in, int out, const char *out_path, lw_status st, lw_error *err) {
    if (in >= 0) close(in);
    if (out >= 0) {
        if (st == LW_OK && fsync(out) != 0) st = lw__fail(err, LW_ERR_IO, "%s: fsync failed: %s", out_path, strerror(errno));
        if (close(out) != 0 && st == LW_OK) st = lw__fail(err, LW_ERR_IO, "%s: close failed: %s", out_path, strerror(errno));
        if (st != LW_OK) unlink(out_path);
    }
    return st;
}

/* Where decompressed bytes go: the cap, the head check, and the frame being decoded. */
typedef struct sink {
    int fd;
    const char *in_path, *out_path;
    uint64_t max_bytes, written;  /* written: bytes decoded so far (the cap counts them) */
    lw__zstd_head_check check;    /* NULL once the head is accepted, or when none is judged */
    lw__zstd_feed_check feed;     /* NULL when nothing is judged after the head */
    void *feed_ctx;
    size_t head_len, head_n;
    uint8_t head[LW__ZSTD_HEAD_MAX];
    /* zstd checks a frame's stated content size only at its end, so the bytes of a frame that
     * lies about it are counted here to stop at the first one past it. */
    uint64_t frame_out, frame_size; /* decoded by the current frame; its stated size (UINT64_MAX: none) */
    int frame_pending;              /* its header is still being gathered into fh */
    size_t fh_n;
    uint8_t fh[18];                 /* ZSTD_FRAMEHEADERSIZE_MAX */
} sink;

/* Feeds the next `n` input bytes of a frame whose header is pending. */
static void frame_feed(sink *s, const uint8_t *p, size_t n) {
    if (!s->frame_pending) return;
    size_t k = n < sizeof s->fh - s->fh_n ? n : sizeof s->fh - s->fh_n;
    memcpy(s->fh + s->fh_n, p, k);
    s->fh_n += k;
    unsigned long long size = ZSTD_getFrameContentSize(s->fh, s->fh_n);
    if (size == ZSTD_CONTENTSIZE_ERROR && s->fh_n < sizeof s->fh) return; /* more header to come */
    /* a skippable frame states 0 and decodes to nothing; a bad header is the decoder's to report */
    s->frame_size = size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN ? UINT64_MAX : size;
    s->frame_pending = 0;
}

/* A frame begins with the input byte `p`, `n` bytes of this read left. */
static void frame_begin(sink *s, const uint8_t *p, size_t n) {
    s->frame_out = 0;
    s->frame_size = UINT64_MAX;
    s->frame_pending = 1;
    s->fh_n = 0;
    frame_feed(s, p, n);
}

static lw_status refused(const sink *s, lw_status st, const lw_error *e, lw_error *err) {
    return lw__fail(err, st, "%.200s: decompressed content: %.300s", s->in_path, e->message);
}

/* Judges `n` bytes after the head with the feed check and writes them out. */
static lw_status pass_on(sink *s, const uint8_t *p, size_t n, lw_error *err) {
    if (s->feed) {
        lw_error e = {0};
        lw_status st = s->feed(s->feed_ctx, p, n, &e);
        if (st != LW_OK) return refused(s, st, &e, err);
    }
    if (n && write_all(s->fd, p, n) != 0)
        return lw__fail(err, LW_ERR_IO, "%s: write failed: %s", s->out_path, strerror(errno));
    return LW_OK;
}

/* Runs the head check on what was gathered and, if it passes, passes it on. */
static lw_status accept_head(sink *s, lw_error *err) {
    lw_error e = {0};
    lw_status st = s->check(s->head, s->head_n, &e);
    s->check = NULL;
    if (st != LW_OK) return refused(s, st, &e, err);
    return pass_on(s, s->head, s->head_n, err);
}

/* Takes `n` decoded bytes: counts them against the cap and the frame's size, holds them back
 * until the head is judged, passes them on. */
static lw_status emit(sink *s, const uint8_t *p, size_t n, lw_error *err) {
    if (n > s->max_bytes - s->written)
        return lw__fail(err, LW_ERR_LIMIT, "%s: decompresses to more than the %llu-byte cap", s->in_path,
                        (unsigned long long)s->max_bytes);
    s->written += n;
    s->frame_out += n;
    if (s->frame_out > s->frame_size)
        return lw__fail(err, LW_ERR_FORMAT, "%s: zstd data corrupt: a frame decodes to more than the %llu bytes its "
                        "header states", s->in_path, (unsigned long long)s->frame_size);
    if (s->check) {
        size_t k = n < s->head_len - s->head_n ? n : s->head_len - s->head_n;
        memcpy(s->head + s->head_n, p, k);
        s->head_n += k;
        p += k;
        n -= k;
        if (s->head_n < s->head_len) return LW_OK;
        lw_status st = accept_head(s, err);
        if (st != LW_OK) return st;
    }
    return n ? pass_on(s, p, n, err) : LW_OK;
}

lw_status lw__zstd_decompress_file_checked(const char *in_path, const char *out_path, uint64_t max_bytes,
                                           const lw__zstd_checks *checks, lw_error *err) {
    if (!in_path || !out_path) return lw__fail(err, LW_ERR_USAGE, "zstd: missing path");
    lw__zstd_head_check check = checks ? checks->head : NULL;
    size_t head_len = checks ? checks->head_len : 0;
    if (check && (head_len == 0 || head_len > LW__ZSTD_HEAD_MAX))
        return lw__fail(err, LW_ERR_USAGE, "zstd: head check of %zu bytes (1 to %d)", head_len, LW__ZSTD_HEAD_MAX);
    lw_status st = LW_OK;
    int in = -1, out = -1;
    ZSTD_DCtx *dctx = NULL;
    size_t in_cap = ZSTD_DStreamInSize(), out_cap = ZSTD_DStreamOutSize();
    uint8_t *ibuf = lw__malloc(in_cap), *obuf = lw__malloc(out_cap);
    uint64_t consumed = 0;
    size_t last = 0;
    int any_input = 0;
    sink s = {.fd = -1, .in_path = in_path, .out_path = out_path, .max_bytes = max_bytes, .check = check,
              .head_len = head_len, .feed = checks ? checks->feed : NULL, .feed_ctx = checks ? checks->feed_ctx : NULL};
    if (!ibuf || !obuf || !(dctx = ZSTD_createDCtx())) {
        st = lw__fail(err, LW_ERR_NOMEM, "zstd: out of memory");
        goto out;
    }
    /* A window larger than 2 GiB is refused: it would cost that much memory. */
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, 31);
    st = open_pair(in_path, out_path, 0600, &in, &out, err);
    if (st != LW_OK) goto out;
    s.fd = out;
    frame_begin(&s, ibuf, 0);
    for (;;) {
        ssize_t n = read(in, ibuf, in_cap);
        if (n < 0) {
            if (errno == EINTR) continue;
            st = lw__fail(err, LW_ERR_IO, "%s: read failed: %s", in_path, strerror(errno));
            goto out;
        }
        if (n == 0) break;
        any_input = 1;
        frame_feed(&s, ibuf, (size_t)n);
        ZSTD_inBuffer ib = {ibuf, (size_t)n, 0};
        while (ib.pos < ib.size) {
            ZSTD_outBuffer ob = {obuf, out_cap, 0};
            last = ZSTD_decompressStream(dctx, &ob, &ib);
            if (ZSTD_isError(last) && ZSTD_getErrorCode(last) == ZSTD_error_memory_allocation) {
                /* the frame's window did not fit the memory there is: not the data's fault */
                st = lw__fail(err, LW_ERR_NOMEM, "%s: out of memory decompressing near compressed offset %llu", in_path,
                              (unsigned long long)(consumed + ib.pos));
                goto out;
            }
            if (ZSTD_isError(last)) {
                st = lw__fail(err, LW_ERR_FORMAT, "%s: zstd data corrupt near compressed offset %llu: %s", in_path,
                              (unsigned long long)(consumed + ib.pos), ZSTD_getErrorName(last));
                goto out;
            }
            st = emit(&s, obuf, ob.pos, err);
            if (st != LW_OK) goto out;
            /* 0: a frame ended here (decoded and flushed); the next input byte starts another */
            if (last == 0) frame_begin(&s, ibuf + ib.pos, ib.size - ib.pos);
        }
        consumed += (uint64_t)n;
    }
    /* Flush whatever the decoder still holds. */
    for (;;) {
        ZSTD_inBuffer ib = {ibuf, 0, 0};
        ZSTD_outBuffer ob = {obuf, out_cap, 0};
        if (last == 0) break;
        last = ZSTD_decompressStream(dctx, &ob, &ib);
        if (ZSTD_isError(last)) {
            st = lw__fail(err, LW_ERR_FORMAT, "%s: zstd data corrupt: %s", in_path, ZSTD_getErrorName(last));
            goto out;
        }
        st = emit(&s, obuf, ob.pos, err);
        if (st != LW_OK) goto out;
        if (ob.pos == 0) break;
    }
    if (!any_input || last != 0) {
        st = lw__fail(err, LW_ERR_FORMAT, "%s: truncated zstd stream (ends inside a frame after %llu compressed bytes)",
                      in_path, (unsigned long long)consumed);
        goto out;
    }
    /* content shorter than the head: judged whole */
    if (s.check) st = accept_head(&s, err);
    /* the end, for the feed check to judge what it holds back */
    if (st == LW_OK && s.feed) st = pass_on(&s, NULL, 0, err);
out:
    st = close_pair(in, out, out_path, st, err);
    ZSTD_freeDCtx(dctx);
    lw__free(ibuf);
    lw__free(obuf);
    return st;
}

lw_status lw_zstd_decompress_file(const char *in_path, const char *out_path, uint64_t max_bytes, lw_error *err) {
    return lw__zstd_decompress_file_checked(in_path, out_path, max_bytes, NULL, err);
}

lw_status lw_zstd_compress_file(const char *in_path, const char *out_path, int level, lw_error *err) {
    if (!in_path || !out_path) return lw__fail(err, LW_ERR_USAGE, "zstd: missing path");
    lw_status st = LW_OK;
    int in = -1, out = -1;
    ZSTD_CCtx *cctx = NULL;
    size_t in_cap = ZSTD_CStreamInSize(), out_cap = ZSTD_CStreamOutSize();
    uint8_t *ibuf = lw__malloc(in_cap), *obuf = lw__malloc(out_cap);
    if (!ibuf || !obuf || !(cctx = ZSTD_createCCtx())) {
        st = lw__fail(err, LW_ERR_NOMEM, "zstd: out of memory");
        goto out;
    }
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level ? level : 3);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    st = open_pair(in_path, out_path, 0644, &in, &out, err);
    if (st != LW_OK) goto out;
    for (;;) {
        ssize_t n = read(in, ibuf, in_cap);
        if (n < 0) {
            if (errno == EINTR) continue;
            st = lw__fail(err, LW_ERR_IO, "%s: read failed: %s", in_path, strerror(errno));
            goto out;
        }
        ZSTD_EndDirective mode = n == 0 ? ZSTD_e_end : ZSTD_e_continue;
        ZSTD_inBuffer ib = {ibuf, (size_t)n, 0};
        int finished = 0;
        do {
            ZSTD_outBuffer ob = {obuf, out_cap, 0};
            size_t rem = ZSTD_compressStream2(cctx, &ob, &ib, mode);
            if (ZSTD_isError(rem)) {
                st = lw__fail(err, LW_ERR_IO, "zstd: compression failed: %s", ZSTD_getErrorName(rem));
                goto out;
            }
            if (write_all(out, obuf, ob.pos) != 0) {
                st = lw__fail(err, LW_ERR_IO, "%s: write failed: %s", out_path, strerror(errno));
                goto out;
            }
            finished = mode == ZSTD_e_end ? rem == 0 : ib.pos == ib.size;
        } while (!finished);
        if (n == 0) break;
    }
out:
    st = close_pair(in, out, out_path, st, err);
    ZSTD_freeCCtx(cctx);
    lw__free(ibuf);
    lw__free(obuf);
    return st;
}
