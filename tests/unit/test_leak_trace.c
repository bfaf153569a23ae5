/* test_leak_trace.c — the trace model: exact traces built from dumps, signatures (the
 * architecture's test vectors), grouping, LeakCanary's status propagation and suspects. */
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

static const char *const versions[] = {HB_JVM, HB_ANDROID};
static const unsigned id_sizes[] = {4, 8};

/* ---- from dumps ------------------------------------------------------------------------------ */

static void test_static_field_leak_exact_trace_and_signature(void **state) {
    (void)state;
    for (int v = 0; v < 2; v++)
        for (int s = 0; s < 2; s++) {
            hb *b = hb_new(versions[v], id_sizes[s]);
            uint64_t root = hb_class(b, "GcRoot", NULL, NULL, "leak:O");
            hb_class(b, "Leaking", NULL, "x:I", NULL);
            uint64_t obj = hb_instance(b, "Leaking");
            hb_set_static(b, root, "leak", obj);
            hb_watch(b, obj, "k-1", "Leaking destroyed", 1);
            lw_heap *heap = hb_open(b);
            lw_leak_report *r = hb_analyze(heap, NULL);
            assert_int_equal(r->leak_count, 1);
            const lw_leak *l = &r->leaks[0];
            assert_string_equal(l->signature, "a49095c3373b957532aff14eb32987bb75ffe9d5");
            assert_int_equal(l->library, 0);
            assert_null(l->library_pattern);
            assert_int_equal(l->count, 1);
            assert_string_equal(l->short_description, "GcRoot.leak");
            assert_int_equal(l->trace_count, 1);
            const lw_trace *t = &l->traces[0];
            assert_string_equal(t->gc_root, "STICKY_CLASS");
            assert_int_equal(t->element_count, 2);
            const lw_trace_element *e0 = &t->elements[0], *e1 = &t->elements[1];
            assert_string_equal(e0->class_name, "GcRoot");
            assert_int_equal(e0->object_kind, LW_OBJECT_CLASS);
            assert_int_equal(e0->leaking, LW_LEAKING_NO);
            assert_string_equal(e0->reason, "a class is never leaking");
            assert_int_equal(e0->has_reference, 1);
            assert_int_equal(e0->ref_kind, LW_REF_STATIC_FIELD);
            assert_string_equal(e0->ref_name, "leak");
            assert_int_equal(e0->suspect, 1);
            assert_null(e0->key);
            assert_string_equal(e1->class_name, "Leaking");
            assert_int_equal(e1->object_kind, LW_OBJECT_INSTANCE);
            assert_int_equal(e1->leaking, LW_LEAKING_YES);
            assert_string_equal(e1->reason, "ObjectWatcher was watching this because Leaking destroyed");
            assert_int_equal(e1->has_reference, 0);
            assert_int_equal(e1->suspect, 0);
            assert_string_equal(e1->key, "k-1");
            assert_string_equal(e1->description, "Leaking destroyed");
            assert_int_equal(e1->watch_ms, 9000);
            assert_int_equal(e1->retained_ms, 5000);
            assert_int_equal(e1->retained_bytes, -1);
            assert_int_equal(e1->label_count, 3);
            assert_string_equal(e1->labels[0], "key = k-1");
            assert_string_equal(e1->labels[1], "watchDurationMillis = 9000");
            assert_string_equal(e1->labels[2], "retainedDurationMillis = 5000");
            assert_string_equal(r->hprof_version, versions[v]);
            assert_int_equal(r->id_size, id_sizes[s]);
            lw_leak_report_free(r);
            lw_heap_free(heap);
            hb_free(b);
        }
}

/* LeakingSingleton.leakedViews -> ArrayList.elementData -> Object[] element. */
static hb *singleton_dump(unsigned ids, uint32_t slot, int second_slot) {
    hb *b = hb_new(HB_JVM, ids);
    uint64_t single = hb_class(b, "com.example.leakcanary.LeakingSingleton", NULL, NULL, "leakedViews:O");
    hb_class(b, "java.util.ArrayList", NULL, "elementData:O size:I", NULL);
    hb_class(b, "android.view.View", NULL, "mContext:O", NULL);
    uint64_t list = hb_instance(b, "java.util.ArrayList");
    uint64_t arr = hb_object_array(b, HB_OBJECT_ARRAY, NULL, 10);
    hb_set(b, list, "elementData", arr);
    hb_set(b, list, "size", 10);
    hb_set_static(b, single, "leakedViews", list);
    uint64_t view = hb_instance(b, "android.view.View");
    hb_array_set(b, arr, slot, view);
    hb_watch(b, view, "view-1", "View detached", 1);
    if (second_slot >= 0) {
        uint64_t v2 = hb_instance(b, "android.view.View");
        hb_array_set(b, arr, (uint32_t)second_slot, v2);
        hb_watch(b, v2, "view-2", "View detached", 1);
    }
    return b;
}

