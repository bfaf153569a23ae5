/* json_reader.c — see json_reader.h. Recursive descent over the bytes; values go into one
 * growing array and decoded strings into one buffer no longer than the input (a decoded
 * string is never longer than its quoted source). */
#include "json_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct {
    const unsigned char *p, *end, *start;
    lw__jr *jr;
    size_t cap;     /* of jr->v */
    size_t str_used;
    const char *error;
    const unsigned char *error_at;
    int nomem;
} parser;

static int fail(parser *ps, const char *what, const unsigned char *at) {
    if (!ps->error && !ps->nomem) {
        ps->error = what;
        ps->error_at = at;
    }
    return -1;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t')) ps->p++;
}

static long new_value(parser *ps, lw__jr_type type) {
    lw__jr *jr = ps->jr;
    if (jr->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 256;
        if (cap > UINT32_MAX) return fail(ps, "too many values", ps->p);
        lw__jr_value *v = lw__realloc(jr->v, cap * sizeof *v);
        if (!v) {
            ps->nomem = 1;
            return -1;
        }
        jr->v = v;
        ps->cap = cap;
    }
    memset(&jr->v[jr->n], 0, sizeof jr->v[jr->n]);
    jr->v[jr->n].type = type;
    return (long)jr->n++;
}

static int hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

static char *put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | cp >> 6);
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | cp >> 12);
        *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | cp >> 18);
        *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
        *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* A string at ps->p (the opening quote); its decoded text goes to the string buffer. */
static int parse_string(parser *ps, const char **out, size_t *out_len) {
    const unsigned char *s = ps->p + 1;
    char *start = ps->jr->strings + ps->str_used, *o = start;
    for (;;) {
        /* A run of printable ASCII other than '"' and '\\' (most of a string) is copied whole. */
        const unsigned char *run = s;
        s = lw__json_plain_end(s, ps->end);
        memcpy(o, run, (size_t)(s - run));
        o += s - run;
        if (s >= ps->end) return fail(ps, "unterminated string", s);
        unsigned c = *s;
        if (c == '"') break;
        if (c < 0x20) return fail(ps, "control character in a string", s);
        if (c == '\\') {
            if (s + 1 >= ps->end) return fail(ps, "unterminated string", s);
            unsigned e = s[1];
            s += 2;
            switch (e) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '/': *o++ = '/'; break;
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                unsigned cp, lo;
                if (ps->end - s < 4 || hex4(s, &cp) != 0) return fail(ps, "bad \\u escape", s - 2);
                s += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(ps, "lone low surrogate", s - 6);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (ps->end - s < 6 || s[0] != '\\' || s[1] != 'u' || hex4(s + 2, &lo) != 0 || lo < 0xDC00 ||
                        lo > 0xDFFF)
                        return fail(ps, "lone high surrogate", s - 6);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    s += 6;
                }
                if (cp == 0) return fail(ps, "\\u0000 is not allowed", s - 6);
                o = put_utf8(o, cp);
                break;
            }
            default: return fail(ps, "bad escape", s - 2);
            }
            continue;
        }
        if (c < 0x80) {
            *o++ = (char)c;
            s++;
            continue;
        }
        size_t n = lw__utf8_len(s, (size_t)(ps->end - s));
        if (!n) return fail(ps, "invalid UTF-8", s);
        memcpy(o, s, n);
        o += n;
        s += n;
    }
    *o++ = '\0';
    *out = start;
    *out_len = (size_t)(o - start - 1);
    ps->str_used += (size_t)(o - start);
    ps->p = s + 1;
    return 0;
}

static int parse_number(parser *ps, long idx) {
    const unsigned char *s = ps->p, *begin = s;
    int neg = 0, real = 0;
    uint64_t mag = 0;
    int overflow = 0;
    if (*s == '-') {
        neg = 1;
        s++;
    }
    if (s >= ps->end || *s < '0' || *s > '9') return fail(ps, "bad number", begin);
    if (*s == '0') {
        s++;
    } else {
        while (s < ps->end && *s >= '0' && *s <= '9') {
            if (mag > (UINT64_MAX - 9) / 10) overflow = 1;
            else mag = mag * 10 + (uint64_t)(*s - '0');
            s++;
        }
    }
    if (s < ps->end && *s == '.') {
        real = 1;
        s++;
        if (s >= ps->end || *s < '0' || *s > '9') return fail(ps, "bad number", begin);
        while (s < ps->end && *s >= '0' && *s <= '9') s++;
    }
    if (s < ps->end && (*s == 'e' || *s == 'E')) {
        real = 1;
        s++;
        if (s < ps->end && (*s == '+' || *s == '-')) s++;
        if (s >= ps->end || *s < '0' || *s > '9') return fail(ps, "bad number", begin);
        while (s < ps->end && *s >= '0' && *s <= '9') s++;
    }
    lw__jr_value *v = &ps->jr->v[idx];
    if (real) {
        v->type = LW__JR_REAL;
    } else {
        if (overflow || mag > (uint64_t)INT64_MAX + (uint64_t)neg) return fail(ps, "integer out of range", begin);
        v->type = LW__JR_INT;
        v->num = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    }
    ps->p = s;
    return 0;
}

