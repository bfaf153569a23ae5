/* common.h — helpers every libleakcore file uses: errors, big-endian access, checked sizes. */
#ifndef LW_COMMON_H
#define LW_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "leakcore.h"

/* Fills `err` (may be NULL) and returns `status`. printf-style message. */
lw_status lw__fail(lw_error *err, lw_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 when the versioned options struct `opts` (of type `type`, may be NULL) reaches `field` by
 * the struct_size its caller was compiled with: a field added later is read only from callers
 * that know it, and the older fields still are. */
#define LW__HAS_FIELD(type, opts, field) \
    ((opts) && (opts)->struct_size >= offsetof(type, field) + sizeof((opts)->field))

/* Allocation goes through these so tests can make them fail (see lw__alloc_fail_after) and so
 * that a heap's memory budget sees every byte the library holds for it (lw__budget). */
void *lw__malloc(size_t n);
void *lw__calloc(size_t count, size_t size);
void *lw__realloc(void *p, size_t n);
char *lw__strdup(const char *s);
char *lw__strndup(const char *s, size_t n);
void lw__free(void *p);
/* Frees p unless it lies in pool[0..pool_len): the strings of a report read from JSON share one
 * block (lw_leak_report.lw__pool). */
void lw__free_unpooled(void *p, const char *pool, size_t pool_len);
/* Test hook: the next `n` allocations succeed, then every one fails; -1 disables. Not
 * thread-safe; for unit tests only. */
void lw__alloc_fail_after(long n);

/* The memory budget of one heap (lw_heap_options.memory_budget): the bytes that the
 * allocations made during its public calls hold, as malloc_usable_size counts them (the mapped
 * dump is file-backed and not counted). An allocation that would take `used` past `limit`
 * fails, and the call turns that into LW_ERR_BUDGET naming the budget (lw__budget_verdict). */
typedef struct lw__budget {
    uint64_t limit;          /* 0 = none: counted, never refused */
    uint64_t used;           /* held now; a free of a block never charged stops at 0 */
    uint64_t peak;           /* the most `used` has been */
    uint64_t refusals;       /* allocations refused since the call began */
    uint64_t refused_bytes;  /* the first refused one: bytes asked for, */
    uint64_t refused_held;   /* and `used` at that moment */
} lw__budget;

/* Begins a public call on a heap: until lw__budget_leave, allocations on this thread are
 * charged to `b` (NULL: to none) and its refusals count from 0. Returns the budget in force
 * before, to hand back to lw__budget_leave (calls may nest: a progress callback may call in). */
lw__budget *lw__budget_enter(lw__budget *b);
void lw__budget_leave(lw__budget *outer);

/* Ends a call under `b` that returns `st`: when an allocation was refused during it, the
 * result cannot be trusted even if `st` is LW_OK (some steps carry on without what they could
 * not allocate), so the call fails with LW_ERR_BUDGET and a message naming the budget, `what`
 * was doing and, for a NOMEM, the failure's own message. Otherwise `st` unchanged. */
lw_status lw__budget_verdict(const lw__budget *b, lw_status st, const char *what, lw_error *err);

/* A growable byte buffer with a hard maximum (0 = SIZE_MAX). */
typedef struct lw__buf {
    char *data;
    size_t size;
    size_t capacity;
    size_t max;
    int failed; /* an append failed: out of memory or over max */
} lw__buf;

/* The JSON writer appends a few bytes at a time, thousands of times a document: the common
 * case (room left, under max) is inline; growing and failing are lw__buf_grow_append's. */
void lw__buf_grow_append(lw__buf *b, const void *data, size_t len);
/* Room for n more bytes and the NUL: 1, or 0 when the buffer has failed, memory ran out (it
 * fails) or n would pass its max (it does not fail: smaller appends may still fit). */
int lw__buf_reserve(lw__buf *b, size_t n);
static inline void lw__buf_append(lw__buf *b, const void *data, size_t len) {
    if (!b->failed && len < b->capacity - b->size && (!b->max || len <= b->max - b->size)) {
        memcpy(b->data + b->size, data, len);
        b->size += len;
        b->data[b->size] = 0;
        return;
    }
    lw__buf_grow_append(b, data, len);
}
static inline void lw__buf_puts(lw__buf *b, const char *s) { lw__buf_append(b, s, strlen(s)); }
void lw__buf_printf(lw__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the NUL-terminated contents (ownership to the caller) or NULL if anything failed. */
char *lw__buf_take(lw__buf *b);
void lw__buf_free(lw__buf *b);

static inline uint16_t lw__be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t lw__be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t lw__be64(const uint8_t *p) { return ((uint64_t)lw__be32(p) << 32) | lw__be32(p + 4); }
static inline uint64_t lw__be_id(const uint8_t *p, unsigned id_size) {
    return id_size == 4 ? lw__be32(p) : lw__be64(p);
}
static inline void lw__put_be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void lw__put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void lw__put_be64(uint8_t *p, uint64_t v) {
    lw__put_be32(p, (uint32_t)(v >> 32));
    lw__put_be32(p + 4, (uint32_t)v);
}
static inline void lw__put_be_id(uint8_t *p, uint64_t id, unsigned id_size) {
    if (id_size == 4) lw__put_be32(p, (uint32_t)id); else lw__put_be64(p, id);
}

/* SHA-1 of data[0..len) (sha1.c): with the CPU's SHA extensions where it has them, unless
 * `portable` (the tests compare both). */
void lw__sha1(const void *data, size_t len, int portable, uint8_t digest[20]);

/* Overflow-checked arithmetic: return 1 on overflow. */
static inline int lw__add_overflow(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_add_overflow(a, b, out); }
static inline int lw__mul_overflow(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_mul_overflow(a, b, out); }

/* HPROF basic types. */
enum {
    LW_T_OBJECT = 2,
    LW_T_BOOLEAN = 4,
    LW_T_CHAR = 5,
    LW_T_FLOAT = 6,
    LW_T_DOUBLE = 7,
    LW_T_BYTE = 8,
    LW_T_SHORT = 9,
    LW_T_INT = 10,
    LW_T_LONG = 11,
};

/* Size in bytes of a value of basic type `t` (object = id_size); 0 for an invalid type. */
static inline unsigned lw__type_size(unsigned t, unsigned id_size) {
    switch (t) {
    case LW_T_OBJECT: return id_size;
    case LW_T_BOOLEAN: case LW_T_BYTE: return 1;
    case LW_T_CHAR: case LW_T_SHORT: return 2;
    case LW_T_FLOAT: case LW_T_INT: return 4;
    case LW_T_DOUBLE: case LW_T_LONG: return 8;
    default: return 0;
    }
}

/* Length (1-4) of the valid UTF-8 sequence at `s`, of which `avail` bytes may be read, or 0
 * when it is not one (overlong forms, surrogates and code points over U+10FFFF are not). A
 * NUL-terminated string may pass avail = 4: a NUL ends the check before it reads further. */
size_t lw__utf8_len(const unsigned char *s, size_t avail);

/* The first byte in [s, end) that a JSON string cannot hold as it is — a control character,
 * '"', '\\', or a byte of a multi-byte UTF-8 sequence — or end. The JSON read and written for
 * each traces report is mostly such runs: eight bytes at a time, and sixteen with SSE2 (every
 * x86-64), whose signed compare finds control characters and high bytes at once and whose
 * mask gives the position. */
static inline const unsigned char *lw__json_plain_end8(const unsigned char *s, const unsigned char *end) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (end - s >= 8) {
        uint64_t x, q, b;
        memcpy(&x, s, 8);
        q = x ^ (ones * '"');
        b = x ^ (ones * '\\');
        /* a byte under 0x20, a zero byte of q or b (a '"' or '\\'), or a high bit */
        if ((((x - ones * 0x20) | (q - ones) | (b - ones)) & ~x & highs) | (x & highs)) break;
        s += 8;
    }
    while (s < end && (unsigned)(*s - 0x20) < 0x60 && *s != '"' && *s != '\\') s++;
    return s;
}
#if defined(__SSE2__)
#include <emmintrin.h>
/* A bit for each of the 16 bytes at s that stops a plain run. */
static inline unsigned lw__json_stops16(const unsigned char *s) {
    const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
    /* signed: below 0x20 is 0x00-0x1F and 0x80-0xFF */
    __m128i stop = _mm_or_si128(_mm_cmpgt_epi8(space, x), _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)));
    return (unsigned)_mm_movemask_epi8(stop);
}
static inline const unsigned char *lw__json_plain_end(const unsigned char *s, const unsigned char *end) {
    if (end - s < 16) return lw__json_plain_end8(s, end);
    for (;;) {
        unsigned mask = lw__json_stops16(s);
        if (mask) return s + __builtin_ctz(mask);
        s += 16;
        if (end - s < 16) break;
    }
    if (s == end) return end;
    /* The last 16 bytes: those before s were scanned already and hold no stop. */
    unsigned mask = lw__json_stops16(end - 16);
    return mask ? end - 16 + __builtin_ctz(mask) : end;
}
#else
static inline const unsigned char *lw__json_plain_end(const unsigned char *s, const unsigned char *end) {
    return lw__json_plain_end8(s, end);
}
#endif

/* Java name of a primitive type ("int"), NULL for others. */
const char *lw__type_name(unsigned t);

#endif
