/* test_heap_index.c — pass 1: id -> object lookups (dense, sparse, unsorted, duplicate ids),
 * classes by id and name with fields, statics and hierarchy, well-known classes, names in
 * Java source form, the class histogram. */
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
#include "heap_index.h"
#include "heap_objects.h"
#include "hprof_format.h"

/* Creates `n` instances with ids from `first` stepping `step`; checks every lookup. */
static void lookups(unsigned ids, uint64_t first, uint64_t step, int n, int reverse) {
    hb *b = hb_new(HB_JVM, ids);
    hb_class(b, "Thing", NULL, "v:I", NULL);
    hb_set_next_object_id(b, first, step);
    uint64_t *all = malloc((size_t)n * sizeof *all);
    for (int i = 0; i < n; i++) {
        all[i] = hb_instance(b, "Thing");
        hb_set(b, all[i], "v", (uint64_t)i);
    }
    hb_set_reverse_objects(b, reverse);
    lw_heap *heap = hb_open(b);
    assert_int_equal(heap->object_count, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        uint32_t d = lw__heap_lookup(heap, all[i]);
        assert_int_not_equal(d, LW_NONE);
        lw__object o;
        lw__heap_object(heap, d, &o);
        assert_int_equal(o.id, all[i]);
        uint8_t t;
        uint64_t v;
        assert_true(lw__instance_field(heap, &o, NULL, "v", &t, &v));
        assert_int_equal(t, LW_T_INT);
        assert_int_equal(v, (uint64_t)i);
        /* ids between and around objects are not objects */
        if (step > 1) assert_int_equal(lw__heap_lookup(heap, all[i] + 1), LW_NONE);
    }
    assert_int_equal(lw__heap_lookup(heap, 0), LW_NONE);
    assert_int_equal(lw__heap_lookup(heap, first - 1), LW_NONE);
    uint64_t maxid = ids == 4 ? 0xFFFFFFFFull : UINT64_MAX;
    if (all[n - 1] != maxid) assert_int_equal(lw__heap_lookup(heap, maxid), LW_NONE);
    lw_heap_free(heap);
    free(all);
    hb_free(b);
}

static void test_lookup_finds_every_object_dense_ids(void **state) {
    (void)state;
    lookups(4, 0x12c00000, 8, 5000, 0);
    lookups(8, 0x700000000000ull, 16, 5000, 0);
}

static void test_lookup_with_unsorted_ids(void **state) {
    (void)state;
    lookups(4, 0x1000, 24, 3000, 1);
    lookups(8, 0x1000, 40, 3000, 1);
}

static void test_lookup_with_sparse_and_huge_ids(void **state) {
    (void)state;
    lookups(8, 0x10, 0x0FFFFFFFFFFFFFF0ull, 15, 0); /* span near 2^64 with 15 objects */
    lookups(8, 0x1000, 0x100000001ull, 50, 1);
    lookups(4, 0x10, 0x0FFFFFF0u, 15, 0);
    lookups(4, 1, 1, 1, 0); /* a single object */
}

static void test_duplicate_object_ids_first_in_file_wins(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    hb_class(b, "Thing", NULL, "v:I", NULL);
    hb_set_next_object_id(b, 0x5000, 0);
    uint64_t a = hb_instance(b, "Thing");
    hb_set(b, a, "v", 1);
    hb_set_next_object_id(b, 0x5000, 16); /* the builder sets values on the first one only */
    uint64_t dup = hb_instance(b, "Thing");
    uint64_t next = hb_instance(b, "Thing");
    assert_int_equal(dup, a);
    lw_heap *heap = hb_open(b);
    assert_int_equal(heap->summary.instances, 3);
    uint32_t d = lw__heap_lookup(heap, a);
    assert_int_not_equal(d, LW_NONE);
    lw__object o;
    lw__heap_object(heap, d, &o);
    uint64_t v;
    assert_true(lw__instance_field(heap, &o, NULL, "v", NULL, &v));
    assert_int_equal(v, 1);
    assert_int_not_equal(lw__heap_lookup(heap, next), LW_NONE);
    lw_heap_free(heap);
    hb_free(b);
}

