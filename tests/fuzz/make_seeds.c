/* make_seeds.c — writes the synthetic HPROF seeds of tests/fuzz/corpus/hprof with the
 * library's own writer (lw__hprof_writer): both id sizes, JAVA PROFILE 1.0.2 and 1.0.3, a
 * KeyedWeakReference leak through a static field, one through an object array held by a
 * thread's Java local, every root kind, HEAP_DUMP_INFO, PRIMITIVE_ARRAY_NODATA, a plain
 * HEAP_DUMP record, many small segments, and a header-only file.
 *
 *   fuzz_make_seeds OUTDIR        (writes OUTDIR/synthetic-*.hprof; every file < 64 KiB)
 *
 * The output is deterministic; the committed seeds were made with it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hprof_writer.h"

typedef struct gen {
    lw__hprof_writer *w;
    unsigned ids;
    int android;
    uint64_t next_sid;   /* STRING record ids */
    uint64_t next_oid;   /* object ids */
    uint32_t next_class_serial;
} gen;

static void die(const char *what, const lw_error *err) {
    fprintf(stderr, "make_seeds: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

static uint64_t str(gen *g, const char *s) {
    uint64_t id = g->next_sid;
    g->next_sid += 8;
    lw__hprof_writer_string(g->w, id, s, strlen(s));
    return id;
}

static uint64_t new_oid(gen *g) {
    uint64_t id = g->next_oid;
    g->next_oid += 16;
    return id;
}

/* Big-endian field values of an instance, in layout order. */
typedef struct vals {
    uint8_t b[256];
    uint32_t n;
} vals;

static void v_id(vals *v, const gen *g, uint64_t id) {
    lw__put_be_id(v->b + v->n, id, g->ids);
    v->n += g->ids;
}
static void v_u1(vals *v, uint8_t x) { v->b[v->n++] = x; }
static void v_u2(vals *v, uint16_t x) { lw__put_be16(v->b + v->n, x); v->n += 2; }
static void v_u4(vals *v, uint32_t x) { lw__put_be32(v->b + v->n, x); v->n += 4; }
static void v_u8(vals *v, uint64_t x) { lw__put_be64(v->b + v->n, x); v->n += 8; }

enum { MAX_FIELDS = 12 };

typedef struct cls {
    const char *raw_name; /* JVM internal form */
    uint64_t id;
    uint64_t super_id;
    uint32_t instance_size;
    lw__hprof_field_def fields[MAX_FIELDS];
    size_t field_count;
    lw__hprof_field_def statics[MAX_FIELDS];
    size_t static_count;
} cls;

static void load_class(gen *g, cls *c, uint64_t super_id, const char *raw_name) {
    c->raw_name = raw_name;
    c->id = new_oid(g);
    c->super_id = super_id;
    lw__hprof_writer_load_class(g->w, g->next_class_serial++, c->id, 1, str(g, raw_name));
}

static void field(gen *g, cls *c, const char *name, uint8_t type) {
    c->fields[c->field_count++] = (lw__hprof_field_def){str(g, name), type, 0};
    c->instance_size += lw__type_size(type, g->ids);
}

static void static_field(gen *g, cls *c, const char *name, uint8_t type, uint64_t value) {
    c->statics[c->static_count++] = (lw__hprof_field_def){str(g, name), type, value};
}

static void class_dump(gen *g, const cls *c, uint64_t loader) {
    lw__hprof_class_def d = {
        .id = c->id,
        .super_id = c->super_id,
        .loader_id = loader,
        .stack_serial = 1,
        .instance_size = c->instance_size,
        .statics = c->statics,
        .static_count = c->static_count,
        .fields = c->fields,
        .field_count = c->field_count,
    };
    lw__hprof_writer_class_dump(g->w, &d);
}

typedef struct world {
    cls object, string, reference, weakref, kwr, thread, holder, activity, listener, prims, objarr, bytearr,
        chararr, intarr, android_activity, build_version;
} world;

/* A java.lang.String instance with its value array. */
static uint64_t java_string(gen *g, const world *W, const char *text) {
    uint64_t sid = new_oid(g), aid = new_oid(g);
    uint32_t len = (uint32_t)strlen(text);
    vals v = {0};
    if (g->android) { /* value char[], count, hash (the pre-O ART layout) */
        uint8_t chars[128];
        for (uint32_t i = 0; i < len && i < 64; i++) lw__put_be16(chars + 2 * i, (uint8_t)text[i]);
        lw__hprof_writer_primitive_array(g->w, aid, 1, LW_T_CHAR, chars, len);
        v_id(&v, g, aid);
        v_u4(&v, len);
        v_u4(&v, 0);
    } else { /* value byte[], hash, coder = 0 (LATIN1) */
        lw__hprof_writer_primitive_array(g->w, aid, 1, LW_T_BYTE, text, len);
        v_id(&v, g, aid);
        v_u4(&v, 0);
        v_u1(&v, 0);
    }
    lw__hprof_writer_instance(g->w, sid, 1, W->string.id, v.b, v.n);
    return sid;
}

static uint64_t thread(gen *g, const world *W, const char *name) {
    uint64_t id = new_oid(g);
    uint64_t n = java_string(g, W, name);
    vals v = {0};
    v_id(&v, g, n);
    v_u4(&v, 5); /* priority */
    lw__hprof_writer_instance(g->w, id, 1, W->thread.id, v.b, v.n);
    return id;
}

static uint64_t kwr(gen *g, const world *W, uint64_t referent, const char *key, const char *desc, int64_t watch,
                    int64_t retained) {
    uint64_t id = new_oid(g);
    uint64_t k = java_string(g, W, key);
    uint64_t d = java_string(g, W, desc);
    vals v = {0};
    v_id(&v, g, k);              /* KeyedWeakReference.key */
    v_id(&v, g, d);              /* .description */
    v_u8(&v, (uint64_t)watch);   /* .watchUptimeMillis */
    v_u8(&v, (uint64_t)retained);/* .retainedUptimeMillis */
    v_id(&v, g, referent);       /* Reference.referent */
    v_id(&v, g, 0);              /* Reference.queue */
    lw__hprof_writer_instance(g->w, id, 1, W->kwr.id, v.b, v.n);
    return id;
}

typedef struct seed_opts {
    const char *version;
    unsigned ids;
    uint64_t segment_max;
    int all_roots;
    int extras; /* HEAP_DUMP_INFO, PRIMITIVE_ARRAY_NODATA, stack traces, every primitive type */
} seed_opts;

static void write_seed(const char *path, const seed_opts *o) {
    lw_error err;
    gen G = {0}, *g = &G;
    g->ids = o->ids;
    g->android = strcmp(o->version, LW_HPROF_VERSION_ANDROID) == 0;
    g->next_sid = o->ids == 4 ? 0x00100000u : 0x00007f3a10000000ull;
    g->next_oid = o->ids == 4 ? 0x12c00000u : 0x00000007c0000000ull;
    g->next_class_serial = 1;
    if (lw__hprof_writer_open(&g->w, path, o->version, o->ids, 1700000000000ull, o->segment_max, &err) != LW_OK)
        die(path, &err);

    /* STACK_FRAME + STACK_TRACE serial 1 with one frame. */
    if (o->extras) {
        uint8_t frame[64], trace[64];
        uint32_t n = 0;
        lw__put_be_id(frame, 0x1000, o->ids);  n += o->ids;           /* frame id */
        lw__put_be_id(frame + n, str(g, "run"), o->ids); n += o->ids;  /* method name */
        lw__put_be_id(frame + n, str(g, "()V"), o->ids); n += o->ids;  /* signature */
        lw__put_be_id(frame + n, str(g, "Worker.java"), o->ids); n += o->ids;
        lw__put_be32(frame + n, 1); n += 4;   /* class serial */
        lw__put_be32(frame + n, 42); n += 4;  /* line */
        lw__hprof_writer_record(g->w, LW_TAG_STACK_FRAME, frame, n);
        n = 0;
        lw__put_be32(trace, 1); n += 4;   /* serial */
        lw__put_be32(trace + n, 1); n += 4;   /* thread serial */
        lw__put_be32(trace + n, 1); n += 4;   /* frame count */
        lw__put_be_id(trace + n, 0x1000, o->ids); n += o->ids;
        lw__hprof_writer_record(g->w, LW_TAG_STACK_TRACE, trace, n);
    }

    world W;
    memset(&W, 0, sizeof W);
    load_class(g, &W.object, 0, "java/lang/Object");
    load_class(g, &W.string, W.object.id, "java/lang/String");
    load_class(g, &W.reference, W.object.id, "java/lang/ref/Reference");
    load_class(g, &W.weakref, 0, "java/lang/ref/WeakReference");
    W.weakref.super_id = W.reference.id;
    load_class(g, &W.kwr, W.weakref.id, "leakcanary/KeyedWeakReference");
    load_class(g, &W.thread, W.object.id, "java/lang/Thread");
    load_class(g, &W.holder, W.object.id, "com/example/LeakHolder");
    if (g->android) { /* MainActivity extends android.app.Activity, which has mDestroyed */
        load_class(g, &W.android_activity, W.object.id, "android/app/Activity");
        load_class(g, &W.build_version, W.object.id, "android/os/Build$VERSION");
        load_class(g, &W.activity, W.android_activity.id, "com/example/MainActivity");
    } else {
        load_class(g, &W.activity, W.object.id, "com/example/MainActivity");
    }
    load_class(g, &W.listener, W.object.id, "com/example/MainActivity$Listener");
    load_class(g, &W.prims, W.object.id, "com/example/AllTypes");
    load_class(g, &W.objarr, W.object.id, "[Ljava/lang/Object;");
    load_class(g, &W.bytearr, W.object.id, "[B");
    load_class(g, &W.chararr, W.object.id, "[C");
    load_class(g, &W.intarr, W.object.id, "[I");

    if (g->android) {
        field(g, &W.string, "value", LW_T_OBJECT);
        field(g, &W.string, "count", LW_T_INT);
        field(g, &W.string, "hash", LW_T_INT);
    } else {
        field(g, &W.string, "value", LW_T_OBJECT);
        field(g, &W.string, "hash", LW_T_INT);
        field(g, &W.string, "coder", LW_T_BYTE);
    }
    field(g, &W.reference, "referent", LW_T_OBJECT);
    field(g, &W.reference, "queue", LW_T_OBJECT);
    field(g, &W.kwr, "key", LW_T_OBJECT);
    field(g, &W.kwr, "description", LW_T_OBJECT);
    field(g, &W.kwr, "watchUptimeMillis", LW_T_LONG);
    field(g, &W.kwr, "retainedUptimeMillis", LW_T_LONG);
    static_field(g, &W.kwr, "heapDumpUptimeMillis", LW_T_LONG, 20000);
    field(g, &W.thread, "name", LW_T_OBJECT);
    field(g, &W.thread, "priority", LW_T_INT);
    field(g, &W.activity, "mListeners", LW_T_OBJECT);
    /* Same instance bytes either way: own fields first, then the super-class's. */
    field(g, g->android ? &W.android_activity : &W.activity, "mDestroyed", LW_T_BOOLEAN);
    if (g->android) static_field(g, &W.build_version, "SDK_INT", LW_T_INT, 23);
    field(g, &W.listener, "this$0", LW_T_OBJECT);
    if (o->extras) {
        static const uint8_t types[] = {LW_T_BOOLEAN, LW_T_CHAR, LW_T_FLOAT, LW_T_DOUBLE, LW_T_BYTE,
                                        LW_T_SHORT, LW_T_INT, LW_T_LONG, LW_T_OBJECT};
        static const char *const names[] = {"z", "c", "f", "d", "b", "s", "i", "j", "l"};
        for (size_t i = 0; i < sizeof types; i++) {
            char sname[8];
            snprintf(sname, sizeof sname, "S%s", names[i]);
            field(g, &W.prims, names[i], types[i]);
            static_field(g, &W.prims, sname, types[i], types[i] == LW_T_OBJECT ? 0 : 0x41);
        }
    }

    /* ---- heap dump ---- */
    uint64_t app_loader = 0;
    if (o->extras) lw__hprof_writer_heap_dump_info(g->w, 'Z', str(g, "zygote"));
    /* Object ids the classes' statics need are chosen before the class dumps. */
    uint64_t leaked1 = new_oid(g), leaked2 = new_oid(g), listener = new_oid(g), arr = new_oid(g);
    static_field(g, &W.holder, "sLeaked", LW_T_OBJECT, leaked1);
    static_field(g, &W.holder, "sCount", LW_T_INT, 2);
    cls *all[] = {&W.object, &W.string, &W.reference, &W.weakref, &W.kwr, &W.thread, &W.holder,
                  &W.activity, &W.listener, &W.prims, &W.objarr, &W.bytearr, &W.chararr, &W.intarr,
                  &W.android_activity, &W.build_version};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]->id) class_dump(g, all[i], app_loader);
    if (o->extras) lw__hprof_writer_heap_dump_info(g->w, 'A', str(g, "app"));

    /* Leak 1: LeakHolder.sLeaked -> MainActivity (destroyed), watched by key-1. */
    vals v = {0};
    v_id(&v, g, 0);
    v_u1(&v, 1);
    lw__hprof_writer_instance(g->w, leaked1, 1, W.activity.id, v.b, v.n);
    uint64_t k1 = kwr(g, &W, leaked1, "key-1", "com.example.MainActivity received Activity#onDestroy() callback",
                      1000, 6000);

    /* Leak 2: thread "worker" -> (Java local) Object[] -> [1] Listener -> this$0 -> MainActivity. */
    uint64_t worker = thread(g, &W, "worker");
    uint64_t mainthr = thread(g, &W, "main");
    uint64_t label = java_string(g, &W, "hello");
    uint64_t elems[4] = {0, listener, label, 0};
    lw__hprof_writer_object_array(g->w, arr, 1, W.objarr.id, elems, 4);
    v.n = 0;
    v_id(&v, g, leaked2);
    lw__hprof_writer_instance(g->w, listener, 1, W.listener.id, v.b, v.n);
    v.n = 0;
    v_id(&v, g, arr);
    v_u1(&v, 1);
    lw__hprof_writer_instance(g->w, leaked2, 1, W.activity.id, v.b, v.n);
    uint64_t k2 = kwr(g, &W, leaked2, "key-2", "com.example.MainActivity received Activity#onDestroy() callback",
                      2000, 7000);
    /* Watched but not retained yet (retainedUptimeMillis = -1): not a leak without a key. */
    uint64_t young = new_oid(g);
    lw__hprof_writer_instance(g->w, young, 1, W.object.id, NULL, 0);
    uint64_t k3 = kwr(g, &W, young, "key-3", "not yet retained", 3000, -1);

    /* Primitive arrays of every type, and one without data. */
    uint64_t ints[3] = {0};
    if (o->extras) {
        static const uint8_t types[] = {LW_T_BOOLEAN, LW_T_CHAR, LW_T_FLOAT, LW_T_DOUBLE,
                                        LW_T_BYTE, LW_T_SHORT, LW_T_INT, LW_T_LONG};
        for (size_t i = 0; i < sizeof types; i++) lw__hprof_writer_primitive_array(g->w, new_oid(g), 1, types[i], NULL, 3);
        uint8_t raw[32];
        uint64_t nodata = new_oid(g);
        size_t n = 0;
        raw[n++] = LW_SUB_PRIMITIVE_ARRAY_NODATA;
        lw__put_be_id(raw + n, nodata, o->ids); n += o->ids;
        lw__put_be32(raw + n, 1); n += 4;       /* stack serial */
        lw__put_be32(raw + n, 1000); n += 4;    /* count */
        raw[n++] = LW_T_INT;
        lw__hprof_writer_subrecord_raw(g->w, raw, n);
        ints[0] = nodata;
        /* A String whose value has no data. */
        uint64_t s = new_oid(g);
        v.n = 0;
        v_id(&v, g, nodata);
        v_u4(&v, 3);
        if (g->android) v_u4(&v, 0); else v_u1(&v, 0);
        lw__hprof_writer_instance(g->w, s, 1, W.string.id, v.b, v.n);
        /* An AllTypes instance. */
        v.n = 0;
        v_u1(&v, 1); v_u2(&v, 'x'); v_u4(&v, 0x3f800000u); v_u8(&v, 0x3ff0000000000000ull);
        v_u1(&v, 0x7f); v_u2(&v, 0x7fff); v_u4(&v, 0x7fffffff); v_u8(&v, 0x7fffffffffffffffull); v_id(&v, g, s);
        ints[1] = new_oid(g);
        lw__hprof_writer_instance(g->w, ints[1], 1, W.prims.id, v.b, v.n);
    }

    /* Roots. */
    lw__hprof_writer_root(g->w, LW_SUB_ROOT_STICKY_CLASS, W.holder.id, 0, 0);
    lw__hprof_writer_root(g->w, LW_SUB_ROOT_STICKY_CLASS, W.kwr.id, 0, 0);
    lw__hprof_writer_root(g->w, LW_SUB_ROOT_THREAD_OBJECT, worker, 1, 1);
    lw__hprof_writer_root(g->w, LW_SUB_ROOT_THREAD_OBJECT, mainthr, 2, 1);
    lw__hprof_writer_root(g->w, LW_SUB_ROOT_JAVA_FRAME, arr, 1, 0);
    if (o->all_roots) {
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_UNKNOWN, k3, 0, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_JNI_GLOBAL, k1, 0x5000, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_JNI_LOCAL, k2, 1, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_NATIVE_STACK, label, 1, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_THREAD_BLOCK, mainthr, 2, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_MONITOR_USED, W.string.id, 0, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_INTERNED_STRING, label, 0, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_FINALIZING, young, 0, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_DEBUGGER, W.thread.id, 0, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_REFERENCE_CLEANUP, k3, 0, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_VM_INTERNAL, W.object.id, 0, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_JNI_MONITOR, mainthr, 2, 3);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_UNREACHABLE, ints[1] ? ints[1] : young, 0, 0);
        lw__hprof_writer_root(g->w, LW_SUB_ROOT_JNI_GLOBAL, 0xdead0, 0, 0); /* points nowhere */
    }
    lw__hprof_writer_end_heap_dump(g->w);
    if (lw__hprof_writer_close(g->w, &err) != LW_OK) die(path, &err);
}