static int key_cmp(const void *a, const void *b) {
    const lw__jr_value *x = *(lw__jr_value *const *)a, *y = *(lw__jr_value *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Duplicate member names in object `idx` (its children are parsed). */
static int check_duplicates(parser *ps, long idx, const unsigned char *at) {
    lw__jr *jr = ps->jr;
    uint32_t count = jr->v[idx].count;
    if (count < 2) return 0;
    if (count <= 8) {
        for (uint32_t a = (uint32_t)idx + 1; a < jr->v[idx].end; a = jr->v[a].end)
            for (uint32_t b = jr->v[a].end; b < jr->v[idx].end; b = jr->v[b].end)
                if (jr->v[a].key_len == jr->v[b].key_len && memcmp(jr->v[a].key, jr->v[b].key, jr->v[a].key_len) == 0)
                    return fail(ps, "duplicate object key", at);
        return 0;
    }
    lw__jr_value **m = lw__malloc(count * sizeof *m);
    if (!m) {
        ps->nomem = 1;
        return -1;
    }
    size_t k = 0;
    for (uint32_t a = (uint32_t)idx + 1; a < jr->v[idx].end; a = jr->v[a].end) m[k++] = &jr->v[a];
    qsort(m, k, sizeof *m, key_cmp);
    int dup = 0;
    for (size_t i = 1; i < k && !dup; i++) dup = key_cmp(&m[i - 1], &m[i]) == 0;
    lw__free(m);
    return dup ? fail(ps, "duplicate object key", at) : 0;
}

static int parse_value(parser *ps, int depth);

/* An array or object at ps->p. */
static int parse_container(parser *ps, int depth, int object) {
    const unsigned char *open = ps->p;
    if (depth >= LW__JR_MAX_DEPTH) return fail(ps, "nesting too deep", open);
    long idx = new_value(ps, object ? LW__JR_OBJECT : LW__JR_ARRAY);
    if (idx < 0) return -1;
    ps->p++;
    skip_ws(ps);
    uint32_t count = 0;
    if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) {
        ps->p++;
    } else {
        for (;;) {
            const char *key = NULL;
            size_t key_len = 0;
            if (object) {
                if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a member name", ps->p);
                if (parse_string(ps, &key, &key_len) != 0) return -1;
                skip_ws(ps);
                if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected ':'", ps->p);
                ps->p++;
                skip_ws(ps);
            }
            size_t child = ps->jr->n;
            if (parse_value(ps, depth + 1) != 0) return -1;
            ps->jr->v[child].key = key;
            ps->jr->v[child].key_len = key_len;
            count++;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip_ws(ps);
                continue;
            }
            if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) {
                ps->p++;
                break;
            }
            return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'", ps->p);
        }
    }
    ps->jr->v[idx].count = count;
    ps->jr->v[idx].end = (uint32_t)ps->jr->n;
    return object ? check_duplicates(ps, idx, open) : 0;
}

static int literal(parser *ps, const char *word, lw__jr_type type) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return fail(ps, "invalid token", ps->p);
    long idx = new_value(ps, type);
    if (idx < 0) return -1;
    ps->jr->v[idx].end = (uint32_t)ps->jr->n;
    ps->p += n;
    return 0;
}

static int parse_value(parser *ps, int depth) {
    if (ps->p >= ps->end) return fail(ps, "unexpected end of text", ps->p);
    long idx;
    switch (*ps->p) {
    case '{': return parse_container(ps, depth, 1);
    case '[': return parse_container(ps, depth, 0);
    case '"':
        if ((idx = new_value(ps, LW__JR_STRING)) < 0) return -1;
        ps->jr->v[idx].end = (uint32_t)ps->jr->n;
        return parse_string(ps, &ps->jr->v[idx].str, &ps->jr->v[idx].str_len);
    case 't': return literal(ps, "true", LW__JR_TRUE);
    case 'f': return literal(ps, "false", LW__JR_FALSE);
    case 'n': return literal(ps, "null", LW__JR_NULL);
    default:
        if ((idx = new_value(ps, LW__JR_INT)) < 0) return -1;
        ps->jr->v[idx].end = (uint32_t)ps->jr->n;
        return parse_number(ps, idx);
    }
}

int lw__jr_parse(lw__jr *jr, const char *text, size_t len, char *msg, size_t msg_cap, size_t *err_pos) {
    memset(jr, 0, sizeof *jr);
    parser ps = {.p = (const unsigned char *)text, .end = (const unsigned char *)text + len,
                 .start = (const unsigned char *)text, .jr = jr};
    jr->strings = lw__malloc(len + 1);
    if (!jr->strings) return -2;
    skip_ws(&ps);
    int rc;
    if (ps.p < ps.end && *ps.p != '{' && *ps.p != '[') rc = fail(&ps, "the top level must be an object or an array", ps.p);
    else rc = parse_value(&ps, 0);
    if (rc == 0) {
        skip_ws(&ps);
        if (ps.p != ps.end) rc = fail(&ps, "bytes after the end of the document", ps.p);
    }
    if (rc == 0) return 0;
    if (ps.nomem) return -2;
    if (msg_cap) snprintf(msg, msg_cap, "%s", ps.error ? ps.error : "malformed");
    if (err_pos) *err_pos = (size_t)((ps.error_at ? ps.error_at : ps.p) - ps.start);
    return -1;
}

void lw__jr_free(lw__jr *jr) {
    lw__free(jr->v);
    lw__free(jr->strings);
    memset(jr, 0, sizeof *jr);
}

long lw__jr_at(const lw__jr *jr, long arr, size_t i) {
    if (arr < 0 || jr->v[arr].type != LW__JR_ARRAY || i >= jr->v[arr].count) return -1;
    uint32_t c = (uint32_t)arr + 1;
    while (i--) c = jr->v[c].end;
    return (long)c;
}

void lw__jr_position(const char *text, size_t pos, size_t *line, size_t *col) {
    size_t l = 1, c = 1;
    for (size_t i = 0; i < pos; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}