static void test_classes_fields_statics_and_hierarchy(void **state) {
    (void)state;
    for (unsigned ids = 4; ids <= 8; ids += 4) {
        hb *b = hb_new(HB_ANDROID, ids);
        hb_class(b, "com.example.Base", NULL, "a:I ref:O", "COUNT:I");
        uint64_t sub = hb_class(b, "com.example.Sub", "com.example.Base", "b:J ref:O flag:Z", "INSTANCE:O PI:D");
        hb_class(b, "com.example.MyThread", "java.lang.Thread", NULL, NULL);
        uint64_t vcls = hb_class(b, "android.os.Build$VERSION", NULL, NULL, "SDK_INT:I");
        hb_set_static(b, vcls, "SDK_INT", 33);
        uint64_t s = hb_instance(b, "com.example.Sub");
        hb_set(b, s, "a", 7);
        hb_set(b, s, "b", 0x1122334455667788ull);
        hb_set(b, s, "flag", 1);
        hb_set(b, s, "ref", 0x99); /* the nearest declaration: Sub.ref */
        hb_set_static(b, sub, "INSTANCE", s);
        hb_set_static(b, sub, "PI", 0x400921FB54442D18ull);
        hb_prim_array(b, LW_T_INT, NULL, 4);
        hb_object_array(b, "[[I", NULL, 2);
        lw_heap *heap = hb_open(b);
        assert_int_equal(heap->android, 1);
        assert_int_equal(heap->sdk_int, 33);
        uint32_t ci = lw__heap_class_by_name(heap, "com.example.Sub");
        uint32_t bi = lw__heap_class_by_name(heap, "com.example.Base");
        assert_int_not_equal(ci, LW_NONE);
        assert_int_equal(lw__heap_class_by_id(heap, sub), ci);
        assert_int_equal(heap->classes[ci].super_index, bi);
        assert_true(lw__class_is_a(heap, ci, bi));
        assert_false(lw__class_is_a(heap, bi, ci));
        assert_true(lw__class_is_a(heap, ci, heap->cls_object));
        assert_int_equal(heap->classes[ci].depth, 2);
        assert_int_equal(heap->classes[ci].data_bytes, 8 + ids + 1 + 4 + ids);
        assert_int_equal(lw__heap_class_by_name(heap, "no.such.Class"), LW_NONE);
        assert_int_equal(lw__heap_class_by_id(heap, 0xdead0), LW_NONE);
        /* flags of well-known classes */
        assert_true(heap->classes[lw__heap_class_by_name(heap, "com.example.MyThread")].flags & LW_CLASS_THREAD);
        assert_true(heap->classes[heap->cls_string].flags & LW_CLASS_STRING);
        assert_int_not_equal(heap->cls_reference, LW_NONE);
        /* fields by name, nearest declaring class first, or a named declaring class */
        lw__object o;
        lw__heap_object(heap, lw__heap_lookup(heap, s), &o);
        assert_string_equal(lw__object_class_name(heap, &o), "com.example.Sub");
        assert_int_equal(lw__object_kind(&o), LW_OBJECT_INSTANCE);
        uint8_t t;
        uint64_t v;
        assert_true(lw__instance_field(heap, &o, NULL, "b", &t, &v));
        assert_int_equal(t, LW_T_LONG);
        assert_int_equal(v, 0x1122334455667788ull);
        assert_true(lw__instance_field(heap, &o, NULL, "a", &t, &v));
        assert_int_equal(v, 7);
        assert_true(lw__instance_field(heap, &o, NULL, "flag", &t, &v));
        assert_int_equal(t, LW_T_BOOLEAN);
        assert_int_equal(v, 1);
        assert_true(lw__instance_field(heap, &o, NULL, "ref", &t, &v));
        assert_int_equal(v, 0x99);
        assert_true(lw__instance_field(heap, &o, "com.example.Base", "ref", &t, &v));
        assert_int_equal(v, 0);
        assert_false(lw__instance_field(heap, &o, NULL, "nope", &t, &v));
        /* statics */
        assert_true(lw__class_static(heap, ci, "INSTANCE", &t, &v));
        assert_int_equal(t, LW_T_OBJECT);
        assert_int_equal(v, s);
        assert_true(lw__class_static(heap, ci, "PI", &t, &v));
        assert_int_equal(v, 0x400921FB54442D18ull);
        assert_false(lw__class_static(heap, ci, "COUNT", &t, &v)); /* declared on Base */
        assert_true(lw__class_static(heap, bi, "COUNT", &t, &v));
        /* class objects are dense indexes after the instances */
        uint32_t cd = lw__heap_lookup(heap, sub);
        assert_int_equal(cd, heap->object_count + ci);
        lw__heap_object(heap, cd, &o);
        assert_int_equal(lw__object_kind(&o), LW_OBJECT_CLASS);
        assert_string_equal(lw__object_class_name(heap, &o), "com.example.Sub");
        lw_heap_free(heap);
        hb_free(b);
    }
}

