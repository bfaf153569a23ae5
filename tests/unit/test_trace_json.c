/* test_trace_json.c — the trace JSON (format 1): encode/decode round trip, and the decoder
 * refusing malformed, mistyped, incomplete or oversized untrusted input. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common.h"
#include "json_reader.h"
#include "json_writer.h"
#include "heap_builder.h"
#include "hprof_format.h"

static const char *base_doc =
    "{\"format\":1,\"analyzer\":{\"name\":\"leakwatch\",\"version\":\"0.1.0\"},"
    "\"heap\":{\"hprof_version\":\"JAVA PROFILE 1.0.2\",\"id_size\":8,\"objects\":100,\"bytes\":4096},"
    "\"duration_ms\":{\"index\":3,\"paths\":4},"
    "\"leaks\":["
    "{\"signature\":\"ce9dee03a1feb859fd3b3a09ff51e3ddfd8efbc6\",\"kind\":\"application\","
    "\"short_description\":\"LeakingSingleton.leakedViews\",\"library_pattern\":null,\"count\":2,\"traces\":["
    "{\"gc_root\":\"STICKY_CLASS\",\"elements\":["
    "{\"class\":\"com.example.leakcanary.LeakingSingleton\",\"object_kind\":\"class\",\"leaking\":\"NO\","
    "\"reason\":\"a class is never leaking\",\"reference\":{\"kind\":\"static_field\",\"name\":\"leakedViews\",\"suspect\":true}},"
    "{\"class\":\"java.lang.Object[]\",\"object_kind\":\"array\",\"leaking\":\"UNKNOWN\",\"reason\":\"\","
    "\"reference\":{\"kind\":\"array_element\",\"index\":2,\"suspect\":true}},"
    "{\"class\":\"android.view.View\",\"object_kind\":\"instance\",\"leaking\":\"YES\",\"reason\":\"ObjectWatcher was watching this\","
    "\"labels\":[\"key = k1\"],\"key\":\"k1\",\"description\":\"View detached\",\"watch_ms\":10,\"retained_ms\":5,"
    "\"retained_bytes\":48213,\"retained_objects\":311}]},"
    "{\"gc_root\":\"THREAD_OBJECT\",\"elements\":["
    "{\"class\":\"java.lang.Thread\",\"object_kind\":\"instance\",\"leaking\":\"UNKNOWN\",\"reason\":\"\","
    "\"reference\":{\"kind\":\"local\",\"name\":\"worker\",\"suspect\":true}},"
    "{\"class\":\"android.view.View\",\"object_kind\":\"instance\",\"leaking\":\"YES\",\"reason\":\"r\"}]}]},"
    "{\"signature\":\"7573873eb76c9b7e8963efe04194842e7e15c8b9\",\"kind\":\"library\","
    "\"short_description\":\"instance field android.app.Activity$1#this$0\","
    "\"library_pattern\":\"instance field android.app.Activity$1#this$0\",\"library_description\":\"Android Q bug\","
    "\"count\":1,\"traces\":[{\"gc_root\":\"JNI_GLOBAL\",\"elements\":["
    "{\"class\":\"android.app.Activity$1\",\"object_kind\":\"instance\",\"leaking\":\"UNKNOWN\",\"reason\":\"\","
    "\"reference\":{\"kind\":\"instance_field\",\"name\":\"this$0\",\"suspect\":true}},"
    "{\"class\":\"com.example.MainActivity\",\"object_kind\":\"instance\",\"leaking\":\"YES\",\"reason\":\"destroyed\"}]}]}"
    "]}";

static lw_status decode(const char *text, const lw_json_limits *lim, lw_leak_report **out, lw_error *err) {
    return lw_leak_report_from_json(text, strlen(text), lim, out, err);
}

static void assert_traces_equal(const lw_trace *a, const lw_trace *b) {
    assert_string_equal(a->gc_root, b->gc_root);
    assert_int_equal(a->element_count, b->element_count);
    for (size_t i = 0; i < a->element_count; i++) {
        const lw_trace_element *x = &a->elements[i], *y = &b->elements[i];
        int last = i + 1 == a->element_count;
        assert_string_equal(x->class_name, y->class_name);
        assert_int_equal(x->object_kind, y->object_kind);
        assert_int_equal(x->leaking, y->leaking);
        assert_string_equal(x->reason ? x->reason : "", y->reason ? y->reason : "");
        assert_int_equal(x->label_count, y->label_count);
        for (size_t k = 0; k < x->label_count; k++) assert_string_equal(x->labels[k], y->labels[k]);
        if (!last) {
            assert_int_equal(x->has_reference, y->has_reference);
            assert_int_equal(x->ref_kind, y->ref_kind);
            assert_int_equal(x->suspect, y->suspect);
            if (x->ref_kind == LW_REF_ARRAY_ELEMENT) assert_int_equal(x->ref_index, y->ref_index);
            else assert_string_equal(x->ref_name, y->ref_name);
        } else {
            assert_int_equal(y->has_reference, 0);
            if (x->key || y->key) assert_string_equal(x->key, y->key);
            if (x->description || y->description) assert_string_equal(x->description, y->description);
            assert_int_equal(x->watch_ms, y->watch_ms);
            assert_int_equal(x->retained_ms, y->retained_ms);
            assert_int_equal(x->retained_bytes, y->retained_bytes);
            assert_int_equal(x->retained_objects, y->retained_objects);
        }
    }
}

static void assert_reports_equal(const lw_leak_report *a, const lw_leak_report *b) {
    assert_int_equal(a->format, b->format);
    assert_string_equal(a->hprof_version, b->hprof_version);
    assert_int_equal(a->id_size, b->id_size);
    assert_int_equal(a->objects, b->objects);
    assert_int_equal(a->bytes, b->bytes);
    assert_int_equal(a->index_ms, b->index_ms);
    assert_int_equal(a->paths_ms, b->paths_ms);
    assert_int_equal(a->leak_count, b->leak_count);
    for (size_t i = 0; i < a->leak_count; i++) {
        const lw_leak *x = &a->leaks[i], *y = &b->leaks[i];
        assert_string_equal(x->signature, y->signature);
        assert_int_equal(x->library, y->library);
        assert_string_equal(x->short_description, y->short_description);
        if (x->library_pattern || y->library_pattern) assert_string_equal(x->library_pattern, y->library_pattern);
        if (x->library_description || y->library_description) assert_string_equal(x->library_description, y->library_description);
        assert_int_equal(x->count, y->count);
        assert_int_equal(x->trace_count, y->trace_count);
        for (size_t j = 0; j < x->trace_count; j++) assert_traces_equal(&x->traces[j], &y->traces[j]);
    }
}

static void test_decode_then_encode_round_trips(void **state) {
    (void)state;
    lw_leak_report *r = NULL;
    lw_error err = {0};
    assert_int_equal(decode(base_doc, NULL, &r, &err), LW_OK);
    assert_int_equal(r->leak_count, 2);
    assert_int_equal(r->leaks[0].trace_count, 2);
    assert_int_equal(r->leaks[0].traces[0].elements[1].ref_index, 2);
    assert_string_equal(r->leaks[0].traces[1].elements[0].ref_name, "worker");
    assert_int_equal(r->leaks[0].traces[1].elements[0].ref_kind, LW_REF_LOCAL);
    assert_int_equal(r->leaks[1].library, 1);
    for (int pretty = 0; pretty <= 1; pretty++) {
        char *json = lw_leak_report_to_json(r, pretty);
        lw_leak_report *again = NULL;
        assert_int_equal(decode(json, NULL, &again, &err), LW_OK);
        assert_reports_equal(r, again);
        char *json2 = lw_leak_report_to_json(again, pretty);
        assert_string_equal(json, json2);
        free(json);
        free(json2);
        lw_leak_report_free(again);
    }
    lw_leak_report_free(r);
}

/* A decoded report's strings live in one block: status propagation replaces pooled reasons
 * (none freed), a caller assigns its own strings (freed with the report), a reason the
 * document left out reads "", and nothing leaks or is freed twice (ASan in CI). */
