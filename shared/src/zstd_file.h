/* zstd_file.h — the internal side of zstd_file.c (the public functions are in leakcore.h):
 * decompression that judges the content's first bytes before writing any of it. Internal to
 * libleakcore. */
#ifndef LW_ZSTD_FILE_H
#define LW_ZSTD_FILE_H

#include "common.h"

/* The most first bytes a head check may ask for. */
#define LW__ZSTD_HEAD_MAX 64

/* Judges the first `n` bytes of the decompressed content: the `head_len` asked for, or fewer
 * when the whole content is shorter. Returns LW_OK, or fails with err filled; the message
 * need not name the file (the caller prefixes it). */
typedef lw_status (*lw__zstd_head_check)(const uint8_t *head, size_t n, lw_error *err);

/* lw_zstd_decompress_file, and when `check` is not NULL (`head_len` 1..LW__ZSTD_HEAD_MAX),
 * nothing is written before `check` has accepted the first `head_len` decompressed bytes. A
 * refusal fails at once, with check's status and "IN: decompressed content: " before its
 * message, and removes the output: a bomb of the wrong content costs one block of decoding,
 * not `max_bytes` of disk. */
lw_status lw__zstd_decompress_file_checked(const char *in_path, const char *out_path, uint64_t max_bytes,
                                           lw__zstd_head_check check, size_t head_len, lw_error *err);

#endif
