/* zstd_file.h — the internal side of zstd_file.c (the public functions are in leakcore.h):
 * decompression that judges the content before writing it. Internal to libleakcore. */
#ifndef LW_ZSTD_FILE_H
#define LW_ZSTD_FILE_H

#include "common.h"

/* The most first bytes a head check may ask for. */
#define LW__ZSTD_HEAD_MAX 64

/* Judges the first `n` bytes of the decompressed content: the `head_len` asked for, or fewer
 * when the whole content is shorter. Returns LW_OK, or fails with err filled; the message
 * need not name the file (the caller prefixes it). */
typedef lw_status (*lw__zstd_head_check)(const uint8_t *head, size_t n, lw_error *err);

/* Judges the decompressed content as it comes, every byte in order once the head is accepted
 * (the head's included), before those bytes are written; called once more with n == 0 when the
 * content has ended. Returns LW_OK, or fails with err filled as a head check does. */
typedef lw_status (*lw__zstd_feed_check)(void *ctx, const uint8_t *p, size_t n, lw_error *err);

typedef struct lw__zstd_checks {
    lw__zstd_head_check head; /* NULL: none */
    size_t head_len;          /* 1..LW__ZSTD_HEAD_MAX when head is set */
    lw__zstd_feed_check feed; /* NULL: none */
    void *feed_ctx;
} lw__zstd_checks;

/* lw_zstd_decompress_file, and when `checks` is not NULL: nothing is written before
 * checks->head has accepted the first `head_len` decompressed bytes, and nothing after before
 * checks->feed has. A refusal fails at once, with the check's status and "IN: decompressed
 * content: " before its message, and removes the output: a bomb of the wrong content costs one
 * block of decoding, not `max_bytes` of disk. */
lw_status lw__zstd_decompress_file_checked(const char *in_path, const char *out_path, uint64_t max_bytes,
                                           const lw__zstd_checks *checks, lw_error *err);

#endif