static void test_decoded_strings_share_one_block(void **state) {
    (void)state;
    lw_leak_report *r = NULL;
    assert_int_equal(decode(base_doc, NULL, &r, NULL), LW_OK);
    assert_non_null(r->lw__pool);
    lw_trace *t = &r->leaks[0].traces[0];
    assert_ptr_equal(t->lw__pool, r->lw__pool);
    const char *cls = t->elements[0].class_name;
    assert_true(cls >= r->lw__pool && cls < r->lw__pool + r->lw__pool_len);
    t->elements[1].leaking = LW_LEAKING_NO;
    t->elements[2].leaking = LW_LEAKING_NO;
    lw_trace_propagate(t);
    assert_string_equal(t->elements[0].reason, "Object[]\xE2\x86\x93 is not leaking and a class is never leaking");
    assert_string_equal(t->elements[2].reason, "This is the leaking object. Conflicts with ObjectWatcher was watching this");
    r->leaks[1].short_description = strdup("replaced by the caller");
    t->elements[0].class_name = strdup("com.example.Replaced");
    lw_leak_report_free(r);

    static const char no_reason[] =
        "{\"format\":1,\"leaks\":[{\"kind\":\"application\",\"count\":1,\"traces\":[{\"gc_root\":\"JNI_GLOBAL\","
        "\"elements\":[{\"class\":\"A\",\"object_kind\":\"instance\",\"leaking\":\"YES\"}]}]}]}";
    assert_int_equal(decode(no_reason, NULL, &r, NULL), LW_OK);
    assert_string_equal(r->leaks[0].traces[0].elements[0].reason, "");
    lw_leak_report_free(r);
}

