/* common.c — errors, the allocation wrapper and the bounded buffer. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

static long alloc_budget = -1; /* test hook only; see header */

const char *lw_core_version(void) { return LW_CORE_VERSION_STRING; }

const char *lw_strerror(lw_status status) {
    switch (status) {
    case LW_OK: return "success";
    case LW_ERR_USAGE: return "invalid argument";
    case LW_ERR_IO: return "I/O error";
    case LW_ERR_FORMAT: return "corrupt, truncated or unsupported input";
    case LW_ERR_NOMEM: return "out of memory";
    case LW_ERR_LIMIT: return "a configured limit was exceeded";
    case LW_ERR_NOT_FOUND: return "not found";
    }
    return "unknown error";
}

lw_status lw__fail(lw_error *err, lw_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->status = status;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

static int alloc_allowed(void) {
    if (alloc_budget < 0) return 1;
    if (alloc_budget == 0) return 0;
    alloc_budget--;
    return 1;
}

void lw__alloc_fail_after(long n) { alloc_budget = n; }

void *lw__malloc(size_t n) { return alloc_allowed() ? malloc(n ? n : 1) : NULL; }
void *lw__calloc(size_t count, size_t size) { return alloc_allowed() ? calloc(count ? count : 1, size ? size : 1) : NULL; }
void *lw__realloc(void *p, size_t n) { return alloc_allowed() ? realloc(p, n ? n : 1) : NULL; }
void lw__free(void *p) { free(p); }

void lw__free_unpooled(void *p, const char *pool, size_t pool_len) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)pool;
    if (pool && a >= lo && a - lo < pool_len) return;
    free(p);
}

char *lw__strndup(const char *s, size_t n) {
    char *d = lw__malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *lw__strdup(const char *s) { return s ? lw__strndup(s, strlen(s)) : NULL; }

int lw__buf_reserve(lw__buf *b, size_t n) {
    if (b->failed) return 0;
    /* max first: lw__buf_append comes here when max refuses, with room left */
    size_t max = b->max ? b->max : SIZE_MAX;
    if (n > max - b->size || b->size + n == SIZE_MAX) return 0;
    if (n < b->capacity - b->size) return 1;
    size_t cap = b->capacity ? b->capacity : 256;
    while (cap < b->size + n + 1) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
    char *p = lw__realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->capacity = cap;
    return 1;
}

void lw__buf_grow_append(lw__buf *b, const void *data, size_t len) {
    if (!lw__buf_reserve(b, len)) {
        b->failed = 1;
        return;
    }
    memcpy(b->data + b->size, data, len);
    b->size += len;
    b->data[b->size] = 0;
}

void lw__buf_printf(lw__buf *b, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) { b->failed = 1; return; }
    if ((size_t)n < sizeof small) { lw__buf_append(b, small, (size_t)n); return; }
    char *big = lw__malloc((size_t)n + 1);
    if (!big) { b->failed = 1; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    lw__buf_append(b, big, (size_t)n);
    lw__free(big);
}

char *lw__buf_take(lw__buf *b) {
    if (b->failed) { lw__buf_free(b); return NULL; }
    if (!b->data) lw__buf_append(b, "", 0);
    if (b->failed) { lw__buf_free(b); return NULL; }
    char *d = b->data;
    b->data = NULL;
    b->size = b->capacity = 0;
    return d;
}

void lw__buf_free(lw__buf *b) {
    lw__free(b->data);
    b->data = NULL;
    b->size = b->capacity = 0;
}

const char *lw__type_name(unsigned t) {
    switch (t) {
    case LW_T_BOOLEAN: return "boolean";
    case LW_T_CHAR: return "char";
    case LW_T_FLOAT: return "float";
    case LW_T_DOUBLE: return "double";
    case LW_T_BYTE: return "byte";
    case LW_T_SHORT: return "short";
    case LW_T_INT: return "int";
    case LW_T_LONG: return "long";
    default: return NULL;
    }
}

size_t lw__utf8_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || avail < n) return 0;
    if (n >= 2) {
        unsigned lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
        else if (c == 0xF0) lo = 0x90; /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* over U+10FFFF */
        if (s[1] < lo || s[1] > hi) return 0;
        for (size_t i = 2; i < n; i++)
            if ((s[i] & 0xC0) != 0x80) return 0;
    }
    return n;
}
