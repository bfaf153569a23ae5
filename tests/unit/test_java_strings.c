/* test_java_strings.c — java.lang.String contents in every layout the analyzer meets, read
 * through the watch key and description of a leak: JDK 9+ byte[] with coder LATIN1 and UTF16,
 * Android before O (char[] with offset and count), Android O+ (compressed byte[] whose count
 * is length << 1). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hprof_writer.h"

typedef enum { JDK_LATIN1, JDK_UTF16, ANDROID_PRE_O, ANDROID_O } layout;

enum { S_OBJECT = 1, S_REF, S_WEAKREF, S_KWR, S_STRING, S_HOLDER, S_SCREEN, F_REFERENT, F_KEY, F_DESC, F_WATCH, F_RETAINED,
       F_DUMP_UP, F_VALUE, F_CODER, F_HASH, F_COUNT, F_OFFSET, F_LEAKED };
enum { C_OBJECT = 0x1000, C_REF = 0x1010, C_WEAKREF = 0x1020, C_KWR = 0x1030, C_STRING = 0x1040, C_HOLDER = 0x1050,
       C_SCREEN = 0x1060 };

/* A String object with `text` in `lay`; returns its id. `n` ids from `id` are used. */
static uint64_t put_string(lw__hprof_writer *w, layout lay, uint64_t id, const char *text) {
    uint8_t data[32] = {0}, chars[256];
    uint32_t len = (uint32_t)strlen(text), n = 0;
    switch (lay) {
    case JDK_LATIN1:
        lw__hprof_writer_primitive_array(w, id + 1, 0, LW_T_BYTE, text, len);
        lw__put_be64(data, id + 1); /* value */
        data[8] = 0;                /* coder LATIN1 */
        lw__hprof_writer_instance(w, id, 0, C_STRING, data, 13);
        break;
    case JDK_UTF16: /* the text is ASCII here, stored as UTF-16LE plus a non-ASCII char: 'é' */
        for (uint32_t i = 0; i < len; i++) chars[n++] = (uint8_t)text[i], chars[n++] = 0;
        chars[n++] = 0xE9, chars[n++] = 0x00;
        lw__hprof_writer_primitive_array(w, id + 1, 0, LW_T_BYTE, chars, n);
        lw__put_be64(data, id + 1);
        data[8] = 1; /* coder UTF16 */
        lw__hprof_writer_instance(w, id, 0, C_STRING, data, 13);
        break;
    case ANDROID_PRE_O: /* char[] "[[" + text + "]]", offset 2, count len */
        chars[n++] = 0, chars[n++] = '[', chars[n++] = 0, chars[n++] = '[';
        for (uint32_t i = 0; i < len; i++) chars[n++] = 0, chars[n++] = (uint8_t)text[i];
        chars[n++] = 0, chars[n++] = ']', chars[n++] = 0, chars[n++] = ']';
        lw__hprof_writer_primitive_array(w, id + 1, 0, LW_T_CHAR, chars, n / 2);
        lw__put_be32(data, len);       /* count */
        lw__put_be32(data + 4, 0);     /* hash */
        lw__put_be32(data + 8, 2);     /* offset */
        lw__put_be32(data + 12, id + 1); /* value (4-byte ids) */
        lw__hprof_writer_instance(w, id, 0, C_STRING, data, 16);
        break;
    case ANDROID_O: /* compressed: byte[] with a trailing pad byte, count = len << 1 */
        memcpy(chars, text, len);
        chars[len] = 'X';
        lw__hprof_writer_primitive_array(w, id + 1, 0, LW_T_BYTE, chars, len + 1);
        lw__put_be32(data, len << 1); /* count */
        lw__put_be32(data + 4, 0);    /* hash */
        lw__put_be32(data + 8, id + 1);
        lw__hprof_writer_instance(w, id, 0, C_STRING, data, 12);
        break;
    }
    return id;
}

