/* trace_text.c — LeakCanary's text layout, so users read traces without learning a format. */
#include <stdio.h>

#include "common.h"
#include "java_names.h"

static const char *root_description(const char *root) {
    static const struct { const char *name, *text; } map[] = {
        {"JNI_GLOBAL", "Global variable in native code"},
        {"JNI_LOCAL", "Local variable in native code"},
        {"JAVA_FRAME", "Java local variable"},
        {"NATIVE_STACK", "Input or output parameters in native code"},
        {"STICKY_CLASS", "System class"},
        {"THREAD_BLOCK", "Thread block"},
        {"MONITOR_USED", "Monitor (anything that called the wait() or notify() methods, or that is synchronized.)"},
        {"THREAD_OBJECT", "Thread object"},
        {"JNI_MONITOR", "Root JNI monitor"},
        {"UNKNOWN", "Unknown GC root type"},
        {"INTERNED_STRING", "Interned string"},
        {"FINALIZING", "Object awaiting finalization"},
        {"DEBUGGER", "Debugger reference"},
        {"REFERENCE_CLEANUP", "Reference cleanup"},
        {"VM_INTERNAL", "VM internal reference"},
        {"UNREACHABLE", "Unreachable object"},
    };
    for (size_t i = 0; root && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].name, root) == 0) return map[i].text;
    return root ? root : "Unknown GC root type";
}

static const char *kind_word(lw_object_kind k) {
    return k == LW_OBJECT_CLASS ? "class" : k == LW_OBJECT_ARRAY ? "array" : "instance";
}

/* Characters, not bytes: the underline must line up under multi-byte text. */
static size_t utf8_chars(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
    return c;
}

static void human_size(char *buf, size_t cap, int64_t bytes) {
    if (bytes < 1000) {
        snprintf(buf, cap, "%lld B", (long long)bytes);
        return;
    }
    static const char units[] = "kMGTPE";
    double v = (double)bytes;
    int u = -1;
    while (v >= 1000 && u < 5) {
        v /= 1000;
        u++;
    }
    snprintf(buf, cap, "%.1f %cB", v, units[u]);
}

static void status_lines(lw__buf *b, const lw_trace_element *e, const char *prefix) {
    if (e->leaking == LW_LEAKING_UNKNOWN) lw__buf_printf(b, "%sLeaking: UNKNOWN\n", prefix);
    else lw__buf_printf(b, "%sLeaking: %s (%s)\n", prefix, e->leaking == LW_LEAKING_YES ? "YES" : "NO", e->reason ? e->reason : "");
    if (e->retained_bytes >= 0 && e->retained_objects >= 0) {
        char hs[32];
        human_size(hs, sizeof hs, e->retained_bytes);
        lw__buf_printf(b, "%sRetaining %s in %lld objects\n", prefix, hs, (long long)e->retained_objects);
    }
    for (size_t i = 0; i < e->label_count; i++) lw__buf_printf(b, "%s%s\n", prefix, e->labels[i]);
}

static void render_trace(lw__buf *b, const lw_trace *t) {
    lw__buf_puts(b, "\xE2\x94\xAC\xE2\x94\x80\xE2\x94\x80\xE2\x94\x80\n");                      /* ┬─── */
    lw__buf_printf(b, "\xE2\x94\x82 GC Root: %s\n\xE2\x94\x82\n", root_description(t->gc_root)); /* │ */
    for (size_t i = 0; i < t->element_count; i++) {
        const lw_trace_element *e = &t->elements[i];
        int last = i + 1 == t->element_count;
        if (last) {
            lw__buf_printf(b, "\xE2\x95\xB0\xE2\x86\x92 %s %s\n", e->class_name, kind_word(e->object_kind)); /* ╰→ */
            status_lines(b, e, "\xE2\x80\x8B     ");                                                  /* ZWSP */
            break;
        }
        lw__buf_printf(b, "\xE2\x94\x9C\xE2\x94\x80 %s %s\n", e->class_name, kind_word(e->object_kind)); /* ├─ */
        status_lines(b, e, "\xE2\x94\x82    ");
        if (!e->has_reference) continue;
        /* ↓ [static ]Owner.name | Owner[3] | Thread<Java Local> */
        char owner[512];
        snprintf(owner, sizeof owner, "%s", lw__java_simple_name(e->class_name));
        size_t ol = strlen(owner);
        if (ol >= 2 && strcmp(owner + ol - 2, "[]") == 0) owner[ol - 2] = 0;
        char name[600];
        if (e->ref_kind == LW_REF_ARRAY_ELEMENT) snprintf(name, sizeof name, "[%llu]", (unsigned long long)e->ref_index);
        else if (e->ref_kind == LW_REF_LOCAL) snprintf(name, sizeof name, "<Java Local>");
        else snprintf(name, sizeof name, "%s", e->ref_name ? e->ref_name : "");
        char head[700];
        int dot = e->ref_kind == LW_REF_INSTANCE_FIELD || e->ref_kind == LW_REF_STATIC_FIELD;
        snprintf(head, sizeof head, "    \xE2\x86\x93 %s%s%s", e->ref_kind == LW_REF_STATIC_FIELD ? "static " : "", owner,
                 dot ? "." : "");
        lw__buf_printf(b, "\xE2\x94\x82%s%s\n", head, name);
        if (e->suspect) {
            lw__buf_puts(b, "\xE2\x94\x82");
            size_t pad = utf8_chars(head, strlen(head));
            for (size_t k = 0; k < pad; k++) lw__buf_puts(b, " ");
            size_t tl = utf8_chars(name, strlen(name));
            for (size_t k = 0; k < tl; k++) lw__buf_puts(b, "~");
            lw__buf_puts(b, "\n");
        }
    }
}