/* base_doc is written as the encoder writes (member order, literal keys and words): a change
 * of the encoder's output, however small, shows here. */
static void test_compact_encoding_is_byte_exact(void **state) {
    (void)state;
    lw_leak_report *r = NULL;
    assert_int_equal(decode(base_doc, NULL, &r, NULL), LW_OK);
    char *json = lw_leak_report_to_json(r, 0);
    assert_string_equal(json, base_doc);
    free(json);
    lw_leak_report_free(r);
}

static void test_writer_integers_and_literals(void **state) {
    (void)state;
    const int64_t v[] = {0, 1, -1, 9, 10, -10, 1234567890123, INT64_MAX, INT64_MIN};
    for (int pretty = 0; pretty <= 1; pretty++) {
        lw__jw w;
        lw__jw_init(&w, pretty);
        lw__jw_open(&w, '{');
        LW__JW_KEY(&w, "n");
        lw__jw_open(&w, '[');
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) lw__jw_int(&w, v[i]);
        lw__jw_close(&w, ']');
        LW__JW_KEY(&w, "w");
        LW__JW_WORD(&w, "YES");
        lw__jw_key(&w, "k");
        lw__jw_string(&w, "YES");
        lw__jw_close(&w, '}');
        char *text = lw__jw_take(&w);
        assert_non_null(text);
        if (!pretty)
            assert_string_equal(text, "{\"n\":[0,1,-1,9,10,-10,1234567890123,9223372036854775807,-9223372036854775808],"
                                      "\"w\":\"YES\",\"k\":\"YES\"}");
        else
            assert_string_equal(text, "{\n  \"n\": [\n    0,\n    1,\n    -1,\n    9,\n    10,\n    -10,\n"
                                      "    1234567890123,\n    9223372036854775807,\n    -9223372036854775808\n  ],\n"
                                      "  \"w\": \"YES\",\n  \"k\": \"YES\"\n}");
        free(text);
    }
}

static void test_analysis_report_round_trips(void **state) {
    (void)state;
    hb *b = hb_new(HB_ANDROID, 4);
    uint64_t h = hb_class(b, "Holder", NULL, NULL, "items:O");
    hb_class(b, "Item", NULL, "next:O", NULL);
    uint64_t arr = hb_object_array(b, NULL, NULL, 3);
    uint64_t i1 = hb_instance(b, "Item"), i2 = hb_instance(b, "Item");
    hb_set(b, i1, "next", i2);
    hb_array_set(b, arr, 2, i1);
    hb_set_static(b, h, "items", arr);
    hb_watch(b, i2, "key \"quoted\" \\ é", "description\nwith newline", 1);
    lw_heap *heap = hb_open(b);
    lw_analysis_options o = {sizeof o, NULL, 1, NULL, NULL};
    lw_leak_report *r = NULL;
    assert_int_equal(lw_heap_analyze(heap, &o, &r, NULL), LW_OK);
    assert_int_equal(r->leak_count, 1);
    char *json = lw_leak_report_to_json(r, 1);
    lw_leak_report *again = NULL;
    lw_error err = {0};
    assert_int_equal(decode(json, NULL, &again, &err), LW_OK);
    assert_reports_equal(r, again);
    /* The decoded trace validates: its suspect flags agree with its statuses. */
    assert_int_equal(lw_trace_update_suspects(&again->leaks[0].traces[0]), 0);
    char sig[41];
    lw_trace_signature(&again->leaks[0].traces[0], sig);
    assert_string_equal(sig, r->leaks[0].signature);
    /* One trace alone is the bytes the compact report holds for it (leakd stores it as a new
     * group's representative). */
    char *compact = lw_leak_report_to_json(r, 0), *trace = lw_trace_to_json(&r->leaks[0].traces[0]);
    assert_non_null(compact);
    assert_non_null(trace);
    assert_int_equal(trace[0], '{');
    char *at = strstr(compact, "\"traces\":[");
    assert_non_null(at);
    assert_memory_equal(at + strlen("\"traces\":["), trace, strlen(trace));
    assert_null(lw_trace_to_json(NULL));
    free(trace);
    free(compact);
    free(json);
    lw_leak_report_free(again);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    hb_free(b);
}

