/* hprof_reader.c — maps an HPROF file and measures its records, checking every bound. */
#define _FILE_OFFSET_BITS 64
#include "hprof_reader.h"
#include "zstd_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The name of a top-level tag the format defines, or NULL. */
static const char *known_tag_name(unsigned tag) {
    switch (tag) {
    case LW_TAG_STRING: return "STRING";
    case LW_TAG_LOAD_CLASS: return "LOAD_CLASS";
    case LW_TAG_UNLOAD_CLASS: return "UNLOAD_CLASS";
    case LW_TAG_STACK_FRAME: return "STACK_FRAME";
    case LW_TAG_STACK_TRACE: return "STACK_TRACE";
    case LW_TAG_ALLOC_SITES: return "ALLOC_SITES";
    case LW_TAG_HEAP_SUMMARY: return "HEAP_SUMMARY";
    case LW_TAG_START_THREAD: return "START_THREAD";
    case LW_TAG_END_THREAD: return "END_THREAD";
    case LW_TAG_HEAP_DUMP: return "HEAP_DUMP";
    case LW_TAG_CPU_SAMPLES: return "CPU_SAMPLES";
    case LW_TAG_CONTROL_SETTINGS: return "CONTROL_SETTINGS";
    case LW_TAG_HEAP_DUMP_SEGMENT: return "HEAP_DUMP_SEGMENT";
    case LW_TAG_HEAP_DUMP_END: return "HEAP_DUMP_END";
    default: return NULL;
    }
}

const char *lw__hprof_tag_name(unsigned tag) {
    const char *name = known_tag_name(tag);
    return name ? name : "unknown record";
}

const char *lw__hprof_subtag_name(unsigned tag) {
    switch (tag) {
    case LW_SUB_ROOT_UNKNOWN: return "ROOT_UNKNOWN";
    case LW_SUB_ROOT_JNI_GLOBAL: return "ROOT_JNI_GLOBAL";
    case LW_SUB_ROOT_JNI_LOCAL: return "ROOT_JNI_LOCAL";
    case LW_SUB_ROOT_JAVA_FRAME: return "ROOT_JAVA_FRAME";
    case LW_SUB_ROOT_NATIVE_STACK: return "ROOT_NATIVE_STACK";
    case LW_SUB_ROOT_STICKY_CLASS: return "ROOT_STICKY_CLASS";
    case LW_SUB_ROOT_THREAD_BLOCK: return "ROOT_THREAD_BLOCK";
    case LW_SUB_ROOT_MONITOR_USED: return "ROOT_MONITOR_USED";
    case LW_SUB_ROOT_THREAD_OBJECT: return "ROOT_THREAD_OBJECT";
    case LW_SUB_ROOT_INTERNED_STRING: return "ROOT_INTERNED_STRING";
    case LW_SUB_ROOT_FINALIZING: return "ROOT_FINALIZING";
    case LW_SUB_ROOT_DEBUGGER: return "ROOT_DEBUGGER";
    case LW_SUB_ROOT_REFERENCE_CLEANUP: return "ROOT_REFERENCE_CLEANUP";
    case LW_SUB_ROOT_VM_INTERNAL: return "ROOT_VM_INTERNAL";
    case LW_SUB_ROOT_JNI_MONITOR: return "ROOT_JNI_MONITOR";
    case LW_SUB_ROOT_UNREACHABLE: return "ROOT_UNREACHABLE";
    case LW_SUB_CLASS_DUMP: return "CLASS_DUMP";
    case LW_SUB_INSTANCE_DUMP: return "INSTANCE_DUMP";
    case LW_SUB_OBJECT_ARRAY_DUMP: return "OBJECT_ARRAY_DUMP";
    case LW_SUB_PRIMITIVE_ARRAY_DUMP: return "PRIMITIVE_ARRAY_DUMP";
    case LW_SUB_PRIMITIVE_ARRAY_NODATA: return "PRIMITIVE_ARRAY_NODATA";
    case LW_SUB_HEAP_DUMP_INFO: return "HEAP_DUMP_INFO";
    default: return "unknown sub-record";
    }
}

/* The first bytes parse_header looks at for the version string and its NUL. */
#define HPROF_HEAD 64
_Static_assert(HPROF_HEAD <= LW__ZSTD_HEAD_MAX, "the zstd head check holds HPROF_HEAD bytes");

