/* hprof_writer.c — streams HPROF records to a file, segmenting the heap dump. */
#define _FILE_OFFSET_BITS 64
#define _POSIX_C_SOURCE 200809L
#include "hprof_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct lw__hprof_writer {
    FILE *f;
    char *path;
    unsigned id_size;
    uint64_t offset;          /* bytes written */
    uint64_t segment_max;
    int in_segment;
    uint64_t segment_len_at;  /* file offset of the open segment's u4 length */
    uint64_t segment_len;
    int heap_dump_started;
    lw_status status;
    lw_error err;
};

static void put(lw__hprof_writer *w, const void *p, size_t n) {
    if (w->status != LW_OK || n == 0) return;
    if (fwrite(p, 1, n, w->f) != n) {
        w->status = lw__fail(&w->err, LW_ERR_IO, "%s: write failed at offset %llu: %s", w->path,
                             (unsigned long long)w->offset, strerror(errno));
        return;
    }
    w->offset += n;
    if (w->in_segment) w->segment_len += n;
}

static void put_u1(lw__hprof_writer *w, uint8_t v) { put(w, &v, 1); }
static void put_u2(lw__hprof_writer *w, uint16_t v) { uint8_t b[2]; lw__put_be16(b, v); put(w, b, 2); }
static void put_u4(lw__hprof_writer *w, uint32_t v) { uint8_t b[4]; lw__put_be32(b, v); put(w, b, 4); }
static void put_id(lw__hprof_writer *w, uint64_t v) { uint8_t b[8]; lw__put_be_id(b, v, w->id_size); put(w, b, w->id_size); }
static void put_value(lw__hprof_writer *w, uint8_t type, uint64_t v) {
    unsigned n = lw__type_size(type, w->id_size);
    uint8_t b[8];
    for (unsigned i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    put(w, b, n);
}

lw_status lw__hprof_writer_open(lw__hprof_writer **out, const char *path, const char *version, unsigned id_size,
                                uint64_t timestamp_ms, uint64_t segment_max, lw_error *err) {
    if (!out || !path || !version || (id_size != 4 && id_size != 8))
        return lw__fail(err, LW_ERR_USAGE, "hprof writer: bad arguments");
    lw__hprof_writer *w = lw__calloc(1, sizeof *w);
    if (!w) return lw__fail(err, LW_ERR_NOMEM, "hprof writer: out of memory");
    w->path = lw__strdup(path);
    w->f = fopen(path, "wb");
    if (!w->path || !w->f) {
        lw_status st = w->path ? lw__fail(err, LW_ERR_IO, "%s: cannot create: %s", path, strerror(errno))
                               : lw__fail(err, LW_ERR_NOMEM, "hprof writer: out of memory");
        if (w->f) fclose(w->f);
        lw__free(w->path);
        lw__free(w);
        return st;
    }
    setvbuf(w->f, NULL, _IOFBF, 1 << 20);
    w->id_size = id_size;
    w->segment_max = segment_max ? segment_max : (1ull << 30);
    put(w, version, strlen(version) + 1);
    put_u4(w, id_size);
    put_u4(w, (uint32_t)(timestamp_ms >> 32));
    put_u4(w, (uint32_t)timestamp_ms);
    *out = w;
    return LW_OK;
}

uint64_t lw__hprof_writer_offset(const lw__hprof_writer *w) { return w->offset; }
unsigned lw__hprof_writer_id_size(const lw__hprof_writer *w) { return w->id_size; }

static void close_segment(lw__hprof_writer *w) {
    if (!w->in_segment) return;
    w->in_segment = 0;
    if (w->status != LW_OK) return;
    if (w->segment_len > UINT32_MAX) {
        w->status = lw__fail(&w->err, LW_ERR_LIMIT, "%s: a heap-dump segment of %llu bytes does not fit HPROF's u4 length",
                             w->path, (unsigned long long)w->segment_len);
        return;
    }
    uint8_t b[4];
    lw__put_be32(b, (uint32_t)w->segment_len);
    if (fflush(w->f) != 0 || fseeko(w->f, (off_t)w->segment_len_at, SEEK_SET) != 0 || fwrite(b, 1, 4, w->f) != 4 ||
        fseeko(w->f, (off_t)w->offset, SEEK_SET) != 0) {
        w->status = lw__fail(&w->err, LW_ERR_IO, "%s: cannot patch segment length: %s", w->path, strerror(errno));
    }
}

static void record_header(lw__hprof_writer *w, uint8_t tag, uint32_t len) {
    close_segment(w);
    put_u1(w, tag);
    put_u4(w, 0); /* microseconds since the header's timestamp */
    put_u4(w, len);
}

/* Makes room for a sub-record of `len` bytes in a segment. */
static void need_segment(lw__hprof_writer *w, uint64_t len) {
    if (w->in_segment && w->segment_len + len > w->segment_max) close_segment(w);
    if (w->in_segment) return;
    put_u1(w, LW_TAG_HEAP_DUMP_SEGMENT);
    put_u4(w, 0);
    w->segment_len_at = w->offset;
    put_u4(w, 0);
    w->in_segment = 1;
    w->segment_len = 0;
    w->heap_dump_started = 1;
}

void lw__hprof_writer_string(lw__hprof_writer *w, uint64_t id, const char *utf8, size_t len) {
    record_header(w, LW_TAG_STRING, (uint32_t)(w->id_size + len));
    put_id(w, id);
    put(w, utf8, len);
}

void lw__hprof_writer_load_class(lw__hprof_writer *w, uint32_t serial, uint64_t class_id, uint32_t stack_serial,
                                 uint64_t name_string_id) {
    record_header(w, LW_TAG_LOAD_CLASS, 8 + 2 * w->id_size);
    put_u4(w, serial);
    put_id(w, class_id);
    put_u4(w, stack_serial);
    put_id(w, name_string_id);
}

void lw__hprof_writer_record(lw__hprof_writer *w, uint8_t tag, const void *body, uint32_t len) {
    record_header(w, tag, len);
    put(w, body, len);
}

void lw__hprof_writer_root(lw__hprof_writer *w, uint8_t sub_tag, uint64_t id, uint32_t a, uint32_t b) {
    int extra = lw__root_extra_bytes(sub_tag, w->id_size);
    if (extra < 0) {
        if (w->status == LW_OK) w->status = lw__fail(&w->err, LW_ERR_USAGE, "hprof writer: 0x%02x is no root tag", sub_tag);
        return;
    }
    need_segment(w, 1 + w->id_size + (unsigned)extra);
    put_u1(w, sub_tag);
    put_id(w, id);
    if (sub_tag == LW_SUB_ROOT_JNI_GLOBAL) {
        put_id(w, a);
    } else if (extra >= 4) {
        put_u4(w, a);
        if (extra == 8) put_u4(w, b);
    }
}

void lw__hprof_writer_class_dump(lw__hprof_writer *w, const lw__hprof_class_def *c) {
    uint64_t len = 1 + 7 * (uint64_t)w->id_size + 8 + 2 + 2 + 2;
    for (size_t i = 0; i < c->static_count; i++) len += w->id_size + 1 + lw__type_size(c->statics[i].type, w->id_size);
    len += (uint64_t)c->field_count * (w->id_size + 1);
    need_segment(w, len);
    put_u1(w, LW_SUB_CLASS_DUMP);
    put_id(w, c->id);
    put_u4(w, c->stack_serial);
    put_id(w, c->super_id);
    put_id(w, c->loader_id);
    put_id(w, 0); /* signers */
    put_id(w, 0); /* protection domain */
    put_id(w, 0); /* reserved */
    put_id(w, 0); /* reserved */
    put_u4(w, c->instance_size);
    put_u2(w, 0); /* constant pool */
    put_u2(w, (uint16_t)c->static_count);
    for (size_t i = 0; i < c->static_count; i++) {
        put_id(w, c->statics[i].name_id);
        put_u1(w, c->statics[i].type);
        put_value(w, c->statics[i].type, c->statics[i].value);
    }
    put_u2(w, (uint16_t)c->field_count);
    for (size_t i = 0; i < c->field_count; i++) {
        put_id(w, c->fields[i].name_id);
        put_u1(w, c->fields[i].type);
    }
}

void lw__hprof_writer_instance(lw__hprof_writer *w, uint64_t id, uint32_t stack_serial, uint64_t class_id,
                               const void *data, uint32_t len) {
    need_segment(w, 1 + 2 * (uint64_t)w->id_size + 8 + len);
    put_u1(w, LW_SUB_INSTANCE_DUMP);
    put_id(w, id);
    put_u4(w, stack_serial);
    put_id(w, class_id);
    put_u4(w, len);
    put(w, data, len);
}

void lw__hprof_writer_object_array(lw__hprof_writer *w, uint64_t id, uint32_t stack_serial, uint64_t array_class_id,
                                   const uint64_t *elements, uint32_t count) {
    need_segment(w, 1 + 2 * (uint64_t)w->id_size + 8 + (uint64_t)count * w->id_size);
    put_u1(w, LW_SUB_OBJECT_ARRAY_DUMP);
    put_id(w, id);
    put_u4(w, stack_serial);
    put_u4(w, count);
    put_id(w, array_class_id);
    for (uint32_t i = 0; i < count; i++) put_id(w, elements ? elements[i] : 0);
}

void lw__hprof_writer_primitive_array(lw__hprof_writer *w, uint64_t id, uint32_t stack_serial, uint8_t type,
                                      const void *data, uint32_t count) {
    uint64_t bytes = (uint64_t)count * lw__type_size(type, w->id_size);
    need_segment(w, 1 + (uint64_t)w->id_size + 9 + bytes);
    put_u1(w, LW_SUB_PRIMITIVE_ARRAY_DUMP);
    put_id(w, id);
    put_u4(w, stack_serial);
    put_u4(w, count);
    put_u1(w, type);
    if (data) {
        put(w, data, (size_t)bytes);
    } else if (bytes >= (64u << 20) && w->status == LW_OK) {
        /* A long run of zeros becomes a hole: tests of multi-GiB dumps cost no disk. */
        if (fseeko(w->f, (off_t)bytes, SEEK_CUR) != 0) {
            w->status = lw__fail(&w->err, LW_ERR_IO, "%s: seek failed: %s", w->path, strerror(errno));
            return;
        }
        w->offset += bytes;
        if (w->in_segment) w->segment_len += bytes;
    } else {
        static const uint8_t zeros[4096];
        while (bytes > 0) {
            size_t n = bytes > sizeof zeros ? sizeof zeros : (size_t)bytes;
            put(w, zeros, n);
            bytes -= n;
        }
    }
}

void lw__hprof_writer_heap_dump_info(lw__hprof_writer *w, uint32_t heap_id, uint64_t name_string_id) {
    need_segment(w, 1 + 4 + (uint64_t)w->id_size);
    put_u1(w, LW_SUB_HEAP_DUMP_INFO);
    put_u4(w, heap_id);
    put_id(w, name_string_id);
}

void lw__hprof_writer_subrecord_raw(lw__hprof_writer *w, const void *bytes, uint64_t len) {
    need_segment(w, len);
    put(w, bytes, (size_t)len);
}

void lw__hprof_writer_end_heap_dump(lw__hprof_writer *w) {
    close_segment(w);
    if (!w->heap_dump_started) return;
    record_header(w, LW_TAG_HEAP_DUMP_END, 0);
    w->heap_dump_started = 0;
}

lw_status lw__hprof_writer_close(lw__hprof_writer *w, lw_error *err) {
    if (!w) return LW_OK;
    close_segment(w);
    /* A trailing hole must still count in the file's size. */
    if (w->status == LW_OK && (fflush(w->f) != 0 || ftruncate(fileno(w->f), (off_t)w->offset) != 0))
        w->status = lw__fail(&w->err, LW_ERR_IO, "%s: cannot set the file size: %s", w->path, strerror(errno));
    if (fflush(w->f) != 0 && w->status == LW_OK)
        w->status = lw__fail(&w->err, LW_ERR_IO, "%s: flush failed: %s", w->path, strerror(errno));
    if (fclose(w->f) != 0 && w->status == LW_OK)
        w->status = lw__fail(&w->err, LW_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
    lw_status st = w->status;
    if (st != LW_OK && err) *err = w->err;
    lw__free(w->path);
    lw__free(w);
    return st;
}