static void test_array_class_names_in_java_source_form(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    uint64_t ia = hb_prim_array(b, LW_T_INT, NULL, 4);
    uint64_t ba = hb_prim_array(b, LW_T_BYTE, NULL, 4);
    uint64_t oa = hb_object_array(b, HB_OBJECT_ARRAY, NULL, 2);
    uint64_t iaa = hb_object_array(b, "[[I", NULL, 2);
    uint64_t sa = hb_object_array(b, "[Ljava/lang/String;", NULL, 2);
    lw_heap *heap = hb_open(b);
    const struct {
        uint64_t id;
        const char *name;
    } cases[] = {{ia, "int[]"}, {ba, "byte[]"}, {oa, "java.lang.Object[]"}, {iaa, "int[][]"}, {sa, "java.lang.String[]"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lw__object o;
        lw__heap_object(heap, lw__heap_lookup(heap, cases[i].id), &o);
        assert_string_equal(lw__object_class_name(heap, &o), cases[i].name);
        assert_int_equal(lw__object_kind(&o), LW_OBJECT_ARRAY);
    }
    assert_int_not_equal(lw__heap_class_by_name(heap, "java.lang.Object[]"), LW_NONE);
    assert_int_equal(lw__heap_class_by_name(heap, "[Ljava/lang/Object;"), LW_NONE);
    lw_heap_free(heap);
    hb_free(b);
}

static void test_strings_and_java_string_contents(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 4);
    uint64_t sid = hb_string_id(b, "some record text");
    uint64_t js = hb_jstring(b, "caf\xe9"); /* Latin-1 é */
    /* a UTF-16 (coder 1) String: little-endian chars */
    static const uint8_t utf16[] = {'h', 0, 0xAC, 0x20};
    uint64_t val = hb_prim_array(b, LW_T_BYTE, utf16, 4);
    uint64_t u = hb_instance(b, "java.lang.String");
    hb_set(b, u, "value", val);
    hb_set(b, u, "coder", 1);
    lw_heap *heap = hb_open(b);
    uint32_t len;
    const char *s = lw__heap_string(heap, sid, &len);
    assert_non_null(s);
    assert_int_equal(len, 16);
    assert_memory_equal(s, "some record text", 16);
    assert_null(lw__heap_string(heap, 0x7777777, &len));
    char *t = lw__read_java_string(heap, js, 100);
    assert_string_equal(t, "caf\xc3\xa9");
    lw__free(t);
    t = lw__read_java_string(heap, u, 100);
    assert_string_equal(t, "h\xe2\x82\xac"); /* h€ */
    lw__free(t);
    assert_null(lw__read_java_string(heap, val, 100)); /* not a String */
    assert_null(lw__read_java_string(heap, 0, 100));
    lw_heap_free(heap);
    hb_free(b);
}

static void test_class_histogram_counts_and_orders(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    hb_class(b, "Many", NULL, "x:J", NULL);
    hb_class(b, "Few", NULL, "x:J y:J z:J w:J", NULL);
    for (int i = 0; i < 10; i++) hb_instance(b, "Many");
    for (int i = 0; i < 3; i++) hb_instance(b, "Few");
    hb_prim_array(b, LW_T_INT, NULL, 1000);
    lw_heap *heap = hb_open(b);
    lw_class_stat st[16];
    size_t n = lw_heap_class_histogram(heap, 0, st, 16, NULL);
    assert_int_equal(n, 3);
    assert_string_equal(st[0].class_name, "Many");
    assert_int_equal(st[0].instances, 10);
    assert_string_equal(st[1].class_name, "Few");
    assert_string_equal(st[2].class_name, "int[]");
    assert_int_equal(st[2].shallow_bytes, 4000);
    n = lw_heap_class_histogram(heap, 1, st, 2, NULL);
    assert_int_equal(n, 2);
    assert_string_equal(st[0].class_name, "int[]");
    assert_string_equal(st[1].class_name, "Many"); /* 10 x 24 bytes > 3 x 48 */
    assert_true(st[0].shallow_bytes >= st[1].shallow_bytes);
    lw_heap_free(heap);
    hb_free(b);
}

static void test_super_class_cycle_in_corrupt_input_is_cut(void **state) {
    (void)state;
    /* Two classes naming each other as super class (hand-made CLASS_DUMPs). */
    hb *b = hb_new(HB_JVM, 8);
    for (int k = 0; k < 2; k++) {
        uint8_t r[128];
        size_t n = 0;
        r[n++] = LW_SUB_CLASS_DUMP;
        lw__put_be64(r + n, 0xA00 + 0x10 * (uint64_t)k); n += 8;
        lw__put_be32(r + n, 0); n += 4;
        lw__put_be64(r + n, 0xA00 + 0x10 * (uint64_t)(1 - k)); n += 8; /* super */
        memset(r + n, 0, 40); n += 40;
        lw__put_be32(r + n, 16); n += 4;
        memset(r + n, 0, 6); n += 6; /* constant pool, statics, fields: none */
        hb_subrecord_raw(b, r, n);
    }
    lw_heap *heap = hb_open(b);
    uint32_t a = lw__heap_class_by_id(heap, 0xA00);
    assert_int_not_equal(a, LW_NONE);
    assert_false(lw__class_is_a(heap, a, heap->cls_object));
    lw_leak_report *r = hb_analyze(heap, NULL);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    hb_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_finds_every_object_dense_ids),
        cmocka_unit_test(test_lookup_with_unsorted_ids),
        cmocka_unit_test(test_lookup_with_sparse_and_huge_ids),
        cmocka_unit_test(test_duplicate_object_ids_first_in_file_wins),
        cmocka_unit_test(test_classes_fields_statics_and_hierarchy),
        cmocka_unit_test(test_array_class_names_in_java_source_form),
        cmocka_unit_test(test_strings_and_java_string_contents),
        cmocka_unit_test(test_class_histogram_counts_and_orders),
        cmocka_unit_test(test_super_class_cycle_in_corrupt_input_is_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
