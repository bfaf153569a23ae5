/* test_path_finder.c — pass 2: shortest strong paths, array slots, cycles, deep chains,
 * references never followed (weak/soft/phantom), low-priority library-leak references and
 * Java locals, GC root kinds. */
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

static const lw_trace *only_trace(const lw_leak_report *r) {
    assert_int_equal(r->leak_count, 1);
    assert_true(r->leaks[0].trace_count >= 1);
    return &r->leaks[0].traces[0];
}

static void test_array_element_step_names_real_slot_index(void **state) {
    (void)state;
    for (unsigned ids = 4; ids <= 8; ids += 4) {
        hb *b = hb_new(HB_JVM, ids);
        uint64_t holder = hb_class(b, "com.example.Holder", NULL, NULL, "items:O");
        hb_class(b, "com.example.Item", NULL, NULL, NULL);
        uint64_t arr = hb_object_array(b, "[Lcom/example/Item;", NULL, 40);
        uint64_t other = hb_instance(b, "com.example.Item");
        uint64_t leak = hb_instance(b, "com.example.Item");
        hb_array_set(b, arr, 3, other);
        hb_array_set(b, arr, 37, leak);
        hb_set_static(b, holder, "items", arr);
        hb_watch(b, leak, "k", "d", 1);
        lw_leak_report *r = hb_analyze_dump(b, NULL);
        const lw_trace *t = only_trace(r);
        assert_int_equal(t->element_count, 3);
        assert_string_equal(t->elements[1].class_name, "com.example.Item[]");
        assert_int_equal(t->elements[1].object_kind, LW_OBJECT_ARRAY);
        assert_int_equal(t->elements[1].ref_kind, LW_REF_ARRAY_ELEMENT);
        assert_int_equal(t->elements[1].ref_index, 37);
        assert_null(t->elements[1].ref_name);
        char expect[41];
        const char *c = "com.example.Holderitemscom.example.Item[][x]";
        lw_sha1_hex(c, strlen(c), expect);
        assert_string_equal(r->leaks[0].signature, expect);
        lw_leak_report_free(r);
        hb_free(b);
    }
}