/* The version string that starts an HPROF ("JAVA PROFILE 1.0.2" and a NUL), judged on the
 * `size` bytes at `d`: copies it (printable ASCII) into `version` and sets *after to the offset
 * past its NUL. The same verdict whether given the whole file or its first HPROF_HEAD bytes. */
static lw_status parse_version(const uint8_t *d, uint64_t size, char *version, size_t version_size, uint64_t *after,
                               lw_error *err) {
    if (size == 0) return lw__fail(err, LW_ERR_FORMAT, "offset 0: empty file: not an HPROF heap dump");
    uint64_t max = size < HPROF_HEAD ? size : HPROF_HEAD;
    const uint8_t *nul = memchr(d, 0, (size_t)max);
    if (!nul) return lw__fail(err, LW_ERR_FORMAT, "offset 0: not an HPROF heap dump (no version string in the first %llu bytes)",
                              (unsigned long long)max);
    size_t vlen = (size_t)(nul - d);
    if (vlen >= version_size || strncmp((const char *)d, "JAVA PROFILE 1.0", 16) != 0) {
        /* Quote only printable ASCII: the message ends up in logs and databases. */
        char shown[41];
        size_t n = vlen < 40 ? vlen : 40;
        for (size_t i = 0; i < n; i++) shown[i] = d[i] >= 0x20 && d[i] < 0x7f ? (char)d[i] : '?';
        shown[n] = 0;
        return lw__fail(err, LW_ERR_FORMAT, "offset 0: not an HPROF heap dump (header \"%s\")", shown);
    }
    for (size_t i = 0; i < vlen; i++) /* printable ASCII only: it is quoted in messages */
        version[i] = d[i] >= 0x20 && d[i] < 0x7f ? (char)d[i] : '?';
    version[vlen] = 0;
    if (strcmp(version, "JAVA PROFILE 1.0.1") != 0 && strcmp(version, "JAVA PROFILE 1.0.2") != 0 &&
        strcmp(version, "JAVA PROFILE 1.0.3") != 0)
        return lw__fail(err, LW_ERR_FORMAT, "offset 0: unsupported HPROF version \"%s\" (1.0.1, 1.0.2 and 1.0.3 are read)",
                        version);
    *after = vlen + 1;
    return LW_OK;
}

/* The header of the `size` bytes at `d`: version, identifier size, time stamp, and where the
 * records start. */
static lw_status parse_head(const uint8_t *d, uint64_t size, lw__hprof *h, lw_error *err) {
    uint64_t p;
    lw_status st = parse_version(d, size, h->version, sizeof h->version, &p, err);
    if (st != LW_OK) return st;
    if (size < p + 12)
        return lw__fail(err, LW_ERR_FORMAT, "offset %llu: truncated HPROF header (file is %llu bytes)",
                        (unsigned long long)p, (unsigned long long)size);
    h->id_size = lw__be32(d + p);
    if (h->id_size != 4 && h->id_size != 8)
        return lw__fail(err, LW_ERR_FORMAT, "offset %llu: unsupported identifier size %u (4 and 8 are read)",
                        (unsigned long long)p, h->id_size);
    h->timestamp_ms = lw__be64(d + p + 4);
    h->records_start = p + 12;
    return LW_OK;
}

static lw_status parse_header(lw__hprof *h, lw_error *err) { return parse_head(h->data, h->size, h, err); }

/* The head check of a compressed dump: content that does not start as an HPROF is refused
 * after its first block, not once the whole of it is on disk (a bomb of zeros). */
static lw_status check_decompressed_head(const uint8_t *head, size_t n, lw_error *err) {
    char version[sizeof ((lw__hprof *)0)->version];
    uint64_t after;
    return parse_version(head, n, version, sizeof version, &after, err);
}

static lw_status check_decompressed_feed(void *ctx, const uint8_t *p, size_t n, lw_error *err);

lw_status lw__hprof_open_memory(lw__hprof *h, const void *data, uint64_t size, lw_error *err) {
    memset(h, 0, sizeof *h);
    h->data = data;
    h->size = size;
    return parse_header(h, err);
}

