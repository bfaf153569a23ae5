/* test_real_dumps.c — the analyzer on real heap dumps: HotSpot dumps the Java scenarios in
 * tests/java make during the test run, and the Android fixture from ../shared/fixtures.
 * Each expected file (tests/java/expected/<scenario>.json) states the exact traces; a
 * trimmed copy of every dump (plain and .zst) must analyze to the same traces.
 *
 * usage: test_real_dumps DUMP_DIR EXPECTED_DIR FIXTURES_DIR SCENARIO... */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "leakcore.h"

static const char *dump_dir, *expected_dir, *fixtures_dir;

static json_t *analyze_json(const char *path, const char *key) {
    lw_heap *heap = NULL;
    lw_error err = {0};
    lw_status st = lw_heap_open(&heap, path, NULL, &err);
    if (st != LW_OK) fail_msg("%s: %s", path, err.message);
    lw_analysis_options o = {sizeof o, key, 0, NULL, NULL};
    lw_leak_report *r = NULL;
    st = lw_heap_analyze(heap, &o, &r, &err);
    if (st != LW_OK) fail_msg("%s: analyze: %s", path, err.message);
    char *s = lw_leak_report_to_json(r, 0);
    assert_non_null(s);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    assert_non_null(j);
    free(s);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    return j;
}