static void test_signature_vector_singleton_arraylist_object_array(void **state) {
    (void)state;
    for (int s = 0; s < 2; s++) {
        hb *b = singleton_dump(id_sizes[s], 7, -1);
        lw_heap *heap = hb_open(b);
        lw_leak_report *r = hb_analyze(heap, NULL);
        assert_int_equal(r->leak_count, 1);
        const lw_leak *l = &r->leaks[0];
        assert_string_equal(l->signature, "ce9dee03a1feb859fd3b3a09ff51e3ddfd8efbc6");
        assert_string_equal(l->short_description, "LeakingSingleton.leakedViews");
        const lw_trace *t = &l->traces[0];
        assert_string_equal(t->gc_root, "STICKY_CLASS");
        assert_int_equal(t->element_count, 4);
        assert_string_equal(t->elements[0].class_name, "com.example.leakcanary.LeakingSingleton");
        assert_int_equal(t->elements[0].object_kind, LW_OBJECT_CLASS);
        assert_int_equal(t->elements[0].ref_kind, LW_REF_STATIC_FIELD);
        assert_string_equal(t->elements[0].ref_name, "leakedViews");
        assert_string_equal(t->elements[1].class_name, "java.util.ArrayList");
        assert_int_equal(t->elements[1].object_kind, LW_OBJECT_INSTANCE);
        assert_int_equal(t->elements[1].leaking, LW_LEAKING_UNKNOWN);
        assert_string_equal(t->elements[1].reason, "");
        assert_int_equal(t->elements[1].ref_kind, LW_REF_INSTANCE_FIELD);
        assert_string_equal(t->elements[1].ref_name, "elementData");
        assert_string_equal(t->elements[2].class_name, "java.lang.Object[]");
        assert_int_equal(t->elements[2].object_kind, LW_OBJECT_ARRAY);
        assert_int_equal(t->elements[2].ref_kind, LW_REF_ARRAY_ELEMENT);
        assert_null(t->elements[2].ref_name);
        assert_int_equal(t->elements[2].ref_index, 7);
        assert_string_equal(t->elements[3].class_name, "android.view.View");
        for (int i = 0; i < 3; i++) assert_int_equal(t->elements[i].suspect, 1);
        lw_leak_report_free(r);
        lw_heap_free(heap);
        hb_free(b);
    }
}

static void test_two_objects_through_same_path_shape_group_into_one_leak(void **state) {
    (void)state;
    hb *b = singleton_dump(8, 1, 4);
    lw_heap *heap = hb_open(b);
    lw_leak_report *r = hb_analyze(heap, NULL);
    assert_int_equal(r->leak_count, 1);
    const lw_leak *l = &r->leaks[0];
    assert_int_equal(l->count, 2);
    assert_int_equal(l->trace_count, 2);
    assert_string_equal(l->signature, "ce9dee03a1feb859fd3b3a09ff51e3ddfd8efbc6");
    uint64_t slots[2] = {l->traces[0].elements[2].ref_index, l->traces[1].elements[2].ref_index};
    assert_true((slots[0] == 1 && slots[1] == 4) || (slots[0] == 4 && slots[1] == 1));
    char s0[41], s1[41];
    lw_trace_signature(&l->traces[0], s0);
    lw_trace_signature(&l->traces[1], s1);
    assert_string_equal(s0, s1);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    hb_free(b);
}

