/* test_large_file.c — a dump larger than 4 GiB (64-bit offsets): two 2 GiB long[] arrays
 * (holes in a sparse file, so the test costs no disk) and then a leak whose records all lie
 * beyond 4 GiB. The analyzer must find it, and info must count the file right. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hprof_writer.h"

enum { S_OBJECT = 1, S_REF, S_WEAKREF, S_KWR, S_STRING, S_HOLDER, S_SCREEN, S_BYTES, S_LONGS,
       F_REFERENT, F_KEY, F_DESC, F_WATCH, F_RETAINED, F_DUMP_UP, F_VALUE, F_CODER, F_LEAKED, F_OBJECT_ARR };
enum { C_OBJECT = 0x1000, C_REF = 0x1010, C_WEAKREF = 0x1020, C_KWR = 0x1030, C_STRING = 0x1040, C_HOLDER = 0x1050,
       C_SCREEN = 0x1060 };

static void str(lw__hprof_writer *w, uint64_t id, const char *s) { lw__hprof_writer_string(w, id, s, strlen(s)); }

static void java_string(lw__hprof_writer *w, uint64_t id, uint64_t value_id, const char *s) {
    lw__hprof_writer_primitive_array(w, value_id, 0, 8 /* byte */, s, (uint32_t)strlen(s));
    uint8_t data[9];
    lw__put_be64(data, value_id); /* value */
    data[8] = 0;                  /* coder LATIN1 */
    lw__hprof_writer_instance(w, id, 0, C_STRING, data, sizeof data);
}

static void large_file_leak(void **state) {
    (void)state;
    char path[] = "/tmp/leakcore-large-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    lw__hprof_writer *w = NULL;
    lw_error err = {0};
    assert_int_equal(lw__hprof_writer_open(&w, path, "JAVA PROFILE 1.0.2", 8, 0, 0, &err), LW_OK);
    const char *names[] = {"", "java/lang/Object", "java/lang/ref/Reference", "java/lang/ref/WeakReference",
                           "io/leakwatch/KeyedWeakReference", "java/lang/String", "big/Holder", "big/Screen", "[B", "[J",
                           "referent", "key", "description", "watchUptimeMillis", "retainedUptimeMillis",
                           "heapDumpUptimeMillis", "value", "coder", "leaked"};
    for (uint64_t i = 1; i < sizeof names / sizeof *names; i++) str(w, i, names[i]);
    uint64_t cls[] = {C_OBJECT, C_REF, C_WEAKREF, C_KWR, C_STRING, C_HOLDER, C_SCREEN};
    for (uint32_t i = 0; i < 7; i++) lw__hprof_writer_load_class(w, i + 1, cls[i], 0, i + 1);
    lw__hprof_field_def ref_fields[] = {{F_REFERENT, 2, 0}};
    lw__hprof_field_def kwr_fields[] = {{F_KEY, 2, 0}, {F_DESC, 2, 0}, {F_WATCH, 11, 0}, {F_RETAINED, 11, 0}};
    lw__hprof_field_def kwr_static[] = {{F_DUMP_UP, 11, 5000}};
    lw__hprof_field_def str_fields[] = {{F_VALUE, 2, 0}, {F_CODER, 8, 0}};
    lw__hprof_field_def holder_static[] = {{F_LEAKED, 2, 0x10000000100ull}};
    lw__hprof_class_def defs[] = {
        {C_OBJECT, 0, 0, 0, 0, NULL, 0, NULL, 0},
        {C_REF, C_OBJECT, 0, 0, 8, NULL, 0, ref_fields, 1},
        {C_WEAKREF, C_REF, 0, 0, 8, NULL, 0, NULL, 0},
        {C_KWR, C_WEAKREF, 0, 0, 40, kwr_static, 1, kwr_fields, 4},
        {C_STRING, C_OBJECT, 0, 0, 9, NULL, 0, str_fields, 2},
        {C_HOLDER, C_OBJECT, 0, 0, 0, holder_static, 1, NULL, 0},
        {C_SCREEN, C_OBJECT, 0, 0, 0, NULL, 0, NULL, 0},
    };
    for (size_t i = 0; i < 7; i++) lw__hprof_writer_class_dump(w, &defs[i]);
    /* 2 x 2^28 longs = 2 x 2 GiB of holes */
    lw__hprof_writer_primitive_array(w, 0x2000, 0, 11, NULL, 1u << 28);
    lw__hprof_writer_primitive_array(w, 0x3000, 0, 11, NULL, 1u << 28);
    assert_true(lw__hprof_writer_offset(w) > (4ull << 30));
    /* the leak, beyond 4 GiB */
    lw__hprof_writer_instance(w, 0x10000000100ull, 0, C_SCREEN, NULL, 0);
    java_string(w, 0x10000000200ull, 0x10000000210ull, "big-key");
    java_string(w, 0x10000000300ull, 0x10000000310ull, "Screen closed");
    uint8_t kwr[40];
    lw__put_be64(kwr, 0x10000000200ull);       /* key */
    lw__put_be64(kwr + 8, 0x10000000300ull);   /* description */
    lw__put_be64(kwr + 16, 1000);                   /* watchUptimeMillis */
    lw__put_be64(kwr + 24, 4000);                   /* retainedUptimeMillis */
    lw__put_be64(kwr + 32, 0x10000000100ull);  /* Reference.referent */
    lw__hprof_writer_instance(w, 0x10000000400ull, 0, C_KWR, kwr, sizeof kwr);
    lw__hprof_writer_root(w, 0x01 /* JNI global */, 0x10000000400ull, 0, 0);
    lw__hprof_writer_end_heap_dump(w);
    assert_int_equal(lw__hprof_writer_close(w, &err), LW_OK);

    lw_heap *heap = NULL;
    if (lw_heap_open(&heap, path, NULL, &err) != LW_OK) fail_msg("%s", err.message);
    lw_heap_summary s;
    lw_heap_get_summary(heap, &s);
    assert_true(s.file_bytes > (4ull << 30));
    assert_int_equal(s.primitive_arrays, 4);
    assert_int_equal(s.instances, 4);
    lw_leak_report *r = NULL;
    if (lw_heap_analyze(heap, NULL, &r, &err) != LW_OK) fail_msg("%s", err.message);
    assert_int_equal(r->leak_count, 1);
    const lw_trace *t = &r->leaks[0].traces[0];
    assert_string_equal(t->gc_root, "STICKY_CLASS");
    assert_int_equal(t->element_count, 2);
    assert_string_equal(t->elements[0].class_name, "big.Holder");
    assert_string_equal(t->elements[0].ref_name, "leaked");
    assert_string_equal(t->elements[1].class_name, "big.Screen");
    assert_string_equal(t->elements[1].key, "big-key");
    assert_string_equal(t->elements[1].description, "Screen closed");
    assert_int_equal(t->elements[1].retained_ms, 1000);
    assert_int_equal(t->elements[1].watch_ms, 4000);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(large_file_leak)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