static const char *str(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Compares an expected trace (gc_root + elements, only the fields it states) with a real one. */
static void check_trace(const char *what, json_t *exp, json_t *act) {
    const char *er = str(exp, "gc_root");
    if (er) assert_string_equal(er, str(act, "gc_root"));
    json_t *ee = json_object_get(exp, "elements"), *ae = json_object_get(act, "elements");
    if (json_array_size(ee) != json_array_size(ae))
        fail_msg("%s: expected %zu elements, got %zu", what, json_array_size(ee), json_array_size(ae));
    for (size_t i = 0; i < json_array_size(ee); i++) {
        json_t *x = json_array_get(ee, i), *y = json_array_get(ae, i);
        const char *keys[] = {"class", "object_kind", "leaking"};
        for (size_t k = 0; k < 3; k++) {
            const char *v = str(x, keys[k]);
            if (v && (!str(y, keys[k]) || strcmp(v, str(y, keys[k])) != 0))
                fail_msg("%s: element %zu: %s is \"%s\", expected \"%s\"", what, i, keys[k], str(y, keys[k]), v);
        }
        json_t *xr = json_object_get(x, "reference"), *yr = json_object_get(y, "reference");
        if (!xr) {
            if (yr) fail_msg("%s: element %zu has an unexpected reference", what, i);
            continue;
        }
        if (!yr) fail_msg("%s: element %zu has no reference", what, i);
        assert_string_equal(str(xr, "kind"), str(yr, "kind"));
        if (str(xr, "name")) assert_string_equal(str(xr, "name"), str(yr, "name"));
        if (json_object_get(xr, "index"))
            assert_int_equal(json_integer_value(json_object_get(xr, "index")), json_integer_value(json_object_get(yr, "index")));
        if (json_object_get(xr, "suspect"))
            assert_int_equal(json_is_true(json_object_get(xr, "suspect")), json_is_true(json_object_get(yr, "suspect")));
    }
}

static json_t *trace_with_key(json_t *leak, const char *key) {
    json_t *traces = json_object_get(leak, "traces");
    for (size_t i = 0; i < json_array_size(traces); i++) {
        json_t *t = json_array_get(traces, i);
        json_t *els = json_object_get(t, "elements");
        json_t *last = json_array_get(els, json_array_size(els) - 1);
        if (str(last, "key") && strcmp(str(last, "key"), key) == 0) return t;
    }
    return NULL;
}

static void compare_expected(json_t *expected, json_t *actual, const char *scenario) {
    json_t *el = json_object_get(expected, "leaks"), *al = json_object_get(actual, "leaks");
    if (json_array_size(el) != json_array_size(al)) {
        char *s = json_dumps(actual, JSON_INDENT(1));
        fail_msg("%s: expected %zu leaks, got %zu:\n%s", scenario, json_array_size(el), json_array_size(al), s);
    }
    for (size_t i = 0; i < json_array_size(el); i++) {
        json_t *e = json_array_get(el, i);
        const char *sig = str(e, "signature");
        json_t *a = NULL;
        for (size_t j = 0; j < json_array_size(al); j++)
            if (strcmp(str(json_array_get(al, j), "signature"), sig) == 0) a = json_array_get(al, j);
        if (!a) {
            char *s = json_dumps(actual, JSON_INDENT(1));
            fail_msg("%s: no leak with signature %s in:\n%s", scenario, sig, s);
        }
        assert_int_equal(json_integer_value(json_object_get(e, "count")), json_integer_value(json_object_get(a, "count")));
        assert_string_equal(str(e, "kind"), str(a, "kind"));
        json_t *et = json_object_get(e, "traces");
        if (et) {
            for (size_t k = 0; k < json_array_size(et); k++) {
                json_t *x = json_array_get(et, k);
                const char *key = str(x, "key");
                json_t *t = trace_with_key(a, key);
                if (!t) fail_msg("%s: no trace for key %s", scenario, key);
                check_trace(scenario, x, t);
            }
        } else {
            json_t *t = trace_with_key(a, str(e, "key"));
            if (!t) fail_msg("%s: no trace for key %s", scenario, str(e, "key"));
            check_trace(scenario, e, t);
            if (str(e, "description")) {
                json_t *els = json_object_get(t, "elements");
                assert_string_equal(str(e, "description"), str(json_array_get(els, json_array_size(els) - 1), "description"));
            }
        }
    }
    /* Watched objects that were reclaimed or are not yet retained never show up. */
    json_t *nk = json_object_get(expected, "not_leaking_keys");
    char *all = json_dumps(actual, 0);
    for (size_t i = 0; i < json_array_size(nk); i++)
        if (strstr(all, json_string_value(json_array_get(nk, i)))) fail_msg("%s: %s must not be reported", scenario, json_string_value(json_array_get(nk, i)));
    free(all);
}

/* The leaks without timing: what must be identical between a dump and its trimmed copy. */
static char *leaks_only(json_t *report) {
    return json_dumps(json_object_get(report, "leaks"), JSON_COMPACT | JSON_SORT_KEYS);
}

static void check_strip_same(const char *path) {
    json_t *orig = analyze_json(path, NULL);
    char *want = leaks_only(orig);
    const char *suffixes[] = {".stripped.hprof", ".stripped.hprof.zst"};
    for (size_t i = 0; i < 2; i++) {
        char out[4096];
        snprintf(out, sizeof out, "%s%s", path, suffixes[i]);
        lw_trim_stats st;
        lw_error err = {0};
        if (lw_trim_file(path, out, NULL, &st, &err) != LW_OK) fail_msg("strip %s: %s", path, err.message);
        struct stat in_sb, out_sb;
        assert_int_equal(stat(path, &in_sb), 0);
        assert_int_equal(stat(out, &out_sb), 0);
        if (i == 0) assert_int_equal(in_sb.st_size, out_sb.st_size); /* same layout */
        else assert_true(out_sb.st_size < in_sb.st_size / 2);       /* zeros compress away */
        assert_true(st.primitive_arrays_kept < st.primitive_arrays);
        assert_true(st.bytes_zeroed > 0);
        json_t *trimmed = analyze_json(out, NULL);
        char *got = leaks_only(trimmed);
        if (strcmp(want, got) != 0) fail_msg("%s: trimmed copy analyzes differently:\n%s\nvs\n%s", out, want, got);
        free(got);
        json_decref(trimmed);
        unlink(out);
    }
    free(want);
    json_decref(orig);
}

static void jvm_scenario(void **state) {
    const char *scenario = *state;
    char dump[4096], exp_path[4096];
    snprintf(dump, sizeof dump, "%s/%s.hprof", dump_dir, scenario);
    snprintf(exp_path, sizeof exp_path, "%s/%s.json", expected_dir, scenario);
    json_error_t je;
    json_t *expected = json_load_file(exp_path, 0, &je);
    if (!expected) fail_msg("%s: %s", exp_path, je.text);
    json_t *actual = analyze_json(dump, NULL);
    compare_expected(expected, actual, scenario);
    json_decref(actual);
    json_decref(expected);
}

static void jvm_scenario_stripped(void **state) {
    char dump[4096];
    snprintf(dump, sizeof dump, "%s/%s.hprof", dump_dir, (const char *)*state);
    check_strip_same(dump);
}

static const char *android_fixture(void) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/android/leak_service_binder_ignored.hprof", fixtures_dir);
    if (access(path, R_OK) != 0) {
        print_message("SKIP: %s is absent (../shared/fixtures not beside the repository)\n", path);
        return NULL;
    }
    return path;
}

