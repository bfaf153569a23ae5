/* java_names.h — class names in Java source form: "java/lang/String" -> "java.lang.String",
 * "[[I" -> "int[][]", "[Ljava/lang/Object;" -> "java.lang.Object[]". */
#ifndef LW_JAVA_NAMES_H
#define LW_JAVA_NAMES_H

#include <stddef.h>

/* Writes the source form of the `len`-byte name `raw` into `out` (capacity `cap`, always
 * NUL-terminated when cap > 0). Returns the length the full result needs. */
size_t lw__java_source_name(const char *raw, size_t len, char *out, size_t cap);

/* The simple name: text after the last '.', inner-class '$' kept ("Outer$Inner"). */
const char *lw__java_simple_name(const char *name);

#endif
