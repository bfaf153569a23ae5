/* object_inspectors.c — the rules as a table (LeakCanary's inspectors, for the classes a
 * JVM or Android dump contains). Add a row to teach the analyzer about a new lifecycle. */
#include "object_inspectors.h"

#include <stdio.h>

#include "heap_objects.h"

typedef enum {
    RULE_NOT_LEAKING, /* instances of the class are never leaking */
    RULE_BOOL_FIELD,  /* boolean `field`: true -> yes_reason (YES), false -> no_reason (NO) */
    RULE_NULL_FIELD,  /* reference `field`: null -> yes_reason (YES), set -> no_reason (NO) */
    RULE_THREAD,      /* label the thread's name; the thread named "main" is never leaking */
} rule_kind;

typedef struct {
    const char *class_name; /* applies to this class and its subclasses */
    rule_kind kind;
    const char *field;
    const char *yes_reason; /* NULL: that outcome decides nothing */
    const char *no_reason;
} rule;

static const rule rules[] = {
    {"java.lang.ClassLoader", RULE_NOT_LEAKING, NULL, NULL, "A ClassLoader is never leaking"},
    {"java.lang.Thread", RULE_THREAD, NULL, NULL, NULL},
    {"android.app.ActivityThread", RULE_NOT_LEAKING, NULL, NULL, "ActivityThread is a singleton that never dies"},
    {"android.app.Application", RULE_NOT_LEAKING, NULL, NULL, "Application is a singleton"},
    {"android.view.inputmethod.InputMethodManager", RULE_NOT_LEAKING, NULL, NULL, "InputMethodManager is a singleton"},
    {"android.app.Activity", RULE_BOOL_FIELD, "mDestroyed", "Activity#mDestroyed is true", "Activity#mDestroyed is false"},
    {"android.view.Window", RULE_BOOL_FIELD, "mDestroyed", "Window#mDestroyed is true", NULL},
    {"android.os.MessageQueue", RULE_BOOL_FIELD, "mQuitting", "MessageQueue#mQuitting is true",
     "MessageQueue#mQuitting is false"},
    {"android.os.MessageQueue", RULE_BOOL_FIELD, "mQuiting", "MessageQueue#mQuiting is true",
     "MessageQueue#mQuiting is false"},
    {"android.app.Fragment", RULE_NULL_FIELD, "mFragmentManager", "Fragment.mFragmentManager is null",
     "Fragment.mFragmentManager is not null"},
    {"android.support.v4.app.Fragment", RULE_NULL_FIELD, "mFragmentManager", "Fragment.mFragmentManager is null",
     "Fragment.mFragmentManager is not null"},
    {"androidx.fragment.app.Fragment", RULE_NULL_FIELD, "mFragmentManager", "Fragment.mFragmentManager is null",
     "Fragment.mFragmentManager is not null"},
    {"android.view.ViewRootImpl", RULE_NULL_FIELD, "mView", "ViewRootImpl#mView is null", NULL},
};

void lw__inspection_add_reason(lw__buf *reasons, const char *reason) {
    if (reasons->size) lw__buf_puts(reasons, " and ");
    lw__buf_puts(reasons, reason);
}

void lw__inspection_add_label(lw__inspection *in, const char *label) {
    char *copy = lw__strdup(label);
    char **n = copy ? lw__realloc(in->labels, (in->label_count + 1) * sizeof *n) : NULL;
    if (!n) {
        lw__free(copy);
        return;
    }
    in->labels = n;
    in->labels[in->label_count++] = copy;
}

void lw__inspection_free(lw__inspection *in) {
    lw__buf_free(&in->leaking);
    lw__buf_free(&in->not_leaking);
    for (size_t i = 0; i < in->label_count; i++) lw__free(in->labels[i]);
    lw__free(in->labels);
    memset(in, 0, sizeof *in);
}

void lw__inspect_object(const lw_heap *heap, uint32_t dense, lw__inspection *out) {
    memset(out, 0, sizeof *out);
    lw__object o;
    lw__heap_object(heap, dense, &o);
    if (o.tag == LW_SUB_CLASS_DUMP) {
        lw__inspection_add_reason(&out->not_leaking, "a class is never leaking");
        return;
    }
    if (o.tag != LW_SUB_INSTANCE_DUMP || o.class_index == LW_NONE) return;
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        const rule *ru = &rules[r];
        uint32_t c = o.class_index;
        int match = 0;
        for (unsigned guard = 0; c != LW_NONE && guard < 256; c = heap->classes[c].super_index, guard++)
            if (strcmp(heap->classes[c].name, ru->class_name) == 0) {
                match = 1;
                break;
            }
        if (!match) continue;
        uint8_t t;
        uint64_t v;
        switch (ru->kind) {
        case RULE_NOT_LEAKING:
            lw__inspection_add_reason(&out->not_leaking, ru->no_reason);
            break;
        case RULE_BOOL_FIELD:
            if (!lw__instance_field(heap, &o, NULL, ru->field, &t, &v) || t != LW_T_BOOLEAN) break;
            if (v && ru->yes_reason) lw__inspection_add_reason(&out->leaking, ru->yes_reason);
            if (!v && ru->no_reason) lw__inspection_add_reason(&out->not_leaking, ru->no_reason);
            break;
        case RULE_NULL_FIELD:
            if (!lw__instance_field(heap, &o, NULL, ru->field, &t, &v) || t != LW_T_OBJECT) break;
            if (!v && ru->yes_reason) lw__inspection_add_reason(&out->leaking, ru->yes_reason);
            if (v && ru->no_reason) lw__inspection_add_reason(&out->not_leaking, ru->no_reason);
            break;
        case RULE_THREAD: {
            char *name = lw__string_field(heap, &o, "name", 200);
            if (!name) break;
            char label[256];
            snprintf(label, sizeof label, "Thread name: '%s'", name);
            lw__inspection_add_label(out, label);
            if (strcmp(name, "main") == 0) lw__inspection_add_reason(&out->not_leaking, "the main thread always runs");
            lw__free(name);
            break;
        }
        }
    }
}