static void test_different_paths_make_separate_leaks_sorted_by_count(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    uint64_t ca = hb_class(b, "A", NULL, NULL, "one:O two:O");
    uint64_t cb = hb_class(b, "B", NULL, NULL, "other:O");
    hb_class(b, "Leaky", NULL, NULL, NULL);
    uint64_t arr = hb_object_array(b, NULL, NULL, 2);
    uint64_t x1 = hb_instance(b, "Leaky"), x2 = hb_instance(b, "Leaky"), y = hb_instance(b, "Leaky");
    hb_array_set(b, arr, 0, x1);
    hb_array_set(b, arr, 1, x2);
    hb_set_static(b, ca, "one", arr);
    hb_set_static(b, cb, "other", y);
    hb_watch(b, y, "y", "y", 1);
    hb_watch(b, x1, "x1", "x1", 1);
    hb_watch(b, x2, "x2", "x2", 1);
    lw_heap *heap = hb_open(b);
    lw_leak_report *r = hb_analyze(heap, NULL);
    assert_int_equal(r->leak_count, 2);
    assert_int_equal(r->leaks[0].count, 2); /* larger group first */
    assert_string_equal(r->leaks[0].short_description, "A.one");
    assert_int_equal(r->leaks[1].count, 1);
    assert_string_equal(r->leaks[1].short_description, "B.other");
    char expect[41];
    lw_sha1_hex("Aonejava.lang.Object[][x]", strlen("Aonejava.lang.Object[][x]"), expect);
    assert_string_equal(r->leaks[0].signature, expect);
    lw_sha1_hex("Bother", 6, expect);
    assert_string_equal(r->leaks[1].signature, expect);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    hb_free(b);
}

/* An object both leaking and not leaking: the last one resolves to YES with a conflict,
 * any other to NO with a conflict (shark-facts §4.2). */
static void test_inspector_conflicts_on_path_and_on_leaking_object(void **state) {
    (void)state;
    hb *b = hb_new(HB_ANDROID, 4);
    uint64_t holder = hb_class(b, "Holder", NULL, NULL, "queue:O");
    hb_class(b, "android.os.MessageQueue", NULL, "mQuitting:Z mQuiting:Z mMessages:O", NULL);
    hb_class(b, "android.app.Activity", NULL, "mDestroyed:Z", NULL);
    hb_class(b, "com.example.MainActivity", "android.app.Activity", NULL, NULL);
    uint64_t q = hb_instance(b, "android.os.MessageQueue");
    hb_set(b, q, "mQuitting", 1);
    hb_set(b, q, "mQuiting", 0);
    uint64_t act = hb_instance(b, "com.example.MainActivity");
    hb_set(b, act, "mDestroyed", 0);
    hb_set(b, q, "mMessages", act);
    hb_set_static(b, holder, "queue", q);
    hb_watch(b, act, "a", "MainActivity received Activity#onDestroy() callback", 1);
    lw_heap *heap = hb_open(b);
    lw_leak_report *r = hb_analyze(heap, NULL);
    assert_int_equal(r->leak_count, 1);
    const lw_trace *t = &r->leaks[0].traces[0];
    assert_int_equal(t->element_count, 3);
    assert_int_equal(t->elements[1].leaking, LW_LEAKING_NO);
    assert_string_equal(t->elements[1].reason, "MessageQueue#mQuiting is false. Conflicts with MessageQueue#mQuitting is true");
    assert_int_equal(t->elements[2].leaking, LW_LEAKING_YES);
    assert_string_equal(t->elements[2].reason,
                        "ObjectWatcher was watching this because MainActivity received Activity#onDestroy() callback. "
                        "Conflicts with Activity#mDestroyed is false");
    /* Holder is NO before a NO: propagated; the queue is the last NO: its reference is the suspect. */
    assert_int_equal(t->elements[0].leaking, LW_LEAKING_NO);
    assert_string_equal(t->elements[0].reason, "MessageQueue\xE2\x86\x93 is not leaking and a class is never leaking");
    assert_int_equal(t->elements[0].suspect, 0);
    assert_int_equal(t->elements[1].suspect, 1);
    char expect[41];
    lw_sha1_hex("android.os.MessageQueuemMessages", strlen("android.os.MessageQueuemMessages"), expect);
    assert_string_equal(r->leaks[0].signature, expect);
    lw_leak_report_free(r);
    lw_heap_free(heap);
    hb_free(b);
}

/* ---- hand-built traces ------------------------------------------------------------------------ */

typedef struct {
    const char *cls;
    lw_leaking leaking;
    const char *reason;
    lw_ref_kind kind;
    const char *ref; /* NULL for array elements */
    uint64_t index;
} spec;

static lw_trace *make_trace(const spec *s, size_t n) {
    lw_trace *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->gc_root = strdup("STICKY_CLASS");
    t->elements = calloc(n, sizeof *t->elements);
    t->element_count = n;
    for (size_t i = 0; i < n; i++) {
        lw_trace_element *e = &t->elements[i];
        e->class_name = strdup(s[i].cls);
        e->leaking = s[i].leaking;
        e->reason = strdup(s[i].reason ? s[i].reason : "");
        e->watch_ms = e->retained_ms = e->retained_bytes = e->retained_objects = -1;
        if (i + 1 < n) {
            e->has_reference = 1;
            e->ref_kind = s[i].kind;
            e->ref_name = s[i].ref ? strdup(s[i].ref) : NULL;
            e->ref_index = s[i].index;
        }
    }
    return t;
}

