/* json_writer.c — see json_writer.h. */
#include "json_writer.h"

#include <stdio.h>

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

static void quoted(lw__buf *b, const char *str) {
    const unsigned char *s = (const unsigned char *)str, *run = s, *end = s + strlen(str);
    lw__buf_append(b, "\"", 1);
    for (;;) {
        s = lw__json_plain_end(s, end); /* runs are appended whole, not a byte at a time */
        if (s == end) break;
        size_t n = 1;
        const char *esc = NULL;
        char hex[8];
        if (*s == '"') esc = "\\\"";
        else if (*s == '\\') esc = "\\\\";
        else if (*s < 0x20) {
            switch (*s) {
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            default: snprintf(hex, sizeof hex, "\\u%04X", *s); esc = hex;
            }
        } else if ((n = lw__utf8_len(s, (size_t)(end - s) < 4 ? (size_t)(end - s) : 4)) == 0) {
            esc = "\xEF\xBF\xBD"; /* U+FFFD for the bad byte */
            n = 1;
        }
        if (esc) {
            lw__buf_append(b, run, (size_t)(s - run));
            lw__buf_puts(b, esc);
            run = s + n;
        }
        s += n;
    }
    lw__buf_append(b, run, (size_t)(s - run));
    lw__buf_append(b, "\"", 1);
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

void lw__jw_string(lw__jw *w, const char *s) {
    if (!s) {
        lw__jw_null(w);
        return;
    }
    value(w);
    quoted(&w->buf, s);
}

void lw__jw_int(lw__jw *w, int64_t v) {
    char num[24];
    value(w);
    lw__buf_append(&w->buf, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)v));
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
