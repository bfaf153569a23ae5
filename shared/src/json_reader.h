/* json_reader.h — a strict JSON parser (RFC 8259) into one flat array of values, for the
 * trace JSON that devices upload: jansson took about 150 us to parse a 10 KB report into a
 * tree of hash tables, most of what leakd spent on one. Refuses what jansson refuses with
 * JSON_REJECT_DUPLICATES (bad UTF-8, lone surrogates, \u0000, control characters, integers
 * that overflow int64, trailing bytes, a top level that is not an object or array), and
 * nesting deeper than LW__JR_MAX_DEPTH levels. Duplicate keys are found by sorting, so an object
 * with a million keys costs n log n, not n squared. */
#ifndef LW_JSON_READER_H
#define LW_JSON_READER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LW__JR_MAX_DEPTH 64

typedef enum lw__jr_type {
    LW__JR_NULL,
    LW__JR_FALSE,
    LW__JR_TRUE,
    LW__JR_INT,
    LW__JR_REAL,
    LW__JR_STRING,
    LW__JR_ARRAY,
    LW__JR_OBJECT,
} lw__jr_type;

/* One value, in document order. An array's or object's children follow it; `end` is the
 * index just past its last descendant, so the next sibling of value i is value[i].end. */
typedef struct lw__jr_value {
    lw__jr_type type;
    uint32_t end;
    uint32_t count;     /* children of an array or object */
    const char *key;    /* the member name when the parent is an object (NUL-terminated) */
    size_t key_len;
    const char *str;    /* a string's decoded bytes, NUL-terminated (\u0000 is refused) */
    size_t str_len;
    int64_t num;        /* an INT's value */
} lw__jr_value;

typedef struct lw__jr {
    lw__jr_value *v; /* v[0] is the root */
    size_t n;
    char *strings;   /* decoded strings and keys */
} lw__jr;

/* Parses text[0..len). 0 on success; -1 with a message and the byte offset of the error in
 * `msg`/`*err_pos`, or -2 when out of memory. Free with lw__jr_free either way. */
int lw__jr_parse(lw__jr *jr, const char *text, size_t len, char *msg, size_t msg_cap, size_t *err_pos);
void lw__jr_free(lw__jr *jr);

/* The 1-based line and column of byte `pos` of text, for an error message. */
void lw__jr_position(const char *text, size_t pos, size_t *line, size_t *col);

/* The member `key` of object value `obj`, or -1 (also when `obj` is not an object or < 0).
 * Inline: the decoders look up ten or so literal keys per trace element, whose lengths the
 * compiler then knows (1.2 % fewer of leakd's instructions for a traces report). */
static inline long lw__jr_get(const lw__jr *jr, long obj, const char *key) {
    if (obj < 0 || jr->v[obj].type != LW__JR_OBJECT) return -1;
    size_t n = strlen(key);
    for (uint32_t c = (uint32_t)obj + 1; c < jr->v[obj].end; c = jr->v[c].end)
        if (jr->v[c].key_len == n && memcmp(jr->v[c].key, key, n) == 0) return (long)c;
    return -1;
}
/* The i-th child of array `arr`, or -1. Walking all children is cheaper with `end`. */
long lw__jr_at(const lw__jr *jr, long arr, size_t i);

#endif