/* A file with one plain HEAP_DUMP (0x0C) record, other top-level tags, and no segments. */
static void write_plain_heap_dump(const char *path, unsigned ids) {
    lw_error err;
    lw__hprof_writer *w;
    if (lw__hprof_writer_open(&w, path, LW_HPROF_VERSION_JVM, ids, 0, 0, &err) != LW_OK) die(path, &err);
    uint8_t body[128];
    size_t n = 0;
    lw__hprof_writer_string(w, 0x100, "java/lang/Object", 16);
    lw__hprof_writer_load_class(w, 1, 0x2000, 0, 0x100);
    lw__hprof_writer_record(w, LW_TAG_CONTROL_SETTINGS, "\0\0\0\2\0\4", 6);
    lw__hprof_writer_record(w, LW_TAG_HEAP_SUMMARY, "\0\0\0\1\0\0\0\2\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0\4", 24);
    /* CLASS_DUMP of java.lang.Object, an instance, a STICKY_CLASS root. */
    body[n++] = LW_SUB_CLASS_DUMP;
    lw__put_be_id(body + n, 0x2000, ids); n += ids;
    lw__put_be32(body + n, 0); n += 4;
    memset(body + n, 0, 6 * (size_t)ids); n += 6 * (size_t)ids;
    lw__put_be32(body + n, 0); n += 4;   /* instance size */
    lw__put_be16(body + n, 0); n += 2;   /* constant pool */
    lw__put_be16(body + n, 0); n += 2;   /* statics */
    lw__put_be16(body + n, 0); n += 2;   /* fields */
    body[n++] = LW_SUB_INSTANCE_DUMP;
    lw__put_be_id(body + n, 0x3000, ids); n += ids;
    lw__put_be32(body + n, 0); n += 4;
    lw__put_be_id(body + n, 0x2000, ids); n += ids;
    lw__put_be32(body + n, 0); n += 4;
    body[n++] = LW_SUB_ROOT_STICKY_CLASS;
    lw__put_be_id(body + n, 0x2000, ids); n += ids;
    body[n++] = LW_SUB_ROOT_UNKNOWN;
    lw__put_be_id(body + n, 0x3000, ids); n += ids;
    lw__hprof_writer_record(w, LW_TAG_HEAP_DUMP, body, (uint32_t)n);
    lw__hprof_writer_record(w, LW_TAG_HEAP_DUMP_END, NULL, 0);
    if (lw__hprof_writer_close(w, &err) != LW_OK) die(path, &err);
}

