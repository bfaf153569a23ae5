/* hprof_reader.h — maps an HPROF file and walks its records with every read bounds-checked.
 * Errors name the byte offset and the record. Internal to libleakcore. */
#ifndef LW_HPROF_READER_H
#define LW_HPROF_READER_H

#include "common.h"
#include "hprof_format.h"

typedef struct lw__hprof {
    const uint8_t *data;   /* the whole file, mapped read-only (or borrowed memory) */
    uint64_t size;
    int mapped;            /* data is an mmap we must unmap */
    char *tmp_path;        /* decompressed temp file we unlink on close, or NULL */
    char version[32];
    unsigned id_size;      /* 4 or 8 */
    uint64_t timestamp_ms;
    uint64_t records_start;
} lw__hprof;

/* Opens `path`: a plain HPROF is mapped; a zstd one is first decompressed into a temp file
 * (capped by opts->max_decompressed_bytes) which is unlinked at close. */
lw_status lw__hprof_open_file(lw__hprof *h, const char *path, const lw_heap_options *opts, lw_error *err);
/* Uses `size` bytes at `data` (borrowed; must outlive h). For tests and fuzzing. */
lw_status lw__hprof_open_memory(lw__hprof *h, const void *data, uint64_t size, lw_error *err);
void lw__hprof_close(lw__hprof *h);

/* A top-level record: tag at `offset`, body at `body`, `length` body bytes. */
typedef struct lw__record {
    uint8_t tag;
    uint64_t offset;
    uint64_t body;
    uint64_t length;
} lw__record;

/* Reads the record at `pos`. Returns 1 with *rec filled, 0 at the end of the file, or -1
 * with err filled when the record header or body runs past the end. */
int lw__hprof_record_at(const lw__hprof *h, uint64_t pos, lw__record *rec, lw_error *err);

/* A heap-dump sub-record: tag byte at `offset`, `length` bytes including the tag. */
typedef struct lw__subrecord {
    uint8_t tag;
    uint64_t offset;
    uint64_t length;
} lw__subrecord;

/* Measures the sub-record at `pos` that must end by `end` (its segment's end). Returns 0
 * with *sub filled, or -1 with err filled (unknown tag, runs past the segment, bad type). */
int lw__hprof_subrecord_at(const lw__hprof *h, uint64_t pos, uint64_t end, lw__subrecord *sub, lw_error *err);

/* Human name of a top-level tag or sub-record tag, for error messages. */
const char *lw__hprof_tag_name(unsigned tag);
const char *lw__hprof_subtag_name(unsigned tag);

#endif
