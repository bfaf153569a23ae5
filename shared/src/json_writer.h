/* json_writer.h — JSON text written straight into a buffer, compact or indented by two
 * spaces (the layout jansson's JSON_INDENT(2) gives), without building a tree first: the trace
 * JSON of a report is written for every upload leakd stores, and a tree of a few hundred
 * jansson objects cost more than the rest of storing it. Strings that are not valid UTF-8
 * (class names come from heap dumps) are written with U+FFFD in place of each bad byte,
 * never dropped. */
#ifndef LW_JSON_WRITER_H
#define LW_JSON_WRITER_H

#include <stdint.h>

#include "common.h"

#define LW__JW_MAX_DEPTH 32

typedef struct lw__jw {
    lw__buf buf;
    int pretty;
    int depth;
    int after_key;                        /* the next value follows "key": */
    unsigned char first[LW__JW_MAX_DEPTH]; /* nothing written yet in the container at depth */
} lw__jw;

void lw__jw_init(lw__jw *w, int pretty);
void lw__jw_open(lw__jw *w, char bracket);  /* '{' or '[' as the next value */
void lw__jw_close(lw__jw *w, char bracket); /* '}' or ']' */
void lw__jw_key(lw__jw *w, const char *key);
/* A key or a string value known when compiling, already quoted: `"name":` (LW__JW_KEY) or
 * `"word"` (LW__JW_WORD), `len` bytes. Each traces report the server stores is written with
 * ~560 keys and strings, most of them literals: quoting them again each time (strlen, room
 * for the worst case, the scan) was a third of the writer's instructions. */
void lw__jw_key_quoted(lw__jw *w, const char *quoted_colon, size_t len);
void lw__jw_word_quoted(lw__jw *w, const char *quoted, size_t len);
#define LW__JW_KEY(w, name) lw__jw_key_quoted((w), "\"" name "\":", sizeof("\"" name "\":") - 1)
#define LW__JW_WORD(w, word) lw__jw_word_quoted((w), "\"" word "\"", sizeof("\"" word "\"") - 1)
void lw__jw_string(lw__jw *w, const char *s); /* NULL writes null */
void lw__jw_int(lw__jw *w, int64_t v);
void lw__jw_bool(lw__jw *w, int v);
void lw__jw_null(lw__jw *w);
/* The text (the caller frees it), or NULL when an allocation failed or the nesting went too
 * deep; the writer is emptied either way. */
char *lw__jw_take(lw__jw *w);

#endif