static void free_trace(lw_trace *t) {
    lw__trace_clear(t);
    free(t);
}

#define DOWN "\xE2\x86\x93"
#define UP "\xE2\x86\x91"

static void test_propagate_all_unknown_last_forced_leaking_all_suspect(void **state) {
    (void)state;
    spec s[] = {{"a.Root", LW_LEAKING_UNKNOWN, "", LW_REF_STATIC_FIELD, "f", 0},
                {"a.Mid", LW_LEAKING_UNKNOWN, "", LW_REF_INSTANCE_FIELD, "g", 0},
                {"a.Leak", LW_LEAKING_UNKNOWN, "", 0, NULL, 0}};
    lw_trace *t = make_trace(s, 3);
    lw_trace_propagate(t);
    assert_int_equal(t->elements[0].leaking, LW_LEAKING_UNKNOWN);
    assert_int_equal(t->elements[1].leaking, LW_LEAKING_UNKNOWN);
    assert_int_equal(t->elements[2].leaking, LW_LEAKING_YES);
    assert_string_equal(t->elements[2].reason, "This is the leaking object");
    assert_int_equal(t->elements[0].suspect, 1);
    assert_int_equal(t->elements[1].suspect, 1);
    char sig[41], expect[41];
    lw_trace_signature(t, sig);
    lw_sha1_hex("a.Rootfa.Midg", strlen("a.Rootfa.Midg"), expect);
    assert_string_equal(sig, expect);
    free_trace(t);
}

static void test_propagate_not_leaking_before_and_leaking_after_with_reasons(void **state) {
    (void)state;
    spec s[] = {{"a.A", LW_LEAKING_NO, "ra", LW_REF_STATIC_FIELD, "f0", 0},
                {"a.B", LW_LEAKING_UNKNOWN, "", LW_REF_INSTANCE_FIELD, "f1", 0},
                {"a.C", LW_LEAKING_NO, "rc", LW_REF_INSTANCE_FIELD, "f2", 0},
                {"java.lang.Object[]", LW_LEAKING_UNKNOWN, "", LW_REF_ARRAY_ELEMENT, NULL, 3},
                {"a.E", LW_LEAKING_YES, "re", LW_REF_INSTANCE_FIELD, "f4", 0},
                {"a.F", LW_LEAKING_UNKNOWN, "", LW_REF_INSTANCE_FIELD, "f5", 0},
                {"a.G", LW_LEAKING_UNKNOWN, "", 0, NULL, 0}};
    lw_trace *t = make_trace(s, 7);
    lw_trace_propagate(t);
    lw_trace_element *e = t->elements;
    assert_int_equal(e[0].leaking, LW_LEAKING_NO);
    assert_string_equal(e[0].reason, "C" DOWN " is not leaking and ra");
    assert_int_equal(e[1].leaking, LW_LEAKING_NO);
    assert_string_equal(e[1].reason, "C" DOWN " is not leaking");
    assert_int_equal(e[2].leaking, LW_LEAKING_NO);
    assert_string_equal(e[2].reason, "rc");
    assert_int_equal(e[3].leaking, LW_LEAKING_UNKNOWN);
    assert_string_equal(e[3].reason, "");
    assert_int_equal(e[4].leaking, LW_LEAKING_YES);
    assert_string_equal(e[4].reason, "re");
    assert_int_equal(e[5].leaking, LW_LEAKING_YES);
    assert_string_equal(e[5].reason, "E" UP " is leaking");
    assert_int_equal(e[6].leaking, LW_LEAKING_YES);
    assert_string_equal(e[6].reason, "This is the leaking object");
    int expect_suspect[] = {0, 0, 1, 1, 0, 0};
    for (int i = 0; i < 6; i++) assert_int_equal(e[i].suspect, expect_suspect[i]);
    char sig[41], expect[41];
    lw_trace_signature(t, sig);
    const char *concat = "a.Cf2java.lang.Object[][x]";
    lw_sha1_hex(concat, strlen(concat), expect);
    assert_string_equal(sig, expect);
    free_trace(t);
}