/* Writes a dump in which Holder.leaked holds a watched Screen; returns its path. */
static char *write_dump(layout lay) {
    int android = lay == ANDROID_PRE_O || lay == ANDROID_O;
    unsigned ids = android ? 4 : 8;
    char *path = strdup("/tmp/leakcore-strings-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    lw__hprof_writer *w = NULL;
    lw_error err = {0};
    assert_int_equal(lw__hprof_writer_open(&w, path, android ? "JAVA PROFILE 1.0.3" : "JAVA PROFILE 1.0.2", ids, 0, 0, &err), LW_OK);
    const char *names[] = {"", "java/lang/Object", "java/lang/ref/Reference", "java/lang/ref/WeakReference",
                           "io/leakwatch/KeyedWeakReference", "java/lang/String", "Holder", "Screen", "referent", "key",
                           "description", "watchUptimeMillis", "retainedUptimeMillis", "heapDumpUptimeMillis", "value",
                           "coder", "hash", "count", "offset", "leaked"};
    for (uint64_t i = 1; i < sizeof names / sizeof *names; i++) lw__hprof_writer_string(w, i, names[i], strlen(names[i]));
    uint64_t cls[] = {C_OBJECT, C_REF, C_WEAKREF, C_KWR, C_STRING, C_HOLDER, C_SCREEN};
    for (uint32_t i = 0; i < 7; i++) lw__hprof_writer_load_class(w, i + 1, cls[i], 0, i + 1);
    lw__hprof_field_def ref_fields[] = {{F_REFERENT, 2, 0}};
    lw__hprof_field_def kwr_fields[] = {{F_KEY, 2, 0}, {F_DESC, 2, 0}, {F_WATCH, 11, 0}, {F_RETAINED, 11, 0}};
    lw__hprof_field_def kwr_static[] = {{F_DUMP_UP, 11, 5000}};
    lw__hprof_field_def jdk_string[] = {{F_VALUE, 2, 0}, {F_CODER, 8, 0}, {F_HASH, 10, 0}};
    lw__hprof_field_def pre_o_string[] = {{F_COUNT, 10, 0}, {F_HASH, 10, 0}, {F_OFFSET, 10, 0}, {F_VALUE, 2, 0}};
    lw__hprof_field_def o_string[] = {{F_COUNT, 10, 0}, {F_HASH, 10, 0}, {F_VALUE, 2, 0}};
    lw__hprof_field_def holder_static[] = {{F_LEAKED, 2, 0x7000}};
    const lw__hprof_field_def *sf = lay == ANDROID_PRE_O ? pre_o_string : lay == ANDROID_O ? o_string : jdk_string;
    size_t nsf = lay == ANDROID_PRE_O ? 4 : 3;
    lw__hprof_class_def defs[] = {
        {C_OBJECT, 0, 0, 0, 0, NULL, 0, NULL, 0},
        {C_REF, C_OBJECT, 0, 0, ids, NULL, 0, ref_fields, 1},
        {C_WEAKREF, C_REF, 0, 0, ids, NULL, 0, NULL, 0},
        {C_KWR, C_WEAKREF, 0, 0, 2 * ids + 16 + ids, kwr_static, 1, kwr_fields, 4},
        {C_STRING, C_OBJECT, 0, 0, 16, NULL, 0, sf, nsf},
        {C_HOLDER, C_OBJECT, 0, 0, 0, holder_static, 1, NULL, 0},
        {C_SCREEN, C_OBJECT, 0, 0, 0, NULL, 0, NULL, 0},
    };
    for (size_t i = 0; i < 7; i++) lw__hprof_writer_class_dump(w, &defs[i]);
    lw__hprof_writer_instance(w, 0x7000, 0, C_SCREEN, NULL, 0);
    put_string(w, lay, 0x7100, "key-1");
    put_string(w, lay, 0x7200, "Screen closed");
    uint8_t kwr[64], *p = kwr;
    lw__put_be_id(p, 0x7100, ids), p += ids;      /* key */
    lw__put_be_id(p, 0x7200, ids), p += ids;      /* description */
    lw__put_be64(p, 1000), p += 8;                /* watchUptimeMillis */
    lw__put_be64(p, 4000), p += 8;                /* retainedUptimeMillis */
    lw__put_be_id(p, 0x7000, ids), p += ids;      /* Reference.referent */
    lw__hprof_writer_instance(w, 0x7300, 0, C_KWR, kwr, (uint32_t)(p - kwr));
    lw__hprof_writer_root(w, LW_SUB_ROOT_STICKY_CLASS, C_KWR, 0, 0);
    lw__hprof_writer_root(w, LW_SUB_ROOT_JNI_GLOBAL, 0x7300, 0, 0);
    lw__hprof_writer_end_heap_dump(w);
    assert_int_equal(lw__hprof_writer_close(w, &err), LW_OK);
    return path;
}

static void check_layout(layout lay, const char *want_key, const char *want_desc) {
    char *path = write_dump(lay);
    lw_heap *heap = NULL;
    lw_error err = {0};
    if (lw_heap_open(&heap, path, NULL, &err) != LW_OK) fail_msg("%s", err.message);
    lw_leak_report *r = NULL;
    assert_int_equal(lw_heap_analyze(heap, NULL, &r, &err), LW_OK);
    assert_int_equal(r->leak_count, 1);
    const lw_trace *t = &r->leaks[0].traces[0];
    const lw_trace_element *last = &t->elements[t->element_count - 1];
    assert_string_equal(last->class_name, "Screen");
    assert_string_equal(last->key, want_key);
    assert_string_equal(last->description, want_desc);
    /* and --key finds it by that text */
    lw_leak_report_free(r);
    lw_analysis_options o = {sizeof o, want_key, 0, NULL, NULL};
    assert_int_equal(lw_heap_analyze(heap, &o, &r, &err), LW_OK);
    assert_int_equal(r->leak_count, 1);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    unlink(path);
    free(path);
}

static void jdk_latin1(void **s) { (void)s; check_layout(JDK_LATIN1, "key-1", "Screen closed"); }
static void jdk_utf16(void **s) { (void)s; check_layout(JDK_UTF16, "key-1\xC3\xA9", "Screen closed\xC3\xA9"); }
static void android_pre_o_offset_count(void **s) { (void)s; check_layout(ANDROID_PRE_O, "key-1", "Screen closed"); }
static void android_o_compressed(void **s) { (void)s; check_layout(ANDROID_O, "key-1", "Screen closed"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(jdk_latin1),
        cmocka_unit_test(jdk_utf16),
        cmocka_unit_test(android_pre_o_offset_count),
        cmocka_unit_test(android_o_compressed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
