/* sha1.c — SHA-1 (FIPS 180-4), for leak signatures only; not used for security. */
#include "common.h"

typedef struct {
    uint32_t h[5];
    uint64_t len;
    uint8_t block[64];
    size_t used;
} sha1_ctx;

static uint32_t rol(uint32_t x, unsigned n) { return (x << n) | (x >> (32 - n)); }

static void sha1_block(sha1_ctx *c, const uint8_t *p) {
    uint32_t w[80];
    for (int i = 0; i < 16; i++) w[i] = lw__be32(p + 4 * i);
    for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) { f = (b & cc) | (~b & d); k = 0x5A827999; }
        else if (i < 40) { f = b ^ cc ^ d; k = 0x6ED9EBA1; }
        else if (i < 60) { f = (b & cc) | (b & d) | (cc & d); k = 0x8F1BBCDC; }
        else { f = b ^ cc ^ d; k = 0xCA62C1D6; }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d; d = cc; cc = rol(b, 30); b = a; a = t;
    }
    c->h[0] += a; c->h[1] += b; c->h[2] += cc; c->h[3] += d; c->h[4] += e;
}

static void sha1_update(sha1_ctx *c, const uint8_t *p, size_t n) {
    c->len += n;
    while (n > 0) {
        size_t take = 64 - c->used < n ? 64 - c->used : n;
        memcpy(c->block + c->used, p, take);
        c->used += take; p += take; n -= take;
        if (c->used == 64) { sha1_block(c, c->block); c->used = 0; }
    }
}

void lw_sha1_hex(const void *data, size_t len, char out[41]) {
    sha1_ctx c = {{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0}, 0, {0}, 0};
    if (len) sha1_update(&c, data, len);
    uint64_t bits = c.len * 8;
    uint8_t pad = 0x80;
    sha1_update(&c, &pad, 1);
    uint8_t zero = 0;
    while (c.used != 56) sha1_update(&c, &zero, 1);
    uint8_t lenb[8];
    lw__put_be64(lenb, bits);
    sha1_update(&c, lenb, 8);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) {
            uint8_t byte = (uint8_t)(c.h[i] >> (24 - 8 * j));
            out[i * 8 + j * 2] = hex[byte >> 4];
            out[i * 8 + j * 2 + 1] = hex[byte & 15];
        }
    out[40] = 0;
}