static void test_propagate_conflict_texts(void **state) {
    (void)state;
    /* A YES before the last NO: "S↓ is not leaking. Conflicts with <own>". A NO last element:
     * "This is the leaking object. Conflicts with <own>". A YES after the first YES: "S↑ is
     * leaking and <own>", S = the nearest earlier originally-leaking object. */
    spec s[] = {{"p.Early", LW_LEAKING_YES, "early yes", LW_REF_STATIC_FIELD, "a", 0},
                {"p.Guard", LW_LEAKING_NO, "guard no", LW_REF_INSTANCE_FIELD, "b", 0},
                {"p.First", LW_LEAKING_YES, "first yes", LW_REF_INSTANCE_FIELD, "c", 0},
                {"p.Gap", LW_LEAKING_UNKNOWN, "", LW_REF_INSTANCE_FIELD, "d", 0},
                {"p.Second$Inner", LW_LEAKING_YES, "second yes", LW_REF_INSTANCE_FIELD, "e", 0},
                {"p.After", LW_LEAKING_UNKNOWN, "", LW_REF_INSTANCE_FIELD, "f", 0},
                {"p.Last", LW_LEAKING_NO, "last no", 0, NULL, 0}};
    lw_trace *t = make_trace(s, 7);
    lw_trace_propagate(t);
    lw_trace_element *e = t->elements;
    assert_int_equal(e[0].leaking, LW_LEAKING_NO);
    assert_string_equal(e[0].reason, "Guard" DOWN " is not leaking. Conflicts with early yes");
    assert_string_equal(e[1].reason, "guard no");
    assert_string_equal(e[2].reason, "first yes");
    assert_int_equal(e[3].leaking, LW_LEAKING_YES);
    assert_string_equal(e[3].reason, "First" UP " is leaking");
    assert_int_equal(e[4].leaking, LW_LEAKING_YES);
    assert_string_equal(e[4].reason, "First" UP " is leaking and second yes");
    assert_int_equal(e[5].leaking, LW_LEAKING_YES);
    assert_string_equal(e[5].reason, "Second$Inner" UP " is leaking");
    assert_int_equal(e[6].leaking, LW_LEAKING_YES);
    assert_string_equal(e[6].reason, "This is the leaking object. Conflicts with last no");
    /* Only Guard -> First is suspect (last NO up to the first YES). */
    int expect_suspect[] = {0, 1, 0, 0, 0, 0};
    for (int i = 0; i < 6; i++) assert_int_equal(e[i].suspect, expect_suspect[i]);
    char sig[41], expect[41];
    lw_trace_signature(t, sig);
    lw_sha1_hex("p.Guardb", 8, expect);
    assert_string_equal(sig, expect);
    free_trace(t);
}

static void test_propagate_single_element_and_last_reference_from_not_leaking(void **state) {
    (void)state;
    spec one[] = {{"x.Only", LW_LEAKING_UNKNOWN, "", 0, NULL, 0}};
    lw_trace *t = make_trace(one, 1);
    lw_trace_propagate(t);
    assert_int_equal(t->elements[0].leaking, LW_LEAKING_YES);
    char sig[41];
    lw_trace_signature(t, sig);
    assert_string_equal(sig, "da39a3ee5e6b4b0d3255bfef95601890afd80709"); /* no suspect: SHA-1 of "" */
    free_trace(t);
    /* NO, NO, leak: only the last reference (from the last NO) is suspect. */
    spec s[] = {{"x.A", LW_LEAKING_NO, "r", LW_REF_STATIC_FIELD, "a", 0},
                {"x.B", LW_LEAKING_NO, "s", LW_REF_LOCAL, "worker", 0},
                {"x.C", LW_LEAKING_YES, "t", 0, NULL, 0}};
    t = make_trace(s, 3);
    lw_trace_propagate(t);
    assert_string_equal(t->elements[0].reason, "B" DOWN " is not leaking and r");
    assert_int_equal(t->elements[0].suspect, 0);
    assert_int_equal(t->elements[1].suspect, 1);
    assert_string_equal(t->elements[2].reason, "t");
    lw_trace_signature(t, sig);
    char expect[41];
    lw_sha1_hex("x.B<Java Local>", strlen("x.B<Java Local>"), expect);
    assert_string_equal(sig, expect);
    free_trace(t);
}

