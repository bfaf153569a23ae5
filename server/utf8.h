/* utf8.h — well-formed UTF-8 (RFC 3629: no overlong form, no surrogate, nothing past
 * U+10FFFF). PostgreSQL, whose encoding is UTF-8, refuses any other text parameter, and
 * jansson any other JSON string: leakd checks what a client sent before either sees it. */
#ifndef LD_UTF8_H
#define LD_UTF8_H

#include <stddef.h>

/* The bytes of s[0..len) up to the first that is not part of a whole, well-formed UTF-8
 * character: len when all are. A text cut at a byte count ends where this says. */
size_t ld_utf8_prefix(const char *s, size_t len);

#endif
