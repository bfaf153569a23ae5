/* test_report_meta.c — lw_report_meta_parse: the fields a server reads from an upload's meta,
 * their JSON types, and the documents it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "leakcore.h"

static lw_status parse(const char *text, lw_report_meta *m, lw_error *err) {
    return lw_report_meta_parse(text, strlen(text), m, err);
}

static void test_reads_every_field(void **state) {
    (void)state;
    const char *text = "{\"report_id\":\"0b6f6c8e-4f4c-4a57-9c1e-5d1f3f0c2a10\",\"app\":\"caf\\u00e9\","
                       "\"app_version\":\"2.3.0 \\\"beta\\\"\",\"build\":230,\"sdk_version\":\"0.1.0\","
                       "\"mode\":\"traces\",\"device\":{\"install_id\":\"dev-\\/1\",\"model\":\"Pixel\"},"
                       "\"retained\":[{\"class\":\"A\"}],\"heap\":{\"used_bytes\":1.5e9}}";
    lw_report_meta m;
    lw_error err = {0};
    assert_int_equal(parse(text, &m, &err), LW_OK);
    assert_string_equal(m.report_id, "0b6f6c8e-4f4c-4a57-9c1e-5d1f3f0c2a10");
    assert_string_equal(m.app, "caf\xc3\xa9");
    assert_string_equal(m.mode, "traces");
    assert_string_equal(m.app_version, "2.3.0 \"beta\"");
    assert_int_equal(m.app_version_len, 12);
    assert_false(m.app_version_bad);
    assert_true(m.has_build);
    assert_false(m.build_bad);
    assert_int_equal(m.build, 230);
    assert_string_equal(m.install_id, "dev-/1");
    assert_int_equal(m.install_id_len, 6);
    lw_report_meta_free(&m);
    lw_report_meta_free(&m); /* twice is harmless */
}

static void test_absent_and_wrong_types(void **state) {
    (void)state;
    lw_report_meta m;
    lw_error err = {0};
    /* Absent: NULL and 0, nothing "bad". */
    assert_int_equal(parse("{}", &m, &err), LW_OK);
    assert_null(m.report_id);
    assert_null(m.app);
    assert_null(m.mode);
    assert_null(m.app_version);
    assert_false(m.app_version_bad);
    assert_false(m.has_build);
    assert_false(m.build_bad);
    assert_null(m.install_id);
    assert_false(m.install_id_bad);
    lw_report_meta_free(&m);
    /* Present with another type: strings read as absent; app_version and build say so. */
    assert_int_equal(parse("{\"report_id\":7,\"app\":null,\"mode\":[\"traces\"],\"app_version\":2.3,"
                           "\"build\":\"230\",\"device\":{\"install_id\":42}}",
                           &m, &err),
                     LW_OK);
    assert_null(m.report_id);
    assert_null(m.app);
    assert_null(m.mode);
    assert_null(m.app_version);
    assert_true(m.app_version_bad);
    assert_false(m.has_build);
    assert_true(m.build_bad);
    assert_null(m.install_id);
    assert_true(m.install_id_bad);
    lw_report_meta_free(&m);
    /* A real is not an integer; a negative integer is one (the server refuses it). */
    assert_int_equal(parse("{\"build\":12.0}", &m, &err), LW_OK);
    assert_true(m.build_bad);
    lw_report_meta_free(&m);
    assert_int_equal(parse("{\"build\":-1,\"device\":\"dev-1\"}", &m, &err), LW_OK);
    assert_true(m.has_build);
    assert_int_equal(m.build, -1);
    assert_null(m.install_id); /* device is not an object */
    assert_true(m.install_id_bad);
    lw_report_meta_free(&m);
    assert_int_equal(parse("{\"device\":[]}", &m, &err), LW_OK);
    assert_true(m.install_id_bad);
    lw_report_meta_free(&m);
    /* null, for the device or its install id, is none: a report that counts no device */
    assert_int_equal(parse("{\"device\":null}", &m, &err), LW_OK);
    assert_false(m.install_id_bad);
    lw_report_meta_free(&m);
    assert_int_equal(parse("{\"device\":{\"install_id\":null}}", &m, &err), LW_OK);
    assert_null(m.install_id);
    assert_false(m.install_id_bad);
    lw_report_meta_free(&m);
    assert_int_equal(parse("{\"device\":{\"model\":\"Pixel\"}}", &m, &err), LW_OK);
    assert_false(m.install_id_bad);
    lw_report_meta_free(&m);
    /* Nested members do not count as the top level's. */
    assert_int_equal(parse("{\"device\":{\"app\":\"x\",\"build\":3}}", &m, &err), LW_OK);
    assert_null(m.app);
    assert_false(m.has_build);
    lw_report_meta_free(&m);
}

static void test_refuses_what_is_not_a_json_object(void **state) {
    (void)state;
    static const struct {
        const char *text;
        const char *message; /* a part of err.message */
    } cases[] = {
        {"{not json", "line 1, column 2"},
        {"{\"app\":\"a\",\n \"mode\":}", "line 2, column 9"},
        {"[1,2]", "not a JSON object"},
        {"\"report\"", "unreadable JSON"},
        {"{\"app\":\"a\",\"app\":\"b\"}", "duplicate"},
        {"{\"app\":\"\\u0000\"}", "unreadable JSON"},
        {"{\"app\":\"\xff\"}", "UTF-8"},
        {"{\"app\":\"a\"} x", "unreadable JSON"},
        {"{\"build\":99999999999999999999}", "unreadable JSON at line 1, column 10: integer out of range"},
        {"", "unreadable JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lw_report_meta m;
        lw_error err = {0};
        assert_int_equal(parse(cases[i].text, &m, &err), LW_ERR_FORMAT);
        if (!strstr(err.message, cases[i].message)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.message, cases[i].message);
        assert_null(m.report_id);
        lw_report_meta_free(&m);
    }
    /* Bytes after a NUL are part of the document, not its end. */
    lw_report_meta m;
    lw_error err = {0};
    assert_int_equal(lw_report_meta_parse("{}\0{}", 5, &m, &err), LW_ERR_FORMAT);
    lw_report_meta_free(&m);
    assert_int_equal(lw_report_meta_parse(NULL, 0, &m, &err), LW_ERR_USAGE);
    lw_report_meta_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_every_field),
        cmocka_unit_test(test_absent_and_wrong_types),
        cmocka_unit_test(test_refuses_what_is_not_a_json_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