/* What the fixture's README says Shark 2.0 reports. */
static void android_leak_service_binder(void **state) {
    (void)state;
    const char *path = android_fixture();
    if (!path) skip();
    json_t *r = analyze_json(path, NULL);
    json_t *leaks = json_object_get(r, "leaks");
    assert_int_equal(json_array_size(leaks), 1);
    json_t *leak = json_array_get(leaks, 0);
    assert_string_equal(str(leak, "kind"), "application");
    assert_int_equal(json_integer_value(json_object_get(leak, "count")), 1);
    json_t *t = json_array_get(json_object_get(leak, "traces"), 0);
    assert_string_equal(str(t, "gc_root"), "JNI_GLOBAL");
    json_t *els = json_object_get(t, "elements");
    assert_int_equal(json_array_size(els), 2);
    json_t *binder = json_array_get(els, 0), *service = json_array_get(els, 1);
    assert_string_equal(str(binder, "class"), "com.example.leakcanary.LeakyService$MyBinder");
    assert_string_equal(str(binder, "object_kind"), "instance");
    json_t *ref = json_object_get(binder, "reference");
    assert_string_equal(str(ref, "kind"), "instance_field");
    assert_string_equal(str(ref, "name"), "service");
    assert_true(json_is_true(json_object_get(ref, "suspect")));
    assert_string_equal(str(service, "class"), "com.example.leakcanary.LeakyService");
    assert_string_equal(str(service, "leaking"), "YES");
    assert_string_equal(str(service, "key"), "6e524414-9581-4ce7-8690-e8ddf8b82454");
    /* signature = SHA-1("com.example.leakcanary.LeakyService$MyBinder" + "service") */
    char sig[41];
    const char *s = "com.example.leakcanary.LeakyService$MyBinderservice";
    lw_sha1_hex(s, strlen(s), sig);
    assert_string_equal(str(leak, "signature"), sig);
    assert_string_equal(str(leak, "short_description"), "LeakyService$MyBinder.service");
    json_decref(r);
    /* --key selects the same leak; an unknown key is an error */
    r = analyze_json(path, "6e524414-9581-4ce7-8690-e8ddf8b82454");
    assert_int_equal(json_array_size(json_object_get(r, "leaks")), 1);
    json_decref(r);
    lw_heap *heap = NULL;
    lw_error err = {0};
    assert_int_equal(lw_heap_open(&heap, path, NULL, &err), LW_OK);
    lw_analysis_options o = {sizeof o, "00000000-0000-0000-0000-000000000000", 0, NULL, NULL};
    lw_leak_report *rep = NULL;
    assert_int_equal(lw_heap_analyze(heap, &o, &rep, &err), LW_ERR_NOT_FOUND);
    lw_heap_free(heap);
}

static void android_summary(void **state) {
    (void)state;
    const char *path = android_fixture();
    if (!path) skip();
    lw_heap *heap = NULL;
    lw_error err = {0};
    assert_int_equal(lw_heap_open(&heap, path, NULL, &err), LW_OK);
    lw_heap_summary s;
    lw_heap_get_summary(heap, &s);
    assert_string_equal(s.hprof_version, "JAVA PROFILE 1.0.3");
    assert_int_equal(s.id_size, 4);
    assert_int_equal(s.file_bytes, 3694845);
    assert_true(s.heap_dump_segments > 1);
    assert_true(s.instances > 10000);
    lw_heap_free(heap);
}

static void android_stripped(void **state) {
    (void)state;
    const char *path = android_fixture();
    if (!path) skip();
    /* The fixture folder is read-only: trim a copy in the dump dir. */
    char copy[4096];
    snprintf(copy, sizeof copy, "%s/android-fixture-copy.hprof", dump_dir);
    FILE *in = fopen(path, "rb"), *out = fopen(copy, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    check_strip_same(copy);
    unlink(copy);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s DUMP_DIR EXPECTED_DIR FIXTURES_DIR SCENARIO...\n", argv[0]);
        return 2;
    }
    dump_dir = argv[1];
    expected_dir = argv[2];
    fixtures_dir = argv[3];
    size_t ns = (size_t)(argc - 4);
    struct CMUnitTest *tests = calloc(2 * ns + 3, sizeof *tests);
    char **names = calloc(2 * ns, sizeof *names);
    size_t k = 0;
    for (size_t i = 0; i < ns; i++) {
        names[2 * i] = malloc(128);
        names[2 * i + 1] = malloc(128);
        snprintf(names[2 * i], 128, "jvm_%s", argv[4 + i]);
        snprintf(names[2 * i + 1], 128, "jvm_%s_stripped", argv[4 + i]);
        tests[k++] = (struct CMUnitTest){names[2 * i], jvm_scenario, NULL, NULL, argv[4 + i]};
        tests[k++] = (struct CMUnitTest){names[2 * i + 1], jvm_scenario_stripped, NULL, NULL, argv[4 + i]};
    }
    tests[k++] = (struct CMUnitTest){"android_leak_service_binder", android_leak_service_binder, NULL, NULL, NULL};
    tests[k++] = (struct CMUnitTest){"android_summary", android_summary, NULL, NULL, NULL};
    tests[k++] = (struct CMUnitTest){"android_stripped", android_stripped, NULL, NULL, NULL};
    int rc = _cmocka_run_group_tests("real_dumps", tests, k, NULL, NULL);
    for (size_t i = 0; i < 2 * ns; i++) free(names[i]);
    free(names);
    free(tests);
    return rc;
}