static void write_header_only(const char *path) {
    lw_error err;
    lw__hprof_writer *w;
    if (lw__hprof_writer_open(&w, path, LW_HPROF_VERSION_JVM, 8, 0, 0, &err) != LW_OK) die(path, &err);
    if (lw__hprof_writer_close(w, &err) != LW_OK) die(path, &err);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    static const struct {
        const char *name;
        seed_opts o;
    } seeds[] = {
        {"synthetic-jvm-id8.hprof", {LW_HPROF_VERSION_JVM, 8, 0, 1, 1}},
        {"synthetic-jvm-id4.hprof", {LW_HPROF_VERSION_JVM, 4, 0, 1, 0}},
        {"synthetic-android-id4.hprof", {LW_HPROF_VERSION_ANDROID, 4, 0, 1, 1}},
        {"synthetic-android-id8.hprof", {LW_HPROF_VERSION_ANDROID, 8, 0, 0, 1}},
        {"synthetic-segments-id4.hprof", {LW_HPROF_VERSION_JVM, 4, 160, 1, 1}},
        {"synthetic-leaks-only-id8.hprof", {LW_HPROF_VERSION_JVM, 8, 0, 0, 0}},
    };
    char path[4096];
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
        snprintf(path, sizeof path, "%s/%s", argv[1], seeds[i].name);
        write_seed(path, &seeds[i].o);
    }
    snprintf(path, sizeof path, "%s/synthetic-heap-dump-record-id4.hprof", argv[1]);
    write_plain_heap_dump(path, 4);
    snprintf(path, sizeof path, "%s/synthetic-heap-dump-record-id8.hprof", argv[1]);
    write_plain_heap_dump(path, 8);
    snprintf(path, sizeof path, "%s/synthetic-header-only.hprof", argv[1]);
    write_header_only(path);
    return 0;
}
