/* leak_trace.c — the trace model's rules: LeakCanary's status propagation and suspects. */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "java_names.h"

static void set_reason(const lw_trace *t, lw_trace_element *e, lw_leaking status, const char *fmt, const char *a,
                       const char *b) {
    char buf[2048];
    snprintf(buf, sizeof buf, fmt, a, b ? b : "");
    char *r = lw__strdup(buf);
    if (!r) return; /* keep the old reason rather than lose the element */
    lw__free_unpooled(e->reason, t->lw__pool, t->lw__pool_len);
    e->reason = r;
    e->leaking = status;
}

/* The simple name used in propagated reasons: "Object[]" stays as it is. */
static const char *simple(const lw_trace_element *e) { return lw__java_simple_name(e->class_name ? e->class_name : ""); }

void lw_trace_propagate(lw_trace *t) {
    if (!t || t->element_count == 0) return;
    size_t n = t->element_count, last = n - 1;
    lw_trace_element *el = t->elements;
    if (!el[last].reason) el[last].reason = lw__strdup("");
    if (el[last].leaking == LW_LEAKING_UNKNOWN) {
        set_reason(t, &el[last], LW_LEAKING_YES, "This is the leaking object%s%s", "", NULL);
    } else if (el[last].leaking == LW_LEAKING_NO) {
        char own[1024];
        snprintf(own, sizeof own, "%s", el[last].reason ? el[last].reason : "");
        set_reason(t, &el[last], LW_LEAKING_YES, "This is the leaking object. Conflicts with %s%s", own, NULL);
    }
    lw_leaking *orig = lw__malloc(n * sizeof *orig);
    if (!orig) return;
    for (size_t i = 0; i < n; i++) orig[i] = el[i].leaking;
    size_t last_not = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (orig[i] == LW_LEAKING_NO) last_not = i;
    size_t first_leak = last;
    for (size_t i = last_not == SIZE_MAX ? 0 : last_not + 1; i < n; i++)
        if (orig[i] == LW_LEAKING_YES) {
            first_leak = i;
            break;
        }
    if (last_not != SIZE_MAX) {
        for (size_t i = 0; i < last_not; i++) {
            size_t next = i + 1;
            while (next < last_not && orig[next] != LW_LEAKING_NO) next++;
            char own[1024];
            snprintf(own, sizeof own, "%s", el[i].reason ? el[i].reason : "");
            if (orig[i] == LW_LEAKING_UNKNOWN)
                set_reason(t, &el[i], LW_LEAKING_NO, "%s\xE2\x86\x93 is not leaking%s", simple(&el[next]), NULL);
            else if (orig[i] == LW_LEAKING_NO)
                set_reason(t, &el[i], LW_LEAKING_NO, "%s\xE2\x86\x93 is not leaking and %s", simple(&el[next]), own);
            else
                set_reason(t, &el[i], LW_LEAKING_NO, "%s\xE2\x86\x93 is not leaking. Conflicts with %s", simple(&el[next]), own);
        }
    }
    if (first_leak + 1 < last) {
        for (size_t i = last - 1; i > first_leak; i--) {
            size_t prev = i - 1;
            while (prev > first_leak && orig[prev] != LW_LEAKING_YES) prev--;
            char own[1024];
            snprintf(own, sizeof own, "%s", el[i].reason ? el[i].reason : "");
            if (orig[i] == LW_LEAKING_YES)
                set_reason(t, &el[i], LW_LEAKING_YES, "%s\xE2\x86\x91 is leaking and %s", simple(&el[prev]), own);
            else
                set_reason(t, &el[i], LW_LEAKING_YES, "%s\xE2\x86\x91 is leaking%s", simple(&el[prev]), NULL);
        }
    }
    lw__free(orig);
    lw_trace_update_suspects(t);
}

int lw_trace_update_suspects(lw_trace *t) {
    int changed = 0;
    if (!t) return 0;
    for (size_t i = 0; i < t->element_count; i++) {
        lw_trace_element *e = &t->elements[i];
        int s = 0;
        if (i + 1 < t->element_count) {
            if (e->leaking == LW_LEAKING_UNKNOWN) s = 1;
            else if (e->leaking == LW_LEAKING_NO)
                s = i + 2 == t->element_count || t->elements[i + 1].leaking != LW_LEAKING_NO;
        }
        if (e->has_reference && (e->suspect != 0) != s) changed = 1;
        if (e->has_reference) e->suspect = s;
    }
    return changed;
}