static void test_encoded_names_match_the_contract(void **state) {
    (void)state;
    lw_leak_report *r = NULL;
    assert_int_equal(decode(base_doc, NULL, &r, NULL), LW_OK);
    char *json = lw_leak_report_to_json(r, 0);
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "format")), 1);
    json_t *leak = json_array_get(json_object_get(root, "leaks"), 0);
    assert_string_equal(json_string_value(json_object_get(leak, "kind")), "application");
    assert_true(json_is_null(json_object_get(leak, "library_pattern")));
    json_t *els = json_object_get(json_array_get(json_object_get(leak, "traces"), 0), "elements");
    json_t *arr = json_array_get(els, 1);
    json_t *ref = json_object_get(arr, "reference");
    assert_string_equal(json_string_value(json_object_get(ref, "kind")), "array_element");
    assert_int_equal(json_integer_value(json_object_get(ref, "index")), 2);
    assert_null(json_object_get(ref, "name"));
    assert_true(json_is_true(json_object_get(ref, "suspect")));
    json_t *last = json_array_get(els, 2);
    assert_null(json_object_get(last, "reference"));
    assert_string_equal(json_string_value(json_object_get(last, "key")), "k1");
    assert_int_equal(json_integer_value(json_object_get(last, "retained_bytes")), 48213);
    json_decref(root);
    free(json);
    lw_leak_report_free(r);
}

/* Names from a heap dump need not be UTF-8: the writer keeps the field, with U+FFFD for each
 * bad byte, and escapes what JSON requires. */
static void test_encoder_repairs_bad_utf8_and_escapes(void **state) {
    (void)state;
    lw_leak_report *r = NULL;
    assert_int_equal(decode(base_doc, NULL, &r, NULL), LW_OK);
    lw_trace_element *e = &r->leaks[0].traces[0].elements[0];
    /* a lone continuation byte, an overlong "/", a surrogate, a cut-off sequence at the end */
    e->class_name = strdup("A\x80" "B\xC0\xAF" "C\xED\xA0\x80" "D\"\\\n\x01" "\xC3\xA9" "\xE2\x82");
    for (int pretty = 0; pretty <= 1; pretty++) {
        char *json = lw_leak_report_to_json(r, pretty);
        assert_non_null(json);
        json_error_t je;
        json_t *root = json_loads(json, 0, &je);
        if (!root) fail_msg("not JSON: %s", je.text);
        const char *cls = json_string_value(json_object_get(
            json_array_get(json_object_get(json_array_get(json_object_get(json_array_get(json_object_get(root, "leaks"), 0),
                                                                                      "traces"),
                                                                      0),
                                           "elements"),
                           0),
            "class"));
        assert_non_null(cls);
        assert_string_equal(cls, "A\xEF\xBF\xBD" "B\xEF\xBF\xBD\xEF\xBF\xBD" "C\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                                 "D\"\\\n\x01" "\xC3\xA9" "\xEF\xBF\xBD\xEF\xBF\xBD");
        assert_non_null(strstr(json, "D\\\"\\\\\\n\\u0001"));
        json_decref(root);
        free(json);
    }
    lw_leak_report_free(r);
}

/* The parser under the decoder (json_reader.c): escapes, surrogate pairs, and what it refuses. */
/* lw__json_plain_end (eight bytes at a time) agrees with a byte-at-a-time scan for every byte
 * value at every offset of a word, past the end of a word and at the end of the input. */
