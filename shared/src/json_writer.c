/* json_writer.c — see json_writer.h. */
#include "json_writer.h"

void lw__jw_init(lw__jw *w, int pretty) {
    memset(w, 0, sizeof *w);
    w->pretty = pretty;
}

static void newline(lw__jw *w, int depth) {
    static const char spaces[] = "                                                                ";
    lw__buf_append(&w->buf, "\n", 1);
    for (int n = depth * 2; n > 0; n -= (int)sizeof spaces - 1)
        lw__buf_append(&w->buf, spaces, n < (int)sizeof spaces - 1 ? (size_t)n : sizeof spaces - 1);
}

/* The separator before a value or a key in the current container. */
static void item(lw__jw *w) {
    if (w->depth == 0) return;
    if (!w->first[w->depth]) lw__buf_append(&w->buf, ",", 1);
    w->first[w->depth] = 0;
    if (w->pretty) newline(w, w->depth);
}

static void value(lw__jw *w) {
    if (w->after_key) w->after_key = 0;
    else item(w);
}

/* A JSON string: runs of plain bytes copied whole, '"', '\\' and control characters escaped,
 * a byte that is not UTF-8 replaced by U+FFFD. Written straight into one reservation for the
 * worst case (every byte as \u00XX) rather than appended piece by piece, each piece checking
 * for room: the writer's buffer has no maximum, so only memory can refuse it. */
static void quoted(lw__buf *b, const char *str) {
    static const char hex[] = "0123456789ABCDEF";
    static const char short_escape[32] = {['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
    const unsigned char *s = (const unsigned char *)str;
    size_t len = strlen(str);
    if (len > (SIZE_MAX - 16) / 6 || !lw__buf_reserve(b, 6 * len + 2)) {
        b->failed = 1;
        return;
    }
    const unsigned char *end = s + len;
    char *o = b->data + b->size;
    *o++ = '"';
    for (;;) {
        const unsigned char *run = s;
        s = lw__json_plain_end(s, end);
        memcpy(o, run, (size_t)(s - run));
        o += s - run;
        if (s == end) break;
        unsigned c = *s;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
            s++;
        } else if (c < 0x20) {
            *o++ = '\\';
            if (short_escape[c]) {
                *o++ = short_escape[c];
            } else {
                memcpy(o, "u00", 3);
                o[3] = hex[c >> 4];
                o[4] = hex[c & 15];
                o += 5;
            }
            s++;
        } else {
            size_t n = lw__utf8_len(s, (size_t)(end - s) < 4 ? (size_t)(end - s) : 4);
            if (n == 0) {
                memcpy(o, "\xEF\xBF\xBD", 3); /* U+FFFD for the bad byte */
                o += 3;
                s++;
            } else {
                memcpy(o, s, n);
                o += n;
                s += n;
            }
        }
    }
    *o++ = '"';
    b->size = (size_t)(o - b->data);
    b->data[b->size] = 0;
}

void lw__jw_open(lw__jw *w, char bracket) {
    value(w);
    lw__buf_append(&w->buf, &bracket, 1);
    if (++w->depth >= LW__JW_MAX_DEPTH) {
        w->buf.failed = 1;
        w->depth = LW__JW_MAX_DEPTH - 1;
    }
    w->first[w->depth] = 1;
}

void lw__jw_close(lw__jw *w, char bracket) {
    if (w->depth == 0) {
        w->buf.failed = 1;
        return;
    }
    if (w->pretty && !w->first[w->depth]) newline(w, w->depth - 1);
    w->depth--;
    lw__buf_append(&w->buf, &bracket, 1);
}

void lw__jw_key(lw__jw *w, const char *key) {
    item(w);
    quoted(&w->buf, key);
    lw__buf_puts(&w->buf, w->pretty ? ": " : ":");
    w->after_key = 1;
}

void lw__jw_key_quoted(lw__jw *w, const char *quoted_colon, size_t len) {
    item(w);
    lw__buf_append(&w->buf, quoted_colon, len);
    if (w->pretty) lw__buf_append(&w->buf, " ", 1);
    w->after_key = 1;
}

void lw__jw_word_quoted(lw__jw *w, const char *quoted, size_t len) {
    value(w);
    lw__buf_append(&w->buf, quoted, len);
}

void lw__jw_string(lw__jw *w, const char *s) {
    if (!s) {
        lw__jw_null(w);
        return;
    }
    value(w);
    quoted(&w->buf, s);
}

void lw__jw_int(lw__jw *w, int64_t v) {
    char num[24], *e = num + sizeof num, *p = e; /* digits backwards, no format to parse */
    uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do *--p = (char)('0' + m % 10); while ((m /= 10) != 0);
    if (v < 0) *--p = '-';
    value(w);
    lw__buf_append(&w->buf, p, (size_t)(e - p));
}

void lw__jw_bool(lw__jw *w, int v) {
    value(w);
    lw__buf_puts(&w->buf, v ? "true" : "false");
}

void lw__jw_null(lw__jw *w) {
    value(w);
    lw__buf_puts(&w->buf, "null");
}

char *lw__jw_take(lw__jw *w) {
    if (w->depth != 0) w->buf.failed = 1;
    return lw__buf_take(&w->buf);
}
