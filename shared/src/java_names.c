/* java_names.c — class names as users write them in Java source. */
#include "java_names.h"

#include <string.h>

static size_t emit(char *out, size_t cap, size_t at, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++, at++)
        if (at + 1 < cap) out[at] = s[i];
    return at;
}

static const char *primitive(char c) {
    switch (c) {
    case 'Z': return "boolean";
    case 'C': return "char";
    case 'F': return "float";
    case 'D': return "double";
    case 'B': return "byte";
    case 'S': return "short";
    case 'I': return "int";
    case 'J': return "long";
    default: return NULL;
    }
}

size_t lw__java_source_name(const char *raw, size_t len, char *out, size_t cap) {
    size_t dims = 0, at = 0;
    while (dims < len && raw[dims] == '[') dims++;
    const char *elem = raw + dims;
    size_t elen = len - dims;
    if (dims > 0 && elen == 1 && primitive(elem[0])) {
        const char *p = primitive(elem[0]);
        at = emit(out, cap, at, p, strlen(p));
    } else {
        if (dims > 0 && elen >= 2 && elem[0] == 'L' && elem[elen - 1] == ';') {
            elem++;
            elen -= 2;
        }
        for (size_t i = 0; i < elen; i++) {
            char c = elem[i] == '/' ? '.' : elem[i];
            at = emit(out, cap, at, &c, 1);
        }
    }
    for (size_t i = 0; i < dims; i++) at = emit(out, cap, at, "[]", 2);
    if (cap > 0) out[at < cap ? at : cap - 1] = 0;
    return at;
}

const char *lw__java_simple_name(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}
