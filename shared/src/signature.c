/* signature.c — LeakCanary's leak fingerprint: SHA-1 over the suspect references. */
#include "common.h"

void lw_trace_signature(const lw_trace *t, char out[41]) {
    lw__buf b = {0};
    for (size_t i = 0; t && i + 1 < t->element_count; i++) {
        const lw_trace_element *e = &t->elements[i];
        if (!e->has_reference || !e->suspect) continue;
        lw__buf_puts(&b, e->class_name ? e->class_name : "");
        switch (e->ref_kind) {
        case LW_REF_ARRAY_ELEMENT: lw__buf_puts(&b, "[x]"); break;
        case LW_REF_LOCAL: lw__buf_puts(&b, "<Java Local>"); break;
        default: lw__buf_puts(&b, e->ref_name ? e->ref_name : ""); break;
        }
    }
    lw_sha1_hex(b.data ? b.data : "", b.size, out);
    lw__buf_free(&b);
}

void lw_pattern_signature(const char *pattern, char out[41]) { lw_sha1_hex(pattern, pattern ? strlen(pattern) : 0, out); }
