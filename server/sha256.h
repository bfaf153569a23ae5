/* sha256.h — SHA-256 (FIPS 180-4) for hashing API keys; no dependencies. */
#ifndef LD_SHA256_H
#define LD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define LD_SHA256_LEN 32
#define LD_SHA256_HEX_LEN 64 /* without the terminating NUL */

/* Streaming context: caller-allocated; no resources to free. */
typedef struct ld_sha256_ctx {
    uint32_t h[8];
    uint64_t total;      /* bytes fed so far */
    uint8_t block[64];
    size_t used;         /* bytes pending in `block` */
} ld_sha256_ctx;

void ld_sha256_init(ld_sha256_ctx *ctx);
void ld_sha256_update(ld_sha256_ctx *ctx, const void *data, size_t len);
void ld_sha256_final(ld_sha256_ctx *ctx, uint8_t out[LD_SHA256_LEN]);

/* One-shot digest of `len` bytes at `data` (borrowed; may be NULL when len is 0). */
void ld_sha256(const void *data, size_t len, uint8_t out[LD_SHA256_LEN]);

/* Lower-case hex of `n` bytes into `out`, which holds 2n+1 bytes (NUL-terminated). */
void ld_hex_encode(const uint8_t *in, size_t n, char *out);

/* Parses exactly 2n hex digits (either case) of `hex` into `out`; 0, or -1 when malformed. */
int ld_hex_decode(const char *hex, uint8_t *out, size_t n);

/* ld_sha256 then ld_hex_encode: `out` holds 65 bytes. */
void ld_sha256_hex(const void *data, size_t len, char out[LD_SHA256_HEX_LEN + 1]);

#endif
