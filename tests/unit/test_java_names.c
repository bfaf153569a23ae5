/* test_java_names.c — class names in Java source form, and simple names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "java_names.h"

static void check(const char *raw, const char *expect) {
    char out[256];
    size_t n = lw__java_source_name(raw, strlen(raw), out, sizeof out);
    assert_string_equal(out, expect);
    assert_int_equal(n, strlen(expect));
}

static void test_source_form_of_class_and_array_names(void **state) {
    (void)state;
    check("java/lang/String", "java.lang.String");
    check("java.lang.String", "java.lang.String");
    check("com/example/Outer$Inner", "com.example.Outer$Inner");
    check("[Ljava/lang/Object;", "java.lang.Object[]");
    check("[[Ljava/lang/String;", "java.lang.String[][]");
    check("[Lcom.example.Item;", "com.example.Item[]");
    check("java.lang.Object[]", "java.lang.Object[]"); /* Android already writes source form */
    check("[I", "int[]");
    check("[[I", "int[][]");
    check("[Z", "boolean[]");
    check("[C", "char[]");
    check("[F", "float[]");
    check("[D", "double[]");
    check("[B", "byte[]");
    check("[S", "short[]");
    check("[J", "long[]");
    check("I", "I"); /* not an array: a class named I */
    check("", "");
}

static void test_malformed_names_do_not_overrun(void **state) {
    (void)state;
    check("[", "[]");
    check("[[", "[][]");
    check("[Lfoo", "Lfoo[]");
    check("[L;", "[]");
    check("[X", "X[]");
}

static void test_small_buffers_truncate_and_report_the_full_length(void **state) {
    (void)state;
    char out[8];
    memset(out, 'x', sizeof out);
    size_t n = lw__java_source_name("[Ljava/lang/Object;", 19, out, sizeof out);
    assert_int_equal(n, strlen("java.lang.Object[]"));
    assert_string_equal(out, "java.la");
    n = lw__java_source_name("[[I", 3, out, 1);
    assert_int_equal(n, strlen("int[][]"));
    assert_int_equal(out[0], 0);
    n = lw__java_source_name("[[I", 3, NULL, 0);
    assert_int_equal(n, strlen("int[][]"));
}

static void test_simple_names(void **state) {
    (void)state;
    assert_string_equal(lw__java_simple_name("java.lang.String"), "String");
    assert_string_equal(lw__java_simple_name("com.example.Outer$Inner"), "Outer$Inner");
    assert_string_equal(lw__java_simple_name("java.lang.Object[]"), "Object[]");
    assert_string_equal(lw__java_simple_name("GcRoot"), "GcRoot");
    assert_string_equal(lw__java_simple_name("int[]"), "int[]");
    assert_string_equal(lw__java_simple_name(""), "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_source_form_of_class_and_array_names),
        cmocka_unit_test(test_malformed_names_do_not_overrun),
        cmocka_unit_test(test_small_buffers_truncate_and_report_the_full_length),
        cmocka_unit_test(test_simple_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
