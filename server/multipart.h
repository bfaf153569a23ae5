/* multipart.h — a push-style streaming parser for multipart/form-data request bodies
 * (RFC 7578 / RFC 2046), fed in chunks of any size, in bounded memory: part bodies are
 * never buffered, only one part's header block is (up to a limit).
 *
 * The body is handed over with ld_mp_feed() in whatever pieces the HTTP layer gets, and the
 * parser calls back for each part: part_begin (name and Content-Type), part_data (the body
 * bytes, in order, in pieces unrelated to the input chunking), part_end. ld_mp_finish() at
 * the end of the body says whether the close delimiter was seen.
 *
 * What it accepts: an optional preamble (at most max_preamble bytes, skipped), then
 * `--boundary`, optional transport padding (spaces/tabs), CRLF, the part's header lines
 * (CRLF-terminated, names case-insensitive, no folding), an empty line, the body, and so on up
 * to `--boundary--`; anything after that (the epilogue) is ignored. Every part must have
 * `Content-Disposition: form-data; name=...` (token or quoted-string with \-escapes; other
 * parameters such as filename= are ignored). `\r\n--boundary` followed by anything other than
 * padding+CRLF or `--` is part data, not a delimiter.
 *
 * Memory: one allocation of about max_header_bytes + 200 bytes in ld_mp_new, none later.
 * Time: O(n) in the body length (memchr for CR, then a compare that never re-reads bytes).
 * Not thread-safe per handle; separate handles are independent (no global state). */
#ifndef LD_MULTIPART_H
#define LD_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

/* ld_mp_feed / ld_mp_finish result for malformed input (details in ld_mp_error). */
#define LD_MP_ERROR (-1)

/* RFC 2046: a boundary is 1..70 characters. A buffer of this size holds any, with its NUL. */
#define LD_MP_BOUNDARY_CAP 71

/* Default limits (a zero field in ld_mp_limits means "use the default"). */
#define LD_MP_DEFAULT_MAX_HEADER_BYTES (8u * 1024u)
#define LD_MP_DEFAULT_MAX_PARTS 8u
#define LD_MP_DEFAULT_MAX_PREAMBLE 1024u
/* Transport padding (spaces/tabs after a boundary) longer than this is refused. */
#define LD_MP_MAX_PADDING 32u

typedef struct ld_mp ld_mp; /* opaque */

typedef struct ld_mp_limits {
    size_t max_header_bytes; /* per part's header block, CRLFs included; default 8 KiB */
    size_t max_parts;        /* parts in the body; default 8 */
    size_t max_preamble;     /* bytes before the first boundary; default 1 KiB */
} ld_mp_limits;

/* Each callback may be NULL (then it is skipped). `user` is the pointer given to ld_mp_new.
 * A nonzero return stops the parser: ld_mp_feed returns that value, now and on every later
 * call (and ld_mp_finish too). */
typedef struct ld_mp_callbacks {
    /* A part starts. `name` is its form-data name (unescaped, non-empty, NUL-terminated);
     * `content_type` is its Content-Type without parameters, lower-cased, "" when absent.
     * Both are borrowed: valid only during the call. */
    int (*part_begin)(void *user, const char *name, const char *content_type);
    /* Body bytes of the current part, in order, in pieces of any size (never 0). Borrowed:
     * `data` points into the caller's chunk or the parser, valid only during the call. */
    int (*part_data)(void *user, const void *data, size_t len);
    /* The current part ended (its delimiter was seen in full). */
    int (*part_end)(void *user);
} ld_mp_callbacks;

/* Parses the boundary from a Content-Type header value, e.g.
 * `multipart/form-data; boundary="xyz"` (media type and parameter names case-insensitive,
 * the value a token or quoted-string). The boundary must be 1..70 RFC 2046 characters
 * (letters, digits, '()+_,-./:=? and space, not ending in a space).
 * Returns 0 and copies the NUL-terminated boundary into `out` (capacity `cap`, at least its
 * length + 1; LD_MP_BOUNDARY_CAP always suffices), or -1 when `content_type` is not
 * multipart/form-data, has no valid boundary, has two boundary parameters, is malformed or
 * longer than 1023 bytes, or `out` is too small (then `out` holds "" if cap > 0). Nothing
 * is kept. */
int ld_mp_boundary(const char *content_type, char *out, size_t cap);

/* Makes a parser for a body delimited by `boundary` (copied; the same rules as above, else
 * NULL). `limits` is copied (NULL or a zero field = defaults), `cb` is copied (NULL = no
 * callbacks), `user` is borrowed and passed to the callbacks. NULL on invalid arguments or
 * out of memory. Free with ld_mp_free. */
ld_mp *ld_mp_new(const char *boundary, const ld_mp_limits *limits, const ld_mp_callbacks *cb, void *user);

/* Frees the parser. NULL is a no-op. */
void ld_mp_free(ld_mp *p);

/* Feeds the next `len` bytes of the body (`data` borrowed for the call; may be NULL when
 * len is 0). Returns 0 (fine, want more), a callback's nonzero value (parsing stopped), or
 * LD_MP_ERROR on malformed input or a broken limit. Errors and stops are sticky: every later
 * call returns the same value. */
int ld_mp_feed(ld_mp *p, const void *data, size_t len);

/* Call at the end of the body. Returns 0 when the close delimiter (`--boundary--`) was seen,
 * else LD_MP_ERROR ("body ends inside a part", ...), or the sticky value of an earlier
 * error or stop. */
int ld_mp_finish(ld_mp *p);

/* What was wrong, with the byte offset in the body, e.g. "part header block longer than
 * 8192 bytes at byte 8301". "" while nothing went wrong. Owned by the parser; valid until
 * the next call on it. Never NULL (a NULL parser gives a fixed message). */
const char *ld_mp_error(const ld_mp *p);

/* How many parts have begun (part_begin was called, or would have been). */
size_t ld_mp_parts(const ld_mp *p);

/* Bytes fed so far (the body offset of the next byte). */
uint64_t ld_mp_offset(const ld_mp *p);

#endif
