/* uuid.c — UUIDs from getrandom(2): version 4 (all random), version 7 (time-ordered). */
#include "uuid.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>

static int fill(uint8_t *b, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(b + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

static void format(const uint8_t b[16], char out[37]) {
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4],
             b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int lw__uuid4(char out[37]) {
    uint8_t b[16];
    if (fill(b, sizeof b) != 0) return -1;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 9562 variant */
    format(b, out);
    return 0;
}

int lw__uuid7(char out[37]) {
    uint8_t b[16];
    if (fill(b, sizeof b) != 0) return -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    for (int i = 0; i < 6; i++) b[i] = (uint8_t)(ms >> (40 - 8 * i)); /* 48-bit Unix time in ms, big-endian */
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x70); /* version 7 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    format(b, out);
    return 0;
}

int lw__uuid_valid(const char *s) {
    if (!s) return 0;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
    }
    return s[36] == '\0';
}