static void test_update_suspects_reports_disagreeing_flags(void **state) {
    (void)state;
    spec s[] = {{"x.A", LW_LEAKING_NO, "r", LW_REF_STATIC_FIELD, "a", 0},
                {"x.B", LW_LEAKING_UNKNOWN, "", LW_REF_INSTANCE_FIELD, "b", 0},
                {"x.C", LW_LEAKING_YES, "l", LW_REF_INSTANCE_FIELD, "c", 0},
                {"x.D", LW_LEAKING_YES, "l", 0, NULL, 0}};
    lw_trace *t = make_trace(s, 4);
    /* all flags 0: A and B should be suspects */
    assert_int_equal(lw_trace_update_suspects(t), 1);
    assert_int_equal(t->elements[0].suspect, 1);
    assert_int_equal(t->elements[1].suspect, 1);
    assert_int_equal(t->elements[2].suspect, 0);
    assert_int_equal(lw_trace_update_suspects(t), 0); /* now consistent */
    t->elements[2].suspect = 1;                          /* a LEAKING origin is never suspect */
    assert_int_equal(lw_trace_update_suspects(t), 1);
    assert_int_equal(t->elements[2].suspect, 0);
    assert_null(NULL);
    lw_trace_update_suspects(NULL);
    lw_trace_propagate(NULL);
    free_trace(t);
}

static void test_sha1_and_pattern_signature_vectors(void **state) {
    (void)state;
    char out[41];
    lw_sha1_hex("abc", 3, out);
    assert_string_equal(out, "a9993e364706816aba3e25717850c26c9cd0d89d");
    lw_sha1_hex("", 0, out);
    assert_string_equal(out, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    lw_sha1_hex("GcRootleak", 10, out);
    assert_string_equal(out, "a49095c3373b957532aff14eb32987bb75ffe9d5");
    const char *v2 = "com.example.leakcanary.LeakingSingletonleakedViewsjava.util.ArrayListelementDatajava.lang.Object[][x]";
    lw_sha1_hex(v2, strlen(v2), out);
    assert_string_equal(out, "ce9dee03a1feb859fd3b3a09ff51e3ddfd8efbc6");
    lw_pattern_signature("instance field android.app.Activity$1#this$0", out);
    assert_string_equal(out, "7573873eb76c9b7e8963efe04194842e7e15c8b9");
    /* A 1,000,000-byte input crosses many blocks (FIPS 180 vector: a million 'a'). */
    char *m = malloc(1000000);
    memset(m, 'a', 1000000);
    lw_sha1_hex(m, 1000000, out);
    free(m);
    assert_string_equal(out, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

/* The SHA extensions' path (where the CPU has them) and the portable one agree at every length
 * around the block and padding boundaries, and at every alignment. */
static void test_sha1_paths_agree(void **state) {
    (void)state;
    uint8_t buf[1100], a[20], b[20];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    for (size_t off = 0; off < 4; off++)
        for (size_t len = 0; len + off <= 1024; len++) {
            lw__sha1(buf + off, len, 0, a);
            lw__sha1(buf + off, len, 1, b);
            if (memcmp(a, b, sizeof a) != 0) fail_msg("SHA-1 paths differ at offset %zu, length %zu", off, len);
        }
    /* FIPS 180 two-block vector (56 bytes: the padding takes a second block) on both paths */
    static const char *v = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    static const uint8_t want[20] = {0x84, 0x98, 0x3e, 0x44, 0x1c, 0x3b, 0xd2, 0x6e, 0xba, 0xae,
                                     0x4a, 0xa1, 0xf9, 0x51, 0x29, 0xe5, 0xe5, 0x46, 0x70, 0xf1};
    for (int portable = 0; portable < 2; portable++) {
        lw__sha1(v, strlen(v), portable, a);
        assert_memory_equal(a, want, sizeof want);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_field_leak_exact_trace_and_signature),
        cmocka_unit_test(test_sha1_paths_agree),
        cmocka_unit_test(test_signature_vector_singleton_arraylist_object_array),
        cmocka_unit_test(test_two_objects_through_same_path_shape_group_into_one_leak),
        cmocka_unit_test(test_different_paths_make_separate_leaks_sorted_by_count),
        cmocka_unit_test(test_inspector_conflicts_on_path_and_on_leaking_object),
        cmocka_unit_test(test_propagate_all_unknown_last_forced_leaking_all_suspect),
        cmocka_unit_test(test_propagate_not_leaking_before_and_leaking_after_with_reasons),
        cmocka_unit_test(test_propagate_conflict_texts),
        cmocka_unit_test(test_propagate_single_element_and_last_reference_from_not_leaking),
        cmocka_unit_test(test_update_suspects_reports_disagreeing_flags),
        cmocka_unit_test(test_sha1_and_pattern_signature_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