static void test_plain_run_scan_matches_bytewise(void **state) {
    (void)state;
    unsigned char buf[72]; /* stops in the first, second, third and fourth 16 bytes, and in the tail */
    for (int v = 0; v < 256; v++)
        for (size_t at = 0; at < 64; at++)
            for (size_t len = at; len <= at + 9 && len <= sizeof buf; len++) {
                memset(buf, 'a', sizeof buf);
                if (at < sizeof buf) buf[at] = (unsigned char)v;
                const unsigned char *want = buf;
                while (want < buf + len && *want >= 0x20 && *want < 0x80 && *want != '"' && *want != '\\') want++;
                assert_ptr_equal(lw__json_plain_end(buf, buf + len), want);
            }
}

static void test_json_reader_edges(void **state) {
    (void)state;
    lw__jr jr;
    char msg[96];
    size_t pos;
    const char ok[] = "{\"s\":\"a\\u00e9\\ud83d\\ude00\\n\\/\",\"n\":-9223372036854775808,\"r\":1.5e3,\"t\":[true,false,null]}";
    assert_int_equal(lw__jr_parse(&jr, ok, sizeof ok - 1, msg, sizeof msg, &pos), 0);
    long v = lw__jr_get(&jr, 0, "s");
    assert_true(v > 0);
    assert_string_equal(jr.v[v].str, "a\xC3\xA9\xF0\x9F\x98\x80\n/");
    assert_int_equal(jr.v[lw__jr_get(&jr, 0, "n")].num, INT64_MIN);
    assert_int_equal(jr.v[lw__jr_get(&jr, 0, "r")].type, LW__JR_REAL);
    long t = lw__jr_get(&jr, 0, "t");
    assert_int_equal(jr.v[t].count, 3);
    assert_int_equal(jr.v[lw__jr_at(&jr, t, 2)].type, LW__JR_NULL);
    assert_int_equal(lw__jr_at(&jr, t, 3), -1);
    assert_int_equal(lw__jr_get(&jr, 0, "missing"), -1);
    lw__jr_free(&jr);

    static const char *const bad[] = {
        "{\"n\":9223372036854775808}", "{\"s\":\"\\u0000\"}", "{\"s\":\"\\ud83d\"}", "{\"s\":\"\\ude00\"}",
        "{\"s\":\"\xC0\xAF\"}",        "{\"s\":\"\xED\xA0\x80\"}", "{\"s\":\"a\tb\"}", "{\"n\":01}",
        "{\"n\":1.}",                  "{\"n\":-}",            "{\"a\":1,}",        "[1 2]",
        "{\"a\" 1}",                   "{'a':1}",              "{\"a\":tru}",       "\xEF\xBB\xBF{}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = lw__jr_parse(&jr, bad[i], strlen(bad[i]), msg, sizeof msg, &pos);
        lw__jr_free(&jr);
        if (rc != -1) fail_msg("accepted %s", bad[i]);
    }
    /* 65 levels are refused, 64 are not; an object of 1,000 keys with one repeated is refused
     * (found by sorting). */
    char deep[200];
    memset(deep, '[', 65);
    memset(deep + 65, ']', 65);
    assert_int_equal(lw__jr_parse(&jr, deep, 130, msg, sizeof msg, &pos), -1);
    assert_string_equal(msg, "nesting too deep");
    lw__jr_free(&jr);
    assert_int_equal(lw__jr_parse(&jr, deep + 1, 128, msg, sizeof msg, &pos), 0);
    lw__jr_free(&jr);
    lw__buf b = {0};
    lw__buf_puts(&b, "{");
    for (int i = 0; i < 1000; i++) lw__buf_printf(&b, "%s\"k%d\":%d", i ? "," : "", i == 999 ? 500 : i, i);
    lw__buf_puts(&b, "}");
    assert_int_equal(lw__jr_parse(&jr, b.data, b.size, msg, sizeof msg, &pos), -1);
    assert_string_equal(msg, "duplicate object key");
    lw__jr_free(&jr);
    lw__buf_free(&b);
}

/* A buffer with a max refuses an append that would pass it, also when its memory has room. */
static void test_buf_max(void **state) {
    (void)state;
    lw__buf b = {.max = 10};
    lw__buf_puts(&b, "abcdef"); /* 256 bytes allocated */
    assert_false(b.failed);
    lw__buf_puts(&b, "ghijk");
    assert_true(b.failed);
    assert_int_equal(b.size, 6);
    lw__buf_free(&b);
    lw__buf c = {.max = 10};
    assert_int_equal(lw__buf_reserve(&c, 11), 0);
    assert_false(c.failed); /* smaller appends may still fit */
    assert_int_equal(lw__buf_reserve(&c, 10), 1);
    lw__buf_puts(&c, "0123456789");
    assert_false(c.failed);
    assert_int_equal(c.size, 10);
    lw__buf_free(&c);
}

