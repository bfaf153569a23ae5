/* utf8.c — the ranges of RFC 3629 §4. */
#include "utf8.h"

size_t ld_utf8_prefix(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t at = 0;
    while (at < len) {
        unsigned c = p[at];
        size_t n = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 4;
        if (n == 4 || n >= len - at) return at; /* not a lead byte, or its character is cut */
        unsigned lo = 0x80, hi = 0xBF; /* the second byte's range */
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
        else if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
        for (size_t i = 1; i <= n; i++)
            if (p[at + i] < (i > 1 ? 0x80 : lo) || p[at + i] > (i > 1 ? 0xBF : hi)) return at;
        at += n + 1;
    }
    return at;
}
