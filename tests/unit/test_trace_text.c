/* test_trace_text.c — LeakCanary's text layout of traces and reports, byte for byte. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "heap_builder.h"
#include "hprof_format.h"
#include "trace_builder.h"

#define ZWSP "\xE2\x80\x8B"

static void test_static_field_trace_text_exact(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    uint64_t root = hb_class(b, "GcRoot", NULL, NULL, "leak:O");
    hb_class(b, "Leaking", NULL, NULL, NULL);
    uint64_t obj = hb_instance(b, "Leaking");
    hb_set_static(b, root, "leak", obj);
    hb_watch(b, obj, "k-1", "Leaking destroyed", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    assert_int_equal(r->leak_count, 1);
    char *text = lw_trace_to_text(&r->leaks[0].traces[0]);
    const char *expect =
        "┬───\n"
        "│ GC Root: System class\n"
        "│\n"
        "├─ GcRoot class\n"
        "│    Leaking: NO (a class is never leaking)\n"
        "│    ↓ static GcRoot.leak\n"
        "│                    ~~~~\n"
        "╰→ Leaking instance\n" ZWSP "     Leaking: YES (ObjectWatcher was watching this because Leaking destroyed)\n" ZWSP
        "     key = k-1\n" ZWSP "     watchDurationMillis = 9000\n" ZWSP "     retainedDurationMillis = 5000\n";
    assert_string_equal(text, expect);
    free(text);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_array_local_and_instance_references_render_like_leakcanary(void **state) {
    (void)state;
    lw_trace t = {0};
    t.gc_root = strdup("THREAD_OBJECT");
    t.element_count = 4;
    t.elements = calloc(4, sizeof *t.elements);
    const char *names[] = {"com.acme.Worker", "java.lang.Object[]", "com.acme.Registry$Entry", "com.acme.DetailActivity"};
    lw_object_kind kinds[] = {LW_OBJECT_INSTANCE, LW_OBJECT_ARRAY, LW_OBJECT_INSTANCE, LW_OBJECT_INSTANCE};
    for (int i = 0; i < 4; i++) {
        t.elements[i].class_name = strdup(names[i]);
        t.elements[i].object_kind = kinds[i];
        t.elements[i].reason = strdup("");
        t.elements[i].retained_bytes = t.elements[i].retained_objects = -1;
    }
    t.elements[0].leaking = LW_LEAKING_NO;
    free(t.elements[0].reason);
    t.elements[0].reason = strdup("a thread");
    t.elements[0].labels = calloc(1, sizeof(char *));
    t.elements[0].labels[0] = strdup("Thread name: 'w'");
    t.elements[0].label_count = 1;
    t.elements[0].has_reference = 1;
    t.elements[0].ref_kind = LW_REF_LOCAL;
    t.elements[0].ref_name = strdup("w");
    t.elements[1].has_reference = 1;
    t.elements[1].ref_kind = LW_REF_ARRAY_ELEMENT;
    t.elements[1].ref_index = 12;
    t.elements[2].has_reference = 1;
    t.elements[2].ref_kind = LW_REF_INSTANCE_FIELD;
    t.elements[2].ref_name = strdup("value");
    t.elements[3].leaking = LW_LEAKING_YES;
    free(t.elements[3].reason);
    t.elements[3].reason = strdup("Activity#mDestroyed is true");
    t.elements[3].retained_bytes = 1234;
    t.elements[3].retained_objects = 31;
    lw_trace_update_suspects(&t);
    char *text = lw_trace_to_text(&t);
    const char *expect =
        "┬───\n"
        "│ GC Root: Thread object\n"
        "│\n"
        "├─ com.acme.Worker instance\n"
        "│    Leaking: NO (a thread)\n"
        "│    Thread name: 'w'\n"
        "│    ↓ Worker<Java Local>\n"
        "│            ~~~~~~~~~~~~\n"
        "├─ java.lang.Object[] array\n"
        "│    Leaking: UNKNOWN\n"
        "│    ↓ Object[12]\n"
        "│            ~~~~\n"
        "├─ com.acme.Registry$Entry instance\n"
        "│    Leaking: UNKNOWN\n"
        "│    ↓ Registry$Entry.value\n"
        "│                     ~~~~~\n"
        "╰→ com.acme.DetailActivity instance\n" ZWSP "     Leaking: YES (Activity#mDestroyed is true)\n" ZWSP
        "     Retaining 1.2 kB in 31 objects\n";
    assert_string_equal(text, expect);
    free(text);
    /* Without suspects there are no underlines. */
    for (int i = 0; i < 4; i++) t.elements[i].suspect = 0;
    text = lw_trace_to_text(&t);
    assert_null(strstr(text, "~"));
    free(text);
    lw__trace_clear(&t);
}

static void test_report_text_has_sections_signature_and_counts(void **state) {
    (void)state;
    hb *b = hb_new(HB_ANDROID, 4);
    uint64_t h = hb_class(b, "Holder", NULL, NULL, "items:O");
    hb_class(b, "Item", NULL, NULL, NULL);
    hb_class(b, "android.app.Activity$1", NULL, "this$0:O", NULL);
    uint64_t g = hb_class(b, "Global", NULL, NULL, "cb:O");
    uint64_t arr = hb_object_array(b, NULL, NULL, 4);
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t it = hb_instance(b, "Item");
        hb_array_set(b, arr, i, it);
        hb_watch(b, it, i ? "k1" : "k0", "item", 1);
    }
    hb_set_static(b, h, "items", arr);
    uint64_t cb = hb_instance(b, "android.app.Activity$1"), lib = hb_instance(b, "Item");
    hb_set(b, cb, "this$0", lib);
    hb_set_static(b, g, "cb", cb);
    hb_watch(b, lib, "k2", "lib", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    assert_int_equal(r->leak_count, 2);
    char *text = lw_leak_report_to_text(r);
    assert_non_null(strstr(text, "HEAP ANALYSIS RESULT\n"));
    assert_non_null(strstr(text, "1 APPLICATION LEAKS\n"));
    assert_non_null(strstr(text, "1 LIBRARY LEAKS\n"));
    assert_non_null(strstr(text, "Displaying only 1 leak trace out of 2 with the same signature\n"));
    assert_non_null(strstr(text, "Leak pattern: instance field android.app.Activity$1#this$0\n"));
    assert_non_null(strstr(text, "Signature: 7573873eb76c9b7e8963efe04194842e7e15c8b9\n"));
    char line[64];
    snprintf(line, sizeof line, "Signature: %s\n", r->leaks[0].signature);
    assert_non_null(strstr(text, line));
    assert_non_null(strstr(text, "Heap: JAVA PROFILE 1.0.3, 4-byte ids"));
    /* application leaks come before library leaks */
    assert_true(strstr(text, "APPLICATION LEAKS") < strstr(text, "Leak pattern:"));
    free(text);
    lw_leak_report_free(r);
    hb_free(b);
    text = lw_leak_report_to_text(NULL);
    assert_non_null(strstr(text, "0 APPLICATION LEAKS"));
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_field_trace_text_exact),
        cmocka_unit_test(test_array_local_and_instance_references_render_like_leakcanary),
        cmocka_unit_test(test_report_text_has_sections_signature_and_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