/* ---- refusals ------------------------------------------------------------------------------- */

/* Navigates "leaks.0.traces.0.elements.1" in `root`. */
static json_t *at(json_t *root, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = root;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && cur; tok = strtok_r(NULL, ".", &save)) {
        if (tok[0] >= '0' && tok[0] <= '9') cur = json_array_get(cur, (size_t)atoi(tok));
        else cur = json_object_get(cur, tok);
    }
    if (!cur) fail_msg("no %s in the base document", path);
    return cur;
}

typedef struct {
    const char *what;
    const char *path;  /* object to change ("" = root) */
    const char *key;
    const char *value; /* JSON text; NULL = delete the key */
    lw_status expect;
} mutation;

static void test_decoder_rejects_mutated_documents(void **state) {
    (void)state;
    static const mutation cases[] = {
        {"format 2", "", "format", "2", LW_ERR_FORMAT},
        {"format as string", "", "format", "\"1\"", LW_ERR_FORMAT},
        {"format missing", "", "format", NULL, LW_ERR_FORMAT},
        {"leaks missing", "", "leaks", NULL, LW_ERR_FORMAT},
        {"leaks an object", "", "leaks", "{}", LW_ERR_FORMAT},
        {"leak not an object", "leaks", NULL, "3", LW_ERR_FORMAT},
        {"unknown leak kind", "leaks.0", "kind", "\"lib\"", LW_ERR_FORMAT},
        {"library leak without pattern", "leaks.1", "library_pattern", "null", LW_ERR_FORMAT},
        {"signature a number", "leaks.0", "signature", "12", LW_ERR_FORMAT},
        {"count a string", "leaks.0", "count", "\"2\"", LW_ERR_FORMAT},
        {"count zero", "leaks.0", "count", "0", LW_ERR_FORMAT},
        {"traces missing", "leaks.0", "traces", NULL, LW_ERR_FORMAT},
        {"traces empty", "leaks.0", "traces", "[]", LW_ERR_FORMAT},
        {"gc_root missing", "leaks.0.traces.0", "gc_root", NULL, LW_ERR_FORMAT},
        {"gc_root a number", "leaks.0.traces.0", "gc_root", "5", LW_ERR_FORMAT},
        {"elements missing", "leaks.0.traces.0", "elements", NULL, LW_ERR_FORMAT},
        {"elements empty", "leaks.0.traces.0", "elements", "[]", LW_ERR_FORMAT},
        {"class missing", "leaks.0.traces.0.elements.0", "class", NULL, LW_ERR_FORMAT},
        {"class empty", "leaks.0.traces.0.elements.0", "class", "\"\"", LW_ERR_FORMAT},
        {"class a number", "leaks.0.traces.0.elements.0", "class", "42", LW_ERR_FORMAT},
        {"class with NUL", "leaks.0.traces.0.elements.0", "class", "\"a\\u0000b\"", LW_ERR_FORMAT},
        {"unknown object kind", "leaks.0.traces.0.elements.1", "object_kind", "\"object\"", LW_ERR_FORMAT},
        {"object kind missing", "leaks.0.traces.0.elements.1", "object_kind", NULL, LW_ERR_FORMAT},
        {"unknown leaking", "leaks.0.traces.0.elements.1", "leaking", "\"MAYBE\"", LW_ERR_FORMAT},
        {"leaking lower case", "leaks.0.traces.0.elements.1", "leaking", "\"yes\"", LW_ERR_FORMAT},
        {"reason a number", "leaks.0.traces.0.elements.1", "reason", "1", LW_ERR_FORMAT},
        {"labels not an array", "leaks.0.traces.0.elements.2", "labels", "\"x\"", LW_ERR_FORMAT},
        {"label not a string", "leaks.0.traces.0.elements.2", "labels", "[1]", LW_ERR_FORMAT},
        {"reference on the last element", "leaks.0.traces.0.elements.2", "reference",
         "{\"kind\":\"instance_field\",\"name\":\"x\",\"suspect\":false}", LW_ERR_FORMAT},
        {"reference missing", "leaks.0.traces.0.elements.0", "reference", NULL, LW_ERR_FORMAT},
        {"reference not an object", "leaks.0.traces.0.elements.0", "reference", "[]", LW_ERR_FORMAT},
        {"unknown reference kind", "leaks.0.traces.0.elements.0.reference", "kind", "\"field\"", LW_ERR_FORMAT},
        {"reference kind missing", "leaks.0.traces.0.elements.0.reference", "kind", NULL, LW_ERR_FORMAT},
        {"field name missing", "leaks.0.traces.0.elements.0.reference", "name", NULL, LW_ERR_FORMAT},
        {"array index missing", "leaks.0.traces.0.elements.1.reference", "index", NULL, LW_ERR_FORMAT},
        {"array index a string", "leaks.0.traces.0.elements.1.reference", "index", "\"2\"", LW_ERR_FORMAT},
        {"array index negative", "leaks.0.traces.0.elements.1.reference", "index", "-1", LW_ERR_FORMAT},
        {"array index a float", "leaks.0.traces.0.elements.1.reference", "index", "2.5", LW_ERR_FORMAT},
        {"suspect a string", "leaks.0.traces.0.elements.1.reference", "suspect", "\"yes\"", LW_ERR_FORMAT},
        {"retained_bytes a string", "leaks.0.traces.0.elements.2", "retained_bytes", "\"1\"", LW_ERR_FORMAT},
        {"watch_ms below -1", "leaks.0.traces.0.elements.2", "watch_ms", "-2", LW_ERR_FORMAT},
        {"key a number", "leaks.0.traces.0.elements.2", "key", "7", LW_ERR_FORMAT},
    };
    json_error_t je;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const mutation *m = &cases[i];
        json_t *root = json_loads(base_doc, 0, &je);
        assert_non_null(root);
        json_t *target = m->path[0] ? at(root, m->path) : root;
        if (!m->key) {
            json_t *v = json_loads(m->value, JSON_DECODE_ANY, &je);
            assert_non_null(v);
            json_array_set_new(target, 0, v);
        } else if (!m->value) {
            json_object_del(target, m->key);
        } else {
            json_t *v = json_loads(m->value, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            if (!v) fail_msg("%s: bad test value", m->what);
            json_object_set_new(target, m->key, v);
        }
        char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(root);
        lw_leak_report *r = (lw_leak_report *)1;
        lw_error err = {0};
        lw_status st = decode(text, NULL, &r, &err);
        if (st != m->expect) fail_msg("%s: got %s (%s), expected %s", m->what, lw_strerror(st), err.message, lw_strerror(m->expect));
        assert_null(r);
        assert_int_equal(err.status, m->expect);
        assert_true(err.message[0] != 0);
        /* the message names the object: "leaks[0].traces[0].elements[1]: ..." for that path */
        char want[128] = "", *w = want;
        if (strncmp(m->path, "leaks", 5) == 0) {
            const char *p = m->path;
            while (*p) {
                size_t nl = strcspn(p, ".");
                const char *num = p[nl] ? p + nl + 1 : "";
                size_t dl = strspn(num, "0123456789");
                if (dl == 0 && !*num && !m->key) num = "0", dl = 1; /* an array element replaced */
                if (dl == 0) break;
                w += sprintf(w, "%s%.*s[%.*s]", w == want ? "" : ".", (int)nl, p, (int)dl, num);
                p = num + dl;
                if (*p == '.') p++;
                if (!*num) break;
            }
        }
        if (want[0] && strncmp(err.message, "trace JSON is malformed", 23) != 0 && (strncmp(err.message, want, strlen(want)) != 0 || err.message[strlen(want)] != ':'))
            fail_msg("%s: message \"%s\" does not start with \"%s:\"", m->what, err.message, want);
        free(text);
    }
}