static lw_status map_file(lw__hprof *h, const char *path, lw_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lw__fail(err, LW_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    lw_status st = LW_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = lw__fail(err, LW_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = lw__fail(err, LW_ERR_IO, "%s: not a regular file", path);
        goto out;
    }
    h->size = (uint64_t)sb.st_size;
    if (h->size == 0) {
        st = lw__fail(err, LW_ERR_FORMAT, "%s: offset 0: empty file: not an HPROF heap dump", path);
        goto out;
    }
    void *m = mmap(NULL, (size_t)h->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        st = lw__fail(err, LW_ERR_IO, "%s: cannot map %llu bytes: %s", path, (unsigned long long)h->size, strerror(errno));
        goto out;
    }
    /* Pass 1 reads sequentially, pass 2 jumps around: tell the kernel about the first. */
    madvise(m, (size_t)h->size, MADV_SEQUENTIAL);
    h->data = m;
    h->mapped = 1;
out:
    close(fd);
    return st;
}

lw_status lw__hprof_open_file(lw__hprof *h, const char *path, const lw_heap_options *opts, lw_error *err) {
    memset(h, 0, sizeof *h);
    lw_status st;
    int z = lw_is_zstd_file(path);
    if (z < 0) return lw__fail(err, LW_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    const char *open_path = path;
    if (z == 1) {
        const char *dir = opts && opts->tmp_dir ? opts->tmp_dir : getenv("TMPDIR");
        if (!dir || !*dir) dir = "/tmp";
        size_t n = strlen(dir) + 32;
        h->tmp_path = lw__malloc(n);
        if (!h->tmp_path) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
        snprintf(h->tmp_path, n, "%s/leakcore-XXXXXX", dir);
        int fd = mkstemp(h->tmp_path);
        if (fd < 0) {
            st = lw__fail(err, LW_ERR_IO, "cannot create a temp file in %s: %s", dir, strerror(errno));
            lw__free(h->tmp_path);
            h->tmp_path = NULL;
            return st;
        }
        close(fd);
        uint64_t cap = opts && opts->max_decompressed_bytes ? opts->max_decompressed_bytes : (64ull << 30);
        lw__hprof_check hc;
        lw__hprof_check_init(&hc);
        lw__zstd_checks zc = {check_decompressed_head, HPROF_HEAD, check_decompressed_feed, &hc};
        st = lw__zstd_decompress_file_checked(path, h->tmp_path, cap, &zc, err);
        lw__hprof_check_free(&hc);
        if (st != LW_OK) goto fail;
        open_path = h->tmp_path;
    }
    st = map_file(h, open_path, err);
    if (st != LW_OK) goto fail;
    if (h->tmp_path) {
        /* The mapping keeps the decompressed data alive: unlink it now, so that a crash or a
         * kill of this process can never leave it behind. */
        unlink(h->tmp_path);
        lw__free(h->tmp_path);
        h->tmp_path = NULL;
    }
    st = parse_header(h, err);
    if (st != LW_OK) {
        char msg[sizeof err->message];
        if (err) {
            memcpy(msg, err->message, sizeof msg);
            snprintf(err->message, sizeof err->message, "%.100s: %.400s", path, msg);
        }
        goto fail;
    }
    return LW_OK;
fail:
    lw__hprof_close(h);
    return st;
}

void lw__hprof_close(lw__hprof *h) {
    if (!h) return;
    if (h->mapped && h->data) munmap((void *)h->data, (size_t)h->size);
    if (h->tmp_path) {
        unlink(h->tmp_path);
        lw__free(h->tmp_path);
    }
    memset(h, 0, sizeof *h);
}

static int unknown_tag(lw_error *err, uint64_t at, unsigned tag) {
    lw__fail(err, LW_ERR_FORMAT, "offset %llu: unknown record tag 0x%02x: corrupt or unsupported file",
             (unsigned long long)at, tag);
    return -1;
}

int lw__hprof_record_at(const lw__hprof *h, uint64_t pos, lw__record *rec, lw_error *err) {
    if (pos >= h->size) return 0;
    if (h->size - pos < 9) {
        lw__fail(err, LW_ERR_FORMAT, "offset %llu: truncated record header (%llu bytes left, 9 needed)",
                 (unsigned long long)pos, (unsigned long long)(h->size - pos));
        return -1;
    }
    rec->tag = h->data[pos];
    /* Skipping what it does not know would let a dump of zeros pass as millions of empty
     * records: the format's tags have been the same since Java 6, and Android's are among them. */
    if (!known_tag_name(rec->tag)) return unknown_tag(err, pos, rec->tag);
    rec->offset = pos;
    rec->body = pos + 9;
    rec->length = lw__be32(h->data + pos + 5);
    if (rec->length > h->size - rec->body) {
        lw__fail(err, LW_ERR_FORMAT, "offset %llu: %s record (tag 0x%02x) of %llu bytes runs past the end of the file "
                 "(%llu bytes left): truncated file",
                 (unsigned long long)pos, lw__hprof_tag_name(rec->tag), rec->tag, (unsigned long long)rec->length,
                 (unsigned long long)(h->size - rec->body));
        return -1;
    }
    return 1;
}

/* The sub-record helpers below return -1 and fill err when `need` bytes at `p` pass `end`. */
static int past(uint64_t p, uint64_t need, uint64_t end) { return p > end || need > end - p; }

static int truncated(lw_error *err, uint64_t start, unsigned tag, uint64_t at, uint64_t end) {
    lw__fail(err, LW_ERR_FORMAT, "offset %llu: %s sub-record runs past its heap-dump segment's end at %llu "
             "(reading offset %llu): truncated or corrupt",
             (unsigned long long)start, lw__hprof_subtag_name(tag), (unsigned long long)end, (unsigned long long)at);
    return -1;
}

/* Measures the sub-record at `d`, file offset `at`, which must end within `end` bytes (its
 * segment's end). Only `avail` (≤ end) bytes of it are at hand: when the mapped reader asks,
 * all of them; when a dump being decompressed is judged, what has come. Returns 0 with *len,
 * -1 with err filled, or 1 when bytes past `avail` must be read to tell (never when
 * avail == end). Payloads are measured, not read: an array needs only its header at hand.
 * Inlined: pass 1 measures every object with it, and a call more cost it 10 % more instructions. */
static inline __attribute__((always_inline)) int measure_sub(const uint8_t *d, uint64_t avail, uint64_t end,
                                                             unsigned ids, uint64_t at, uint64_t *len, lw_error *err) {
/* `n` bytes at `q` are read: past what is at hand, more is needed, or they pass the end */
#define LW_READS(q, n)                                                                    \
    do {                                                                                  \
        if (past((q), (n), avail))                                                        \
            return past((q), (n), end) ? truncated(err, at, tag, at + (q), at + end) : 1; \
    } while (0)
    const uint8_t tag = d[0];
    const uint64_t p = 1;
    int extra = lw__root_extra_bytes(tag, ids);
    if (extra >= 0) {
        *len = 1 + ids + (uint64_t)extra;
        if (past(0, *len, end)) return truncated(err, at, tag, at, at + end);
        return 0;
    }
    switch (tag) {
    case LW_SUB_INSTANCE_DUMP: {
        uint64_t hdr = (uint64_t)2 * ids + 8;
        LW_READS(p, hdr);
        uint64_t nbytes = lw__be32(d + p + 2 * ids + 4);
        if (past(p + hdr, nbytes, end)) return truncated(err, at, tag, at + p + hdr, at + end);
        *len = 1 + hdr + nbytes;
        return 0;
    }
    case LW_SUB_OBJECT_ARRAY_DUMP: {
        uint64_t hdr = (uint64_t)2 * ids + 8;
        LW_READS(p, hdr);
        uint64_t count = lw__be32(d + p + ids + 4);
        uint64_t bytes = count * ids; /* < 2^35: no overflow */
        if (past(p + hdr, bytes, end)) return truncated(err, at, tag, at + p + hdr, at + end);
        *len = 1 + hdr + bytes;
        return 0;
    }
    case LW_SUB_PRIMITIVE_ARRAY_DUMP:
    case LW_SUB_PRIMITIVE_ARRAY_NODATA: {
        uint64_t hdr = (uint64_t)ids + 9;
        LW_READS(p, hdr);
        uint64_t count = lw__be32(d + p + ids + 4);
        unsigned type = d[p + ids + 8];
        unsigned es = lw__type_size(type, ids);
        if (es == 0 || type == LW_T_OBJECT) {
            lw__fail(err, LW_ERR_FORMAT, "offset %llu: %s has invalid element type %u", (unsigned long long)at,
                     lw__hprof_subtag_name(tag), type);
            return -1;
        }
        uint64_t bytes = tag == LW_SUB_PRIMITIVE_ARRAY_NODATA ? 0 : count * es;
        if (past(p + hdr, bytes, end)) return truncated(err, at, tag, at + p + hdr, at + end);
        *len = 1 + hdr + bytes;
        return 0;
    }
    case LW_SUB_CLASS_DUMP: {
        uint64_t q = p + 7 * (uint64_t)ids + 8;
        LW_READS(p, q - p + 2);
        uint64_t cp = lw__be16(d + q);
        q += 2;
        for (uint64_t i = 0; i < cp; i++) {
            LW_READS(q, 3);
            unsigned s = lw__type_size(d[q + 2], ids);
            if (s == 0) goto bad_type;
            q += 3 + s;
        }
        LW_READS(q, 2);
        uint64_t ns = lw__be16(d + q);
        q += 2;
        for (uint64_t i = 0; i < ns; i++) {
            LW_READS(q, (uint64_t)ids + 1);
            unsigned s = lw__type_size(d[q + ids], ids);
            if (s == 0) goto bad_type;
            q += ids + 1 + s;
        }
        LW_READS(q, 2);
        uint64_t nf = lw__be16(d + q);
        q += 2;
        for (uint64_t i = 0; i < nf; i++) {
            LW_READS(q, (uint64_t)ids + 1);
            if (lw__type_size(d[q + ids], ids) == 0) goto bad_type;
            q += ids + 1;
        }
        if (q > end) return truncated(err, at, tag, at + q, at + end);
        *len = q;
        return 0;
    bad_type:
        lw__fail(err, LW_ERR_FORMAT, "offset %llu: CLASS_DUMP has a field of invalid type", (unsigned long long)at);
        return -1;
    }
    case LW_SUB_HEAP_DUMP_INFO:
        *len = 1 + 4 + (uint64_t)ids;
        if (past(0, *len, end)) return truncated(err, at, tag, at, at + end);
        return 0;
    default:
        lw__fail(err, LW_ERR_FORMAT, "offset %llu: unknown heap-dump sub-record tag 0x%02x: corrupt or unsupported file",
                 (unsigned long long)at, tag);
        return -1;
    }
#undef LW_READS
}

int lw__hprof_subrecord_at(const lw__hprof *h, uint64_t pos, uint64_t end, lw__subrecord *sub, lw_error *err) {
    uint64_t len = 0;
    /* all of it is at hand: measure_sub never asks for more */
    if (measure_sub(h->data + pos, end - pos, end - pos, h->id_size, pos, &len, err) != 0) return -1;
    sub->tag = h->data[pos];
    sub->offset = pos;
    sub->length = len;
    return 0;
}

/* ---- judging a dump as it is decompressed ------------------------------------------------ */

/* The most the check gathers of one item: a CLASS_DUMP of 65,535 constants, statics and fields
 * of 8-byte values is under 2.5 MB; everything else it reads is a header of at most 76 bytes. */
#define CHECK_GATHER_MAX (4u << 20)

void lw__hprof_check_init(lw__hprof_check *c) { memset(c, 0, sizeof *c); }

void lw__hprof_check_free(lw__hprof_check *c) {
    lw__free(c->buf);
    memset(c, 0, sizeof *c);
}

/* Judges the item at `d` (file offset c->at; `avail` bytes of it at hand): the header, a record
 * header, or a heap-dump sub-record. Returns 0 with *len (which may pass `avail`: the rest is
 * skipped as it comes), 1 when more bytes are needed, -1 with err filled. */
static int judge(lw__hprof_check *c, const uint8_t *d, uint64_t avail, uint64_t *len, lw_error *err) {
    if (!c->id_size) { /* the verdict is final once the version's NUL and 12 bytes more are at hand */
        const uint8_t *nul = memchr(d, 0, avail < HPROF_HEAD ? (size_t)avail : HPROF_HEAD);
        if (!nul ? avail < HPROF_HEAD : (uint64_t)(nul - d) + 13 > avail) return 1;
        lw__hprof h = {0};
        if (parse_head(d, avail, &h, err) != LW_OK) return -1;
        c->id_size = h.id_size;
        *len = h.records_start;
        return 0;
    }
    if (c->in_segment && c->at == c->segment_end) c->in_segment = 0;
    if (c->in_segment) {
        uint64_t end = c->segment_end - c->at;
        return measure_sub(d, avail < end ? avail : end, end, c->id_size, c->at, len, err);
    }
    if (avail < 9) return 1;
    if (!known_tag_name(d[0])) return unknown_tag(err, c->at, d[0]);
    uint64_t body = lw__be32(d + 5);
    if (d[0] == LW_TAG_HEAP_DUMP || d[0] == LW_TAG_HEAP_DUMP_SEGMENT) {
        c->in_segment = 1;
        c->segment_end = c->at + 9 + body;
        *len = 9;
    } else
        *len = 9 + body;
    return 0;
}

/* Judges the items that start in the `n` bytes at `d`: returns how many bytes were used (the
 * rest, the start of an item that needs more, is for the caller to keep), or -1. */
static int64_t judge_all(lw__hprof_check *c, const uint8_t *d, size_t n, lw_error *err) {
    size_t off = 0;
    while (off < n) {
        uint64_t len = 0;
        int r = judge(c, d + off, n - off, &len, err);
        if (r < 0) return -1;
        if (r > 0) break;
        c->at += len;
        if (len > n - off) {
            c->skip = len - (n - off);
            return (int64_t)n;
        }
        off += len;
    }
    return (int64_t)off;
}

/* Makes room for `want` gathered bytes. */
static lw_status gather_room(lw__hprof_check *c, size_t want, lw_error *err) {
    if (want <= c->cap) return LW_OK;
    if (want > CHECK_GATHER_MAX)
        return lw__fail(err, LW_ERR_FORMAT, "offset %llu: a heap-dump sub-record that %u bytes do not measure: corrupt file",
                        (unsigned long long)c->at, CHECK_GATHER_MAX);
    size_t cap = c->cap ? c->cap : 64 * 1024;
    while (cap < want) cap *= 2;
    if (cap > CHECK_GATHER_MAX) cap = CHECK_GATHER_MAX;
    uint8_t *b = lw__realloc(c->buf, cap);
    if (!b) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
    c->buf = b;
    c->cap = cap;
    return LW_OK;
}

/* The rest of a compressed dump: a bomb of zeros after a valid header fails at its first
 * record, a dump corrupt in the middle where it is, not once written out to the cap. */
static lw_status check_decompressed_feed(void *ctx, const uint8_t *p, size_t n, lw_error *err) {
    return n ? lw__hprof_check_feed(ctx, p, n, err) : lw__hprof_check_end(ctx, err);
}

/* Keeps the start of an unfinished item (c->buf holds `n` bytes of it, moved to the front). It
 * is measured from its start again each time (a CLASS_DUMP may need 2.4 MB), so it is judged
 * again only when half as much again has come, or the content ends: fed a byte at a time (a
 * zstd frame a byte, which an uploader may write), a class dump was measured once a byte, and
 * 65 KB of it took 1.35 s (review, 2026-12-03). */
static void keep_unfinished(lw__hprof_check *c) {
    c->want = c->n + c->n / 2 + 1;
    if (c->want > CHECK_GATHER_MAX) c->want = CHECK_GATHER_MAX;
}

lw_status lw__hprof_check_feed(lw__hprof_check *c, const uint8_t *p, size_t n, lw_error *err) {
    while (n) {
        if (c->skip) {
            size_t k = c->skip < n ? (size_t)c->skip : n;
            c->skip -= k;
            p += k;
            n -= k;
            continue;
        }
        if (!c->n) { /* judged where it lies; what starts an unfinished item is gathered */
            int64_t used = judge_all(c, p, n, err);
            if (used < 0) return LW_ERR_FORMAT;
            p += used;
            n -= (size_t)used;
            if (c->skip || !n) continue;
            lw_status st = gather_room(c, n, err);
            if (st != LW_OK) return st;
            memcpy(c->buf, p, n);
            c->n = n;
            keep_unfinished(c);
            return LW_OK;
        }
        /* an unfinished item: add to it (doubling its room when full) as much again as it has,
         * at least 256 bytes (more than any header), and judge again */
        lw_status st = gather_room(c, c->n < c->cap ? c->cap : c->cap * 2, err);
        if (st != LW_OK) return st;
        size_t had = c->n, k = had > 256 ? had : 256;
        if (k > c->cap - had) k = c->cap - had;
        if (k > n) k = n;
        memcpy(c->buf + had, p, k);
        c->n += k;
        p += k;
        n -= k;
        if (c->n < c->want) continue;
        int64_t used = judge_all(c, c->buf, c->n, err);
        if (used < 0) return LW_ERR_FORMAT;
        if ((size_t)used >= had) { /* it is judged: what follows is judged where it lies */
            size_t back = c->n - (size_t)used;
            p -= back;
            n += back;
            c->n = 0;
            c->want = 0;
            continue;
        }
        memmove(c->buf, c->buf + used, c->n - (size_t)used);
        c->n -= (size_t)used;
        keep_unfinished(c);
    }
    return LW_OK;
}

lw_status lw__hprof_check_end(lw__hprof_check *c, lw_error *err) {
    if (!c->n) return LW_OK;
    int64_t used = judge_all(c, c->buf, c->n, err);
    if (used < 0) return LW_ERR_FORMAT;
    memmove(c->buf, c->buf + used, c->n - (size_t)used);
    c->n -= (size_t)used;
    c->want = 0;
    return LW_OK;
}
