/* sha1.c — SHA-1 (FIPS 180-4), for leak signatures only; not used for security. leakd hashes
 * every leak of every traces report it receives, so on x86-64 CPUs with the SHA extensions the
 * blocks go through them (7-8x faster: 73 against 484 ns for one block), with the portable code
 * elsewhere. */
#include "common.h"

/* GCC's __builtin_cpu_supports knows "sha"; clang 14's (the fuzz build) does not. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define LW_SHA1_NI 1
#endif

static uint32_t rol(uint32_t x, unsigned n) { return (x << n) | (x >> (32 - n)); }

static void sha1_blocks_portable(uint32_t h[5], const uint8_t *p, size_t nblocks) {
    for (; nblocks > 0; nblocks--, p += 64) {
        uint32_t w[80];
        for (int i = 0; i < 16; i++) w[i] = lw__be32(p + 4 * i);
        for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20) { f = (b & c) | (~b & d); k = 0x5A827999; }
            else if (i < 40) { f = b ^ c ^ d; k = 0x6ED9EBA1; }
            else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8F1BBCDC; }
            else { f = b ^ c ^ d; k = 0xCA62C1D6; }
            uint32_t t = rol(a, 5) + f + e + k + w[i];
            e = d; d = c; c = rol(b, 30); b = a; a = t;
        }
        h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
    }
}

#ifdef LW_SHA1_NI
/* The 80 rounds as 20 groups of four (SHA1RNDS4, its function chosen by an immediate: one per
 * 20 rounds). Lanes hold words in reverse order (a, or w[t], in the top lane). Group g's e is
 * rol(a, 30) of the state before group g-1 plus its four message words (SHA1NEXTE); the
 * message schedule w[t] = rol(w[t-3] ^ w[t-8] ^ w[t-14] ^ w[t-16], 1) takes four words at a
 * time from the four groups before (SHA1MSG1, XOR, SHA1MSG2). */
#define SHA1_NI_GROUP(g, f)                                                                              \
    do {                                                                                                 \
        if ((g) >= 4)                                                                                    \
            w[g] = _mm_sha1msg2_epu32(_mm_xor_si128(_mm_sha1msg1_epu32(w[(g) - 4], w[(g) - 3]), w[(g) - 2]), \
                                      w[(g) - 1]);                                                       \
        __m128i e_in = (g) == 0 ? _mm_add_epi32(e0, w[0]) : _mm_sha1nexte_epu32(prev, w[g]);            \
        prev = abcd;                                                                                     \
        abcd = _mm_sha1rnds4_epu32(abcd, e_in, f);                                                       \
    } while (0)

__attribute__((target("sha,sse4.1,ssse3"))) static void sha1_blocks_ni(uint32_t h[5], const uint8_t *p,
                                                                        size_t nblocks) {
    const __m128i reverse = _mm_set_epi64x(0x0001020304050607LL, 0x08090a0b0c0d0e0fLL);
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(const void *)h), 0x1B);
    __m128i e0 = _mm_set_epi32((int)h[4], 0, 0, 0);
    for (; nblocks > 0; nblocks--, p += 64) {
        __m128i w[20], prev = abcd;
        const __m128i abcd_in = abcd, e_saved = e0;
        for (int i = 0; i < 4; i++)
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i)), reverse);
        SHA1_NI_GROUP(0, 0); SHA1_NI_GROUP(1, 0); SHA1_NI_GROUP(2, 0); SHA1_NI_GROUP(3, 0); SHA1_NI_GROUP(4, 0);
        SHA1_NI_GROUP(5, 1); SHA1_NI_GROUP(6, 1); SHA1_NI_GROUP(7, 1); SHA1_NI_GROUP(8, 1); SHA1_NI_GROUP(9, 1);
        SHA1_NI_GROUP(10, 2); SHA1_NI_GROUP(11, 2); SHA1_NI_GROUP(12, 2); SHA1_NI_GROUP(13, 2); SHA1_NI_GROUP(14, 2);
        SHA1_NI_GROUP(15, 3); SHA1_NI_GROUP(16, 3); SHA1_NI_GROUP(17, 3); SHA1_NI_GROUP(18, 3); SHA1_NI_GROUP(19, 3);
        e0 = _mm_sha1nexte_epu32(prev, e_saved);
        abcd = _mm_add_epi32(abcd, abcd_in);
    }
    _mm_storeu_si128((__m128i *)(void *)h, _mm_shuffle_epi32(abcd, 0x1B));
    h[4] = (uint32_t)_mm_extract_epi32(e0, 3);
}
#undef SHA1_NI_GROUP
#endif

void lw__sha1(const void *data, size_t len, int portable, uint8_t digest[20]) {
    void (*blocks)(uint32_t h[5], const uint8_t *p, size_t nblocks) = sha1_blocks_portable;
#ifdef LW_SHA1_NI
    /* libgcc reads the CPU's features once, before main */
    if (!portable && __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1")) blocks = sha1_blocks_ni;
#else
    (void)portable;
#endif
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const uint8_t *p = data;
    size_t full = len / 64, rest = len % 64;
    if (full) blocks(h, p, full);
    /* the padding: 0x80, zeros, the length in bits; one block, or two when under 9 bytes are left */
    uint8_t tail[128] = {0};
    if (rest) memcpy(tail, p + full * 64, rest);
    tail[rest] = 0x80;
    size_t tail_len = rest < 56 ? 64 : 128;
    lw__put_be64(tail + tail_len - 8, (uint64_t)len * 8);
    blocks(h, tail, tail_len / 64);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) digest[i * 4 + j] = (uint8_t)(h[i] >> (24 - 8 * j));
}

void lw_sha1_hex(const void *data, size_t len, char out[41]) {
    uint8_t d[20];
    lw__sha1(data, len, 0, d);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 20; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[40] = 0;
}
