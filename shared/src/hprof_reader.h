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
 * with err filled when the record header or body runs past the end, or its tag is none the
 * format defines. */
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

/* Judges a dump's structure as its bytes come, in order (lw__hprof_check_feed), when it is
 * decompressed: its header, each record's tag, and the tag and measure of each sub-record of
 * its heap dump, refused at the first bad one with the reader's own message, before the rest is
 * decoded and written. What has not come yet is not judged (a truncated file is the reader's
 * to tell), nor what is inside records and sub-records. (One other message: a heap-dump record
 * that runs past the file's end, which the reader names as such, is refused here at the first
 * sub-record that does not fit.) */
typedef struct lw__hprof_check {
    uint64_t at;          /* file offset of the item being judged (of c->buf[0] while gathering) */
    uint64_t skip;        /* bytes of a judged item still to come, passed over */
    uint64_t segment_end; /* while in_segment: the offset where the heap-dump segment ends */
    int in_segment;
    unsigned id_size;     /* 0 until the header is judged */
    uint8_t *buf;         /* the start of an item that needs more bytes to judge */
    size_t n, cap;
    size_t want;          /* judge it again once n reaches this */
} lw__hprof_check;
void lw__hprof_check_init(lw__hprof_check *c);
lw_status lw__hprof_check_feed(lw__hprof_check *c, const uint8_t *p, size_t n, lw_error *err);
/* The content has ended: judges what was gathered and not judged yet (but a truncated item). */
lw_status lw__hprof_check_end(lw__hprof_check *c, lw_error *err);
void lw__hprof_check_free(lw__hprof_check *c);

/* Human name of a top-level tag or sub-record tag, for error messages. */
const char *lw__hprof_tag_name(unsigned tag);
const char *lw__hprof_subtag_name(unsigned tag);

#endif