char *lw_trace_to_text(const lw_trace *t) {
    lw__buf b = {0};
    if (t) render_trace(&b, t);
    return lw__buf_take(&b);
}

static void render_leak(lw__buf *b, const lw_leak *l) {
    int64_t total = 0;
    int sized = 0;
    for (size_t i = 0; i < l->trace_count; i++) {
        const lw_trace *t = &l->traces[i];
        if (t->element_count && t->elements[t->element_count - 1].retained_bytes >= 0) {
            total += t->elements[t->element_count - 1].retained_bytes;
            sized = 1;
        }
    }
    if (l->library) {
        lw__buf_printf(b, "Leak pattern: %s\n", l->library_pattern ? l->library_pattern : "");
        lw__buf_printf(b, "Description: %s\n", l->library_description ? l->library_description : "");
    }
    if (sized) lw__buf_printf(b, "%lld bytes retained by leaking objects\n", (long long)total);
    if (l->count > 1)
        lw__buf_printf(b, "Displaying only 1 leak trace out of %llu with the same signature\n", (unsigned long long)l->count);
    lw__buf_printf(b, "Signature: %s\n", l->signature);
    if (l->trace_count) render_trace(b, &l->traces[0]);
}

char *lw_leak_report_to_text(const lw_leak_report *r) {
    static const char *rule = "====================================\n";
    lw__buf b = {0};
    size_t app = 0, lib = 0;
    for (size_t i = 0; r && i < r->leak_count; i++) {
        if (r->leaks[i].library) lib++;
        else app++;
    }
    lw__buf_puts(&b, rule);
    lw__buf_puts(&b, "HEAP ANALYSIS RESULT\n");
    lw__buf_puts(&b, rule);
    lw__buf_printf(&b, "%zu APPLICATION LEAKS\n\n", app);
    if (app) lw__buf_puts(&b, "References underlined with \"~~~\" are likely causes.\n\n");
    for (size_t i = 0, k = 0; r && i < r->leak_count; i++) {
        if (r->leaks[i].library) continue;
        if (k++) lw__buf_puts(&b, "\n");
        render_leak(&b, &r->leaks[i]);
    }
    lw__buf_puts(&b, rule);
    lw__buf_printf(&b, "%zu LIBRARY LEAKS\n\n", lib);
    if (lib)
        lw__buf_puts(&b, "A Library Leak is a leak caused by a known bug in 3rd party code that you do not have control over.\n\n");
    for (size_t i = 0, k = 0; r && i < r->leak_count; i++) {
        if (!r->leaks[i].library) continue;
        if (k++) lw__buf_puts(&b, "\n");
        render_leak(&b, &r->leaks[i]);
    }
    lw__buf_puts(&b, rule);
    if (r) {
        lw__buf_printf(&b, "Heap: %s, %u-byte ids, %llu objects, %llu bytes\n", r->hprof_version ? r->hprof_version : "?",
                       r->id_size, (unsigned long long)r->objects, (unsigned long long)r->bytes);
        lw__buf_printf(&b, "Analysis duration: %lld ms (index %lld ms, paths %lld ms", (long long)(
                       (r->index_ms > 0 ? r->index_ms : 0) + (r->paths_ms > 0 ? r->paths_ms : 0) + (r->retained_ms > 0 ? r->retained_ms : 0)),
                       (long long)r->index_ms, (long long)r->paths_ms);
        if (r->retained_ms >= 0) lw__buf_printf(&b, ", retained size %lld ms", (long long)r->retained_ms);
        lw__buf_puts(&b, ")\n");
    }
    return lw__buf_take(&b);
}
