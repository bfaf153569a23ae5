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

const char *lw__hprof_tag_name(unsigned tag) {
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
    default: return "unknown record";
    }
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

static lw_status parse_header(lw__hprof *h, lw_error *err) {
    uint64_t p;
    lw_status st = parse_version(h->data, h->size, h->version, sizeof h->version, &p, err);
    if (st != LW_OK) return st;
    if (h->size < p + 12)
        return lw__fail(err, LW_ERR_FORMAT, "offset %llu: truncated HPROF header (file is %llu bytes)",
                        (unsigned long long)p, (unsigned long long)h->size);
    h->id_size = lw__be32(h->data + p);
    if (h->id_size != 4 && h->id_size != 8)
        return lw__fail(err, LW_ERR_FORMAT, "offset %llu: unsupported identifier size %u (4 and 8 are read)",
                        (unsigned long long)p, h->id_size);
    h->timestamp_ms = lw__be64(h->data + p + 4);
    h->records_start = p + 12;
    return LW_OK;
}

/* The head check of a compressed dump: content that does not start as an HPROF is refused
 * after its first block, not once the whole of it is on disk (a bomb of zeros). */
static lw_status check_decompressed_head(const uint8_t *head, size_t n, lw_error *err) {
    char version[sizeof ((lw__hprof *)0)->version];
    uint64_t after;
    return parse_version(head, n, version, sizeof version, &after, err);
}

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
        st = lw__zstd_decompress_file_checked(path, h->tmp_path, cap, check_decompressed_head, HPROF_HEAD, err);
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

int lw__hprof_record_at(const lw__hprof *h, uint64_t pos, lw__record *rec, lw_error *err) {
    if (pos >= h->size) return 0;
    if (h->size - pos < 9) {
        lw__fail(err, LW_ERR_FORMAT, "offset %llu: truncated record header (%llu bytes left, 9 needed)",
                 (unsigned long long)pos, (unsigned long long)(h->size - pos));
        return -1;
    }
    rec->tag = h->data[pos];
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

int lw__hprof_subrecord_at(const lw__hprof *h, uint64_t pos, uint64_t end, lw__subrecord *sub, lw_error *err) {
    const uint8_t *d = h->data;
    const unsigned ids = h->id_size;
    uint8_t tag = d[pos];
    uint64_t p = pos + 1;
    uint64_t len;
    sub->tag = tag;
    sub->offset = pos;
    int extra = lw__root_extra_bytes(tag, ids);
    if (extra >= 0) {
        len = 1 + ids + (uint64_t)extra;
        if (past(pos, len, end)) return truncated(err, pos, tag, pos, end);
        sub->length = len;
        return 0;
    }
    switch (tag) {
    case LW_SUB_INSTANCE_DUMP: {
        uint64_t hdr = (uint64_t)2 * ids + 8;
        if (past(p, hdr, end)) return truncated(err, pos, tag, p, end);
        uint64_t nbytes = lw__be32(d + p + 2 * ids + 4);
        if (past(p + hdr, nbytes, end)) return truncated(err, pos, tag, p + hdr, end);
        len = 1 + hdr + nbytes;
        break;
    }
    case LW_SUB_OBJECT_ARRAY_DUMP: {
        uint64_t hdr = (uint64_t)2 * ids + 8;
        if (past(p, hdr, end)) return truncated(err, pos, tag, p, end);
        uint64_t count = lw__be32(d + p + ids + 4);
        uint64_t bytes = count * ids; /* < 2^35: no overflow */
        if (past(p + hdr, bytes, end)) return truncated(err, pos, tag, p + hdr, end);
        len = 1 + hdr + bytes;
        break;
    }
    case LW_SUB_PRIMITIVE_ARRAY_DUMP:
    case LW_SUB_PRIMITIVE_ARRAY_NODATA: {
        uint64_t hdr = (uint64_t)ids + 9;
        if (past(p, hdr, end)) return truncated(err, pos, tag, p, end);
        uint64_t count = lw__be32(d + p + ids + 4);
        unsigned type = d[p + ids + 8];
        unsigned es = lw__type_size(type, ids);
        if (es == 0 || type == LW_T_OBJECT) {
            lw__fail(err, LW_ERR_FORMAT, "offset %llu: %s has invalid element type %u", (unsigned long long)pos,
                     lw__hprof_subtag_name(tag), type);
            return -1;
        }
        uint64_t bytes = tag == LW_SUB_PRIMITIVE_ARRAY_NODATA ? 0 : count * es;
        if (past(p + hdr, bytes, end)) return truncated(err, pos, tag, p + hdr, end);
        len = 1 + hdr + bytes;
        break;
    }
    case LW_SUB_CLASS_DUMP: {
        uint64_t q = p + 7 * (uint64_t)ids + 8;
        if (past(p, q - p + 2, end)) return truncated(err, pos, tag, p, end);
        uint64_t cp = lw__be16(d + q);
        q += 2;
        for (uint64_t i = 0; i < cp; i++) {
            if (past(q, 3, end)) return truncated(err, pos, tag, q, end);
            unsigned t = d[q + 2];
            unsigned s = lw__type_size(t, ids);
            if (s == 0) goto bad_type;
            q += 3 + s;
        }
        if (past(q, 2, end)) return truncated(err, pos, tag, q, end);
        uint64_t ns = lw__be16(d + q);
        q += 2;
        for (uint64_t i = 0; i < ns; i++) {
            if (past(q, (uint64_t)ids + 1, end)) return truncated(err, pos, tag, q, end);
            unsigned t = d[q + ids];
            unsigned s = lw__type_size(t, ids);
            if (s == 0) goto bad_type;
            q += ids + 1 + s;
        }
        if (past(q, 2, end)) return truncated(err, pos, tag, q, end);
        uint64_t nf = lw__be16(d + q);
        q += 2;
        for (uint64_t i = 0; i < nf; i++) {
            if (past(q, (uint64_t)ids + 1, end)) return truncated(err, pos, tag, q, end);
            unsigned t = d[q + ids];
            if (lw__type_size(t, ids) == 0) goto bad_type;
            q += ids + 1;
        }
        if (q > end) return truncated(err, pos, tag, q, end);
        len = q - pos;
        break;
    bad_type:
        lw__fail(err, LW_ERR_FORMAT, "offset %llu: CLASS_DUMP has a field of invalid type", (unsigned long long)pos);
        return -1;
    }
    case LW_SUB_HEAP_DUMP_INFO:
        len = 1 + 4 + (uint64_t)ids;
        if (past(pos, len, end)) return truncated(err, pos, tag, pos, end);
        break;
    default:
        lw__fail(err, LW_ERR_FORMAT, "offset %llu: unknown heap-dump sub-record tag 0x%02x: corrupt or unsupported file",
                 (unsigned long long)pos, tag);
        return -1;
    }
    sub->length = len;
    return 0;
}
