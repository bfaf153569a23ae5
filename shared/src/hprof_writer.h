/* hprof_writer.h — streams a valid HPROF file: used by the trimmer, the tests' synthetic
 * dumps and the benchmark generator. Internal to libleakcore (lw__ names). */
#ifndef LW_HPROF_WRITER_H
#define LW_HPROF_WRITER_H

#include "common.h"
#include "hprof_format.h"

typedef struct lw__hprof_writer lw__hprof_writer;

/* Creates `path` and writes the header. `version` is "JAVA PROFILE 1.0.2" or "1.0.3";
 * `id_size` 4 or 8. Heap-dump sub-records go into HEAP_DUMP_SEGMENT records of at most
 * `segment_max` bytes each (0 = 1 GiB); the writer seeks back to patch each segment's
 * length, so `path` must be a regular file. */
lw_status lw__hprof_writer_open(lw__hprof_writer **out, const char *path, const char *version,
                                unsigned id_size, uint64_t timestamp_ms, uint64_t segment_max, lw_error *err);

/* Flushes, closes and frees; returns the first error met by any earlier call (calls after
 * an error do nothing), so callers may check only here. NULL is a no-op returning LW_OK. */
lw_status lw__hprof_writer_close(lw__hprof_writer *w, lw_error *err);

/* Bytes written so far. */
uint64_t lw__hprof_writer_offset(const lw__hprof_writer *w);
unsigned lw__hprof_writer_id_size(const lw__hprof_writer *w);

/* Top-level records. A heap-dump segment in progress is closed first. */
void lw__hprof_writer_string(lw__hprof_writer *w, uint64_t id, const char *utf8, size_t len);
void lw__hprof_writer_load_class(lw__hprof_writer *w, uint32_t serial, uint64_t class_id, uint32_t stack_serial,
                                 uint64_t name_string_id);
/* Any top-level record given as its body bytes (e.g. STACK_TRACE, or a tag to test). */
void lw__hprof_writer_record(lw__hprof_writer *w, uint8_t tag, const void *body, uint32_t len);

/* Heap-dump sub-records: opened in a segment on demand. */
/* A root: `a` and `b` are the tag's extra u4 fields (thread serial, frame number...), used
 * only by the tags that have them; JNI_GLOBAL's second id is `a`. */
void lw__hprof_writer_root(lw__hprof_writer *w, uint8_t sub_tag, uint64_t id, uint32_t a, uint32_t b);

typedef struct lw__hprof_field_def {
    uint64_t name_id; /* string id of the field name */
    uint8_t type;     /* LW_T_* */
    uint64_t value;   /* static fields only: the value's bits (id, or the raw integer/float bits) */
} lw__hprof_field_def;

typedef struct lw__hprof_class_def {
    uint64_t id, super_id, loader_id;
    uint32_t stack_serial;
    uint32_t instance_size;
    const lw__hprof_field_def *statics;
    size_t static_count;
    const lw__hprof_field_def *fields; /* declared instance fields, in order */
    size_t field_count;
} lw__hprof_class_def;

void lw__hprof_writer_class_dump(lw__hprof_writer *w, const lw__hprof_class_def *c);
/* `data` holds the instance's field values, big-endian, own class first then supers. */
void lw__hprof_writer_instance(lw__hprof_writer *w, uint64_t id, uint32_t stack_serial, uint64_t class_id,
                               const void *data, uint32_t len);
void lw__hprof_writer_object_array(lw__hprof_writer *w, uint64_t id, uint32_t stack_serial, uint64_t array_class_id,
                                   const uint64_t *elements, uint32_t count);
/* `data` is `count` elements already big-endian, or NULL for all zeros. */
void lw__hprof_writer_primitive_array(lw__hprof_writer *w, uint64_t id, uint32_t stack_serial, uint8_t type,
                                      const void *data, uint32_t count);
void lw__hprof_writer_heap_dump_info(lw__hprof_writer *w, uint32_t heap_id, uint64_t name_string_id);
/* Raw sub-record bytes (tag included), copied as they are. */
void lw__hprof_writer_subrecord_raw(lw__hprof_writer *w, const void *bytes, uint64_t len);
/* Ends the heap dump: closes the open segment and writes HEAP_DUMP_END. */
void lw__hprof_writer_end_heap_dump(lw__hprof_writer *w);

#endif