static void test_shortest_path_wins_over_longer_one(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    uint64_t a = hb_class(b, "A", NULL, NULL, "long:O");
    uint64_t z = hb_class(b, "Z", NULL, NULL, "short:O");
    hb_class(b, "Node", NULL, "next:O", NULL);
    uint64_t n1 = hb_instance(b, "Node"), n2 = hb_instance(b, "Node"), n3 = hb_instance(b, "Node");
    uint64_t leak = hb_instance(b, "Node");
    hb_set(b, n1, "next", n2);
    hb_set(b, n2, "next", n3);
    hb_set(b, n3, "next", leak);
    hb_set_static(b, a, "long", n1);  /* A sorts first among the class roots */
    hb_set_static(b, z, "short", leak);
    hb_watch(b, leak, "k", "d", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    const lw_trace *t = only_trace(r);
    assert_int_equal(t->element_count, 2);
    assert_string_equal(t->elements[0].class_name, "Z");
    assert_string_equal(t->elements[0].ref_name, "short");
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_cycles_and_self_references_terminate(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 4);
    uint64_t h = hb_class(b, "Holder", NULL, NULL, "a:O");
    hb_class(b, "Pair", NULL, "other:O self:O payload:O", NULL);
    uint64_t pa = hb_instance(b, "Pair"), pb = hb_instance(b, "Pair");
    hb_set(b, pa, "other", pb);
    hb_set(b, pb, "other", pa);
    hb_set(b, pa, "self", pa);
    hb_set(b, pb, "self", pb);
    uint64_t leak = hb_instance(b, "Pair");
    hb_set(b, leak, "self", leak);
    hb_set(b, leak, "other", pa);
    hb_set(b, pb, "payload", leak);
    hb_set_static(b, h, "a", pa);
    /* an unreachable cycle holding a second watched object */
    uint64_t ua = hb_instance(b, "Pair"), ub = hb_instance(b, "Pair"), lost = hb_instance(b, "Pair");
    hb_set(b, ua, "other", ub);
    hb_set(b, ub, "other", ua);
    hb_set(b, ub, "payload", lost);
    hb_watch(b, leak, "k1", "reachable", 1);
    hb_watch(b, lost, "k2", "unreachable", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    const lw_trace *t = only_trace(r);
    assert_int_equal(r->leaks[0].count, 1);
    assert_int_equal(t->element_count, 4); /* Holder -> pa -> pb -> leak */
    assert_string_equal(t->elements[1].ref_name, "other");
    assert_string_equal(t->elements[2].ref_name, "payload");
    assert_string_equal(t->elements[3].key, "k1");
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_deep_chain_of_100000_objects(void **state) {
    (void)state;
    enum { N = 100000 };
    hb *b = hb_new(HB_JVM, 4);
    uint64_t h = hb_class(b, "Holder", NULL, NULL, "head:O");
    hb_class(b, "Link", NULL, "next:O", NULL);
    uint64_t first = hb_instance(b, "Link"), prev = first;
    for (int i = 1; i < N; i++) {
        uint64_t n = hb_instance(b, "Link");
        hb_set(b, prev, "next", n);
        prev = n;
    }
    hb_class(b, "Leaked", NULL, NULL, NULL);
    uint64_t leak = hb_instance(b, "Leaked");
    hb_set(b, prev, "next", leak);
    hb_set_static(b, h, "head", first);
    hb_watch(b, leak, "deep", "deep", 1);
    hb_set_reverse_objects(b, 1); /* ids arrive descending: the index must sort them */
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    const lw_trace *t = only_trace(r);
    assert_int_equal(t->element_count, N + 2);
    assert_string_equal(t->elements[0].class_name, "Holder");
    assert_string_equal(t->elements[N].class_name, "Link");
    assert_string_equal(t->elements[N].ref_name, "next");
    assert_string_equal(t->elements[N + 1].class_name, "Leaked");
    assert_int_equal(t->elements[N].suspect, 1);
    lw_leak_report_free(r);
    hb_free(b);
}

/* The watched object is reachable only through `ref_class`'s referent. */
static void weak_only(const char *ref_class, const char *super) {
    hb *b = hb_new(HB_JVM, 8);
    if (super) hb_class(b, ref_class, super, "extra:I", NULL);
    uint64_t h = hb_class(b, "Cache", NULL, NULL, "ref:O");
    hb_class(b, "Big", NULL, NULL, NULL);
    uint64_t obj = hb_instance(b, "Big");
    uint64_t ref = hb_instance(b, ref_class);
    hb_set(b, ref, "referent", obj);
    hb_set_static(b, h, "ref", ref);
    hb_watch(b, obj, "weak", "weakly reachable", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    assert_int_equal(r->leak_count, 0);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_weak_soft_phantom_referents_are_not_followed(void **state) {
    (void)state;
    weak_only("java.lang.ref.WeakReference", NULL);
    weak_only("java.lang.ref.SoftReference", NULL);
    weak_only("java.lang.ref.PhantomReference", NULL);
    weak_only("com.example.MyWeak", "java.lang.ref.WeakReference");
    weak_only("com.example.MySoft", "java.lang.ref.SoftReference");
    weak_only("com.example.MyPhantom", "java.lang.ref.PhantomReference");
    weak_only("com.example.MyRef", "java.lang.ref.Reference");
}

static void test_strong_path_found_beside_weak_one(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    uint64_t h = hb_class(b, "Cache", NULL, NULL, "ref:O");
    uint64_t s = hb_class(b, "Strong", NULL, NULL, "holder:O");
    hb_class(b, "Box", NULL, "v:O", NULL);
    hb_class(b, "Big", NULL, NULL, NULL);
    uint64_t obj = hb_instance(b, "Big");
    uint64_t ref = hb_instance(b, "java.lang.ref.WeakReference");
    hb_set(b, ref, "referent", obj);
    hb_set_static(b, h, "ref", ref);
    uint64_t box = hb_instance(b, "Box");
    hb_set(b, box, "v", obj);
    hb_set_static(b, s, "holder", box);
    hb_watch(b, obj, "k", "d", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    const lw_trace *t = only_trace(r);
    assert_int_equal(t->element_count, 3);
    assert_string_equal(t->elements[0].class_name, "Strong");
    assert_string_equal(t->elements[1].ref_name, "v");
    lw_leak_report_free(r);
    hb_free(b);
}

/* Android: MainActivity held by android.app.Activity$1#this$0 (a library-leak pattern) and,
 * with `normal_path`, also by a longer normal path. sdk < 0: no Build$VERSION class. */
static hb *activity_dump(int sdk, int normal_path) {
    hb *b = hb_new(HB_ANDROID, 4);
    hb_class(b, "android.app.Activity", NULL, "mDestroyed:Z", NULL);
    hb_class(b, "com.example.MainActivity", "android.app.Activity", NULL, NULL);
    hb_class(b, "android.app.Activity$1", NULL, "this$0:O", NULL);
    uint64_t g = hb_class(b, "com.example.Global", NULL, NULL, "callback:O");
    if (sdk >= 0) {
        uint64_t v = hb_class(b, "android.os.Build$VERSION", NULL, NULL, "SDK_INT:I");
        hb_set_static(b, v, "SDK_INT", (uint64_t)sdk);
    }
    uint64_t act = hb_instance(b, "com.example.MainActivity");
    hb_set(b, act, "mDestroyed", 1);
    uint64_t cb = hb_instance(b, "android.app.Activity$1");
    hb_set(b, cb, "this$0", act);
    hb_set_static(b, g, "callback", cb);
    if (normal_path) {
        uint64_t o = hb_class(b, "com.example.Other", NULL, NULL, "a:O");
        hb_class(b, "com.example.Foo", NULL, "bar:O", NULL);
        hb_class(b, "com.example.Bar", NULL, "activity:O", NULL);
        uint64_t foo = hb_instance(b, "com.example.Foo"), bar = hb_instance(b, "com.example.Bar");
        hb_set(b, foo, "bar", bar);
        hb_set(b, bar, "activity", act);
        hb_set_static(b, o, "a", foo);
    }
    hb_watch(b, act, "act-key", "com.example.MainActivity received Activity#onDestroy() callback", 1);
    return b;
}

static void check_library_leak(lw_leak_report *r) {
    const lw_trace *t = only_trace(r);
    const lw_leak *l = &r->leaks[0];
    assert_int_equal(l->library, 1);
    assert_non_null(l->library_pattern);
    assert_string_equal(l->library_pattern, "instance field android.app.Activity$1#this$0");
    assert_string_equal(l->signature, "7573873eb76c9b7e8963efe04194842e7e15c8b9");
    assert_non_null(l->library_description);
    assert_int_equal(t->element_count, 3);
    assert_string_equal(t->elements[1].class_name, "android.app.Activity$1");
    assert_string_equal(t->elements[1].ref_name, "this$0");
    int labelled = 0;
    for (size_t i = 0; i < t->elements[1].label_count; i++)
        labelled |= strcmp(t->elements[1].labels[i], "Library leak match: instance field android.app.Activity$1#this$0") == 0;
    assert_true(labelled);
    assert_int_equal(t->elements[2].leaking, LW_LEAKING_YES);
    assert_string_equal(t->elements[2].reason,
                        "ObjectWatcher was watching this because com.example.MainActivity received "
                        "Activity#onDestroy() callback and Activity#mDestroyed is true");
}

static void test_library_leak_only_path_is_library_kind_unknown_sdk(void **state) {
    (void)state;
    hb *b = activity_dump(-1, 0);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    check_library_leak(r);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_library_leak_only_path_is_library_kind_sdk_29(void **state) {
    (void)state;
    hb *b = activity_dump(29, 0);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    check_library_leak(r);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_library_pattern_outside_its_sdk_range_is_an_application_leak(void **state) {
    (void)state;
    hb *b = activity_dump(28, 0);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    only_trace(r);
    assert_int_equal(r->leaks[0].library, 0);
    assert_null(r->leaks[0].library_pattern);
    char expect[41];
    const char *c = "com.example.Globalcallbackandroid.app.Activity$1this$0";
    lw_sha1_hex(c, strlen(c), expect);
    assert_string_equal(r->leaks[0].signature, expect);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_library_pattern_does_not_apply_to_jvm_dumps(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    hb_class(b, "android.app.Activity$1", NULL, "this$0:O", NULL);
    uint64_t g = hb_class(b, "Global", NULL, NULL, "callback:O");
    hb_class(b, "Screen", NULL, NULL, NULL);
    uint64_t s = hb_instance(b, "Screen"), cb = hb_instance(b, "android.app.Activity$1");
    hb_set(b, cb, "this$0", s);
    hb_set_static(b, g, "callback", cb);
    hb_watch(b, s, "k", "d", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    only_trace(r);
    assert_int_equal(r->leaks[0].library, 0);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_normal_longer_path_beats_library_leak_path(void **state) {
    (void)state;
    for (int sdk = -1; sdk <= 29; sdk += 30) {
        hb *b = activity_dump(sdk, 1);
        lw_leak_report *r = hb_analyze_dump(b, NULL);
        const lw_trace *t = only_trace(r);
        assert_int_equal(r->leaks[0].library, 0);
        assert_null(r->leaks[0].library_pattern);
        assert_int_equal(t->element_count, 4);
        assert_string_equal(t->elements[0].class_name, "com.example.Other");
        assert_string_equal(t->elements[1].class_name, "com.example.Foo");
        assert_string_equal(t->elements[2].class_name, "com.example.Bar");
        assert_string_equal(t->elements[2].ref_name, "activity");
        lw_leak_report_free(r);
        hb_free(b);
    }
}

/* A Java local: frame root of a thread whose THREAD_OBJECT root has the same serial. */
static hb *local_dump(const char *version, const char *thread_name, int other_path) {
    hb *b = hb_new(version, 8);
    hb_class(b, "com.example.Task", NULL, NULL, NULL);
    uint64_t task = hb_instance(b, "com.example.Task");
    hb_thread(b, thread_name, 7);
    hb_root(b, LW_SUB_ROOT_JAVA_FRAME, task, 7, 2);
    if (other_path) {
        uint64_t reg = hb_class(b, "com.example.Registry", NULL, NULL, "first:O");
        hb_class(b, "com.example.Entry", NULL, "task:O", NULL);
        uint64_t e = hb_instance(b, "com.example.Entry");
        hb_set(b, e, "task", task);
        hb_set_static(b, reg, "first", e);
    }
    hb_watch(b, task, "task-key", "Task done", 1);
    return b;
}

static void test_java_local_used_when_no_other_path(void **state) {
    (void)state;
    hb *b = local_dump(HB_JVM, "worker-1", 0);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    const lw_trace *t = only_trace(r);
    assert_int_equal(r->leaks[0].library, 0); /* a local is an application leak found late */
    assert_string_equal(t->gc_root, "THREAD_OBJECT");
    assert_int_equal(t->element_count, 2);
    assert_string_equal(t->elements[0].class_name, "java.lang.Thread");
    assert_int_equal(t->elements[0].ref_kind, LW_REF_LOCAL);
    assert_string_equal(t->elements[0].ref_name, "worker-1");
    assert_int_equal(t->elements[0].suspect, 1);
    int labelled = 0;
    for (size_t i = 0; i < t->elements[0].label_count; i++)
        labelled |= strcmp(t->elements[0].labels[i], "Thread name: 'worker-1'") == 0;
    assert_true(labelled);
    assert_string_equal(r->leaks[0].signature, "42139447c04d40b15b813cf8ab7d34fe2903ff27"); /* java.lang.Thread<Java Local> */
    assert_string_equal(r->leaks[0].short_description, "Thread.<Java Local>");
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_java_local_loses_to_any_other_path(void **state) {
    (void)state;
    hb *b = local_dump(HB_JVM, "worker-1", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    const lw_trace *t = only_trace(r);
    assert_string_equal(t->gc_root, "STICKY_CLASS");
    assert_int_equal(t->element_count, 3);
    assert_string_equal(t->elements[0].class_name, "com.example.Registry");
    for (size_t i = 0; i + 1 < t->element_count; i++) assert_int_not_equal(t->elements[i].ref_kind, LW_REF_LOCAL);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_java_frame_root_without_thread_is_a_low_priority_root(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 4);
    hb_class(b, "Task", NULL, NULL, NULL);
    uint64_t task = hb_instance(b, "Task");
    hb_root(b, LW_SUB_ROOT_JAVA_FRAME, task, 99, 0); /* no thread has serial 99 */
    hb_watch(b, task, "k", "d", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    const lw_trace *t = only_trace(r);
    assert_string_equal(t->gc_root, "JAVA_FRAME");
    assert_int_equal(t->element_count, 1);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_android_main_thread_locals_are_ignored(void **state) {
    (void)state;
    hb *b = local_dump(HB_ANDROID, "main", 0);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    assert_int_equal(r->leak_count, 0);
    lw_leak_report_free(r);
    hb_free(b);
}

static void test_every_followed_root_kind_names_the_trace_root(void **state) {
    (void)state;
    static const struct {
        uint8_t tag;
        const char *name;
    } kinds[] = {
        {LW_SUB_ROOT_JNI_GLOBAL, "JNI_GLOBAL"},     {LW_SUB_ROOT_JNI_LOCAL, "JNI_LOCAL"},
        {LW_SUB_ROOT_NATIVE_STACK, "NATIVE_STACK"}, {LW_SUB_ROOT_STICKY_CLASS, "STICKY_CLASS"},
        {LW_SUB_ROOT_THREAD_BLOCK, "THREAD_BLOCK"}, {LW_SUB_ROOT_MONITOR_USED, "MONITOR_USED"},
        {LW_SUB_ROOT_THREAD_OBJECT, "THREAD_OBJECT"}, {LW_SUB_ROOT_JNI_MONITOR, "JNI_MONITOR"},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (unsigned ids = 4; ids <= 8; ids += 4) {
            hb *b = hb_new(HB_ANDROID, ids);
            hb_class(b, "Holder", NULL, "x:O", NULL);
            hb_class(b, "Leak", NULL, NULL, NULL);
            uint64_t h = hb_instance(b, "Holder"), l = hb_instance(b, "Leak");
            hb_set(b, h, "x", l);
            hb_root(b, kinds[k].tag, h, 1, 2);
            hb_watch(b, l, "k", "d", 1);
            lw_leak_report *r = hb_analyze_dump(b, NULL);
            const lw_trace *t = only_trace(r);
            assert_string_equal(t->gc_root, kinds[k].name);
            assert_int_equal(t->element_count, 2);
            assert_string_equal(t->elements[0].class_name, "Holder");
            assert_string_equal(t->elements[0].ref_name, "x");
            lw_leak_report_free(r);
            hb_free(b);
        }
}

/* LeakCanary's default indexed roots leave out VM-internal, interned-string, finalizing,
 * debugger, reference-cleanup, unreachable and unknown roots: analysis must still succeed. */
static void test_roots_of_other_kinds_do_not_break_analysis(void **state) {
    (void)state;
    static const uint8_t tags[] = {LW_SUB_ROOT_UNKNOWN,        LW_SUB_ROOT_INTERNED_STRING, LW_SUB_ROOT_FINALIZING,
                                   LW_SUB_ROOT_DEBUGGER,       LW_SUB_ROOT_REFERENCE_CLEANUP, LW_SUB_ROOT_VM_INTERNAL,
                                   LW_SUB_ROOT_UNREACHABLE};
    for (size_t k = 0; k < sizeof tags; k++) {
        hb *b = hb_new(HB_ANDROID, 4);
        hb_class(b, "Leak", NULL, NULL, NULL);
        uint64_t l = hb_instance(b, "Leak");
        hb_root(b, tags[k], l, 0, 0);
        hb_watch(b, l, "k", "d", 1);
        lw_leak_report *r = hb_analyze_dump(b, NULL);
        assert_true(r->leak_count <= 1);
        lw_leak_report_free(r);
        hb_free(b);
    }
}

static void test_string_value_and_boxed_array_elements_are_not_followed(void **state) {
    (void)state;
    hb *b = hb_new(HB_JVM, 8);
    hb_class(b, "java.lang.Integer", NULL, "value:I", NULL);
    uint64_t h = hb_class(b, "Holder", NULL, NULL, "boxes:O name:O");
    uint64_t boxes = hb_object_array(b, "[Ljava/lang/Integer;", NULL, 2);
    uint64_t i1 = hb_instance(b, "java.lang.Integer");
    hb_array_set(b, boxes, 1, i1);
    uint64_t name = hb_jstring(b, "hello");
    hb_set_static(b, h, "boxes", boxes);
    hb_set_static(b, h, "name", name);
    hb_watch(b, i1, "k1", "boxed", 1);
    lw_leak_report *r = hb_analyze_dump(b, NULL);
    assert_int_equal(r->leak_count, 0); /* the Integer is only reachable through Integer[] */
    lw_leak_report_free(r);
    hb_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_array_element_step_names_real_slot_index),
        cmocka_unit_test(test_shortest_path_wins_over_longer_one),
        cmocka_unit_test(test_cycles_and_self_references_terminate),
        cmocka_unit_test(test_deep_chain_of_100000_objects),
        cmocka_unit_test(test_weak_soft_phantom_referents_are_not_followed),
        cmocka_unit_test(test_strong_path_found_beside_weak_one),
        cmocka_unit_test(test_library_leak_only_path_is_library_kind_unknown_sdk),
        cmocka_unit_test(test_library_leak_only_path_is_library_kind_sdk_29),
        cmocka_unit_test(test_library_pattern_outside_its_sdk_range_is_an_application_leak),
        cmocka_unit_test(test_library_pattern_does_not_apply_to_jvm_dumps),
        cmocka_unit_test(test_normal_longer_path_beats_library_leak_path),
        cmocka_unit_test(test_java_local_used_when_no_other_path),
        cmocka_unit_test(test_java_local_loses_to_any_other_path),
        cmocka_unit_test(test_java_frame_root_without_thread_is_a_low_priority_root),
        cmocka_unit_test(test_android_main_thread_locals_are_ignored),
        cmocka_unit_test(test_every_followed_root_kind_names_the_trace_root),
        cmocka_unit_test(test_roots_of_other_kinds_do_not_break_analysis),
        cmocka_unit_test(test_string_value_and_boxed_array_elements_are_not_followed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
