/* common.c — errors, the allocation wrapper with its memory budget, and the bounded buffer. */
#include "common.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

static long alloc_countdown = -1; /* test hook only; see header */

/* The budget this thread's allocations are charged to while a public call on a heap runs, NULL
 * outside one. Passing it down instead would add a parameter to every function that allocates
 * (~60 call sites) for this one purpose. It is a call's scope, not shared state: the call that
 * sets it restores it before returning, on its own thread, so two heaps used on two threads
 * never see each other's budget, and nothing allocated outside those calls is charged. */
static _Thread_local lw__budget *charged_to;

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
    case LW_ERR_BUDGET: return "over the memory budget";
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
    if (alloc_countdown < 0) return 1;
    if (alloc_countdown == 0) return 0;
    alloc_countdown--;
    return 1;
}

void lw__alloc_fail_after(long n) { alloc_countdown = n; }

lw__budget *lw__budget_enter(lw__budget *b) {
    lw__budget *outer = charged_to;
    charged_to = b;
    if (b) b->refusals = 0;
    return outer;
}

void lw__budget_leave(lw__budget *outer) { charged_to = outer; }

/* Whether `n` more bytes fit. Checked against the bytes asked for; the block malloc returns
 * may be a little larger (its usable size, what is charged), so `used` can pass `limit` by
 * that rounding, and the next request is refused. */
static int budget_admits(lw__budget *b, uint64_t n) {
    if (!b->limit || (n <= b->limit && b->used <= b->limit - n)) return 1;
    if (b->refusals++ == 0) {
        b->refused_bytes = n;
        b->refused_held = b->used;
    }
    return 0;
}

static void budget_charge(lw__budget *b, void *p) {
    b->used += malloc_usable_size(p);
    if (b->used > b->peak) b->peak = b->used;
}

static void budget_release(lw__budget *b, void *p) {
    size_t n = malloc_usable_size(p);
    b->used = n < b->used ? b->used - n : 0;
}

lw_status lw__budget_verdict(const lw__budget *b, lw_status st, const char *what, lw_error *err) {
    if (!b->refusals || st == LW_ERR_BUDGET) return st; /* none, or said already (a nested call) */
    char cause[sizeof err->message] = "";
    if (st == LW_ERR_NOMEM && err) memcpy(cause, err->message, sizeof cause);
    return lw__fail(err, LW_ERR_BUDGET,
                    "the analysis needs more than its memory budget of %llu bytes (%s: %llu bytes held when %llu more "
                    "were asked for%s%.300s)",
                    (unsigned long long)b->limit, what, (unsigned long long)b->refused_held,
                    (unsigned long long)b->refused_bytes, cause[0] ? "; " : "", cause);
}

void *lw__malloc(size_t n) {
    lw__budget *b = charged_to;
    if (!alloc_allowed() || (b && !budget_admits(b, n))) return NULL;
    void *p = malloc(n ? n : 1);
    if (p && b) budget_charge(b, p);
    return p;
}

void *lw__calloc(size_t count, size_t size) {
    lw__budget *b = charged_to;
    uint64_t n;
    if (!alloc_allowed() || (b && (lw__mul_overflow(count, size, &n) || !budget_admits(b, n)))) return NULL;
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p && b) budget_charge(b, p);
    return p;
}

void *lw__realloc(void *p, size_t n) {
    lw__budget *b = charged_to;
    if (!alloc_allowed()) return NULL;
    if (!b) return realloc(p, n ? n : 1);
    size_t old = p ? malloc_usable_size(p) : 0;
    if (n > old && !budget_admits(b, n - old)) return NULL;
    void *q = realloc(p, n ? n : 1);
    if (!q) return NULL; /* p is untouched, and still charged */
    b->used = old < b->used ? b->used - old : 0;
    budget_charge(b, q);
    return q;
}

void lw__free(void *p) {
    if (p && charged_to) budget_release(charged_to, p);
    free(p);
}

void lw__free_unpooled(void *p, const char *pool, size_t pool_len) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)pool;
    if (pool && a >= lo && a - lo < pool_len) return;
    lw__free(p);
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