/* Paths with indices of several digits: the 12th leak's 11th element. */
static void test_decoder_names_deep_indices(void **state) {
    (void)state;
    json_error_t je;
    json_t *root = json_loads(base_doc, 0, &je);
    assert_non_null(root);
    json_t *leaks = json_object_get(root, "leaks");
    json_t *leak = json_deep_copy(json_array_get(leaks, 0));
    json_t *els = json_object_get(json_array_get(json_object_get(leak, "traces"), 0), "elements");
    while (json_array_size(els) < 12) json_array_insert_new(els, 0, json_deep_copy(json_array_get(els, 0)));
    json_object_set_new(json_array_get(els, 10), "leaking", json_string("MAYBE"));
    while (json_array_size(leaks) < 11) json_array_append_new(leaks, json_deep_copy(json_array_get(leaks, 0)));
    json_array_append_new(leaks, leak);
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    lw_leak_report *r = NULL;
    lw_error err = {0};
    assert_int_equal(decode(text, NULL, &r, &err), LW_ERR_FORMAT);
    assert_string_equal(err.message, "leaks[11].traces[0].elements[10]: leaking must be YES, NO or UNKNOWN");
    free(text);
}

static void test_decoder_rejects_malformed_json(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",      "{",      "[1,2",  "{\"format\":1,\"leaks\":[]", "nul", "{\"format\":1,\"leaks\":[],}", "[]", "1",
        "\"x\"", "null",   "{\"format\":1,\"format\":1,\"leaks\":[]}", /* duplicate key */
        "{\"format\":1,\"leaks\":[]} trailing",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lw_leak_report *r = NULL;
        lw_error err = {0};
        lw_status st = decode(bad[i], NULL, &r, &err);
        if (st != LW_ERR_FORMAT) fail_msg("'%s': got %s", bad[i], lw_strerror(st));
        assert_null(r);
    }
    /* A document with no leaks is fine. */
    lw_leak_report *r = NULL;
    assert_int_equal(decode("{\"format\":1,\"leaks\":[]}", NULL, &r, NULL), LW_OK);
    assert_int_equal(r->leak_count, 0);
    lw_leak_report_free(r);
    assert_int_equal(lw_leak_report_from_json(NULL, 0, NULL, &r, NULL), LW_ERR_USAGE);
    /* Bytes after a NUL inside the length are not silently ignored. */
    const char with_nul[] = "{\"format\":1,\"leaks\":[]}\0garbage";
    r = NULL;
    assert_int_equal(lw_leak_report_from_json(with_nul, sizeof with_nul - 1, NULL, &r, NULL), LW_ERR_FORMAT);
    assert_null(r);
}

static void test_decoder_enforces_every_limit(void **state) {
    (void)state;
    size_t len = strlen(base_doc);
    struct {
        const char *what;
        lw_json_limits lim;
    } cases[] = {
        {"max_bytes", {len - 1, 0, 0, 0, 0}},
        {"max_leaks", {0, 1, 0, 0, 0}},
        {"max_traces", {0, 0, 1, 0, 0}},
        {"max_elements", {0, 0, 0, 2, 0}},
        {"max_string", {0, 0, 0, 0, 8}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lw_leak_report *r = NULL;
        lw_error err = {0};
        lw_status st = decode(base_doc, &cases[i].lim, &r, &err);
        if (st != LW_ERR_LIMIT) fail_msg("%s: got %s (%s)", cases[i].what, lw_strerror(st), err.message);
        assert_null(r);
    }
    /* max_string holds for strings compared in place too: the signature (40) is the first
     * string over 39 bytes ("JAVA PROFILE 1.0.2" is 18). */
    {
        lw_json_limits sig39 = {0, 0, 0, 0, 39};
        lw_leak_report *r = NULL;
        lw_error err = {0};
        assert_int_equal(decode(base_doc, &sig39, &r, &err), LW_ERR_LIMIT);
        assert_string_equal(err.message, "leaks[0]: \"signature\" is 40 bytes, over the 39-byte limit");
        assert_null(r);
    }
    /* At the limits exactly: accepted. */
    lw_json_limits exact = {len, 2, 2, 3, 200};
    lw_leak_report *r = NULL;
    lw_error err = {0};
    assert_int_equal(decode(base_doc, &exact, &r, &err), LW_OK);
    lw_leak_report_free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_then_encode_round_trips),
        cmocka_unit_test(test_decoded_strings_share_one_block),
        cmocka_unit_test(test_compact_encoding_is_byte_exact),
        cmocka_unit_test(test_writer_integers_and_literals),
        cmocka_unit_test(test_analysis_report_round_trips),
        cmocka_unit_test(test_encoded_names_match_the_contract),
        cmocka_unit_test(test_encoder_repairs_bad_utf8_and_escapes),
        cmocka_unit_test(test_plain_run_scan_matches_bytewise),
        cmocka_unit_test(test_json_reader_edges),
        cmocka_unit_test(test_buf_max),
        cmocka_unit_test(test_decoder_rejects_mutated_documents),
        cmocka_unit_test(test_decoder_names_deep_indices),
        cmocka_unit_test(test_decoder_rejects_malformed_json),
        cmocka_unit_test(test_decoder_enforces_every_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
