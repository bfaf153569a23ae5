/* gen_heap.c — writes a pinned, HotSpot-like synthetic heap dump for the analyzer benchmark.
 *
 * gen_heap OUT.hprof [--objects N] [--seed S]
 *
 * Deterministic: the same (N, seed, GEN_VERSION) gives the same bytes. Object ids are heap
 * addresses (8-byte aligned, densely packed, in 32 MiB regions separated by gaps of 1-6 MiB),
 * emitted in ascending order after the CLASS_DUMPs, with the GC roots last, as HotSpot does.
 * The object graph is built one "cluster" (a data structure: a HashMap, an ArrayList, a
 * linked list, a tree of app objects, a buffer, a list of weak references, garbage) at a
 * time, in memory, then streamed out; only cluster-sized arrays and a 64 K reservoir of
 * earlier ids are kept. Class statics point forward to objects written later, so the
 * generator runs its object pass twice: a dry pass records those ids, the second writes.
 *
 * One known leak: com.example.bench.LeakRegistry.listeners -> ArrayList.elementData ->
 * Object[3] -> com.example.bench.LeakedScreen, watched by a retained
 * io.leakwatch.KeyedWeakReference with key LEAK_KEY. Names, classes and records go through
 * hprof_out.h, which gen_sdk_heap shares. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common.h"
#include "hprof_format.h"
#include "bench_rng.h"
#include "hprof_out.h"

#define GEN_VERSION "gen_heap 1"
#define LEAK_KEY "b3c8a7e0-0000-4000-8000-000000000001"
#define HEAP_BASE 0x700000000ull
#define REGION_BYTES (32ull << 20)
#define APP_CLASSES 2000
#define THREADS 20
#define RESERVOIR 65536
#define PENDING_MAX 1024
#define BYTES_PER_OBJECT 100 /* file bytes per object the buffer controller aims at */

/* ---- PRNG (bench_rng.h) ------------------------------------------------------------------ */

static uint64_t rrange(rng *r, uint64_t lo, uint64_t hi) { return lo + rbelow(r, hi - lo + 1); } /* [lo, hi] */

static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "gen_heap: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(1);
}
static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die("out of memory%s", "");
    return q;
}
static uint64_t align8(uint64_t v) { return (v + 7) & ~7ull; }

/* ---- names and classes (hprof_out) -------------------------------------------------------- */

static hprof_out *g_out;

/* The generator stops at hprof_out's first failure. */
static void check(int rc) {
    if (rc < 0) die("%s", hprof_out_error(g_out));
}

static uint64_t intern(const char *s) {
    uint64_t id;
    check(hprof_out_name(g_out, s, strlen(s), &id));
    return id;
}

static int add_class(const char *nm, int super, int boot, const char *fields) {
    int ci = hprof_out_class(g_out, nm, super, boot, fields);
    check(ci);
    return ci;
}

static size_t layout(int ci, const uint8_t **types) { return hprof_out_layout(g_out, ci, types); }

static int ref_fields(int ci) {
    const uint8_t *lay;
    int n = 0;
    for (size_t i = 0, nlay = layout(ci, &lay); i < nlay; i++) n += lay[i] == LW_T_OBJECT;
    return n;
}

/* Static reference slots: every object static of every class, for well-known objects and
 * cluster heads to hang off. The dry pass finds their values and hands them to hprof_out for
 * the CLASS_DUMPs; the second pass checks it finds the same. */
typedef struct static_slot {
    int cls, k;       /* static k of class cls */
    uint64_t val;
    int pinned;       /* reserved for a well-known object: no cluster head takes it */
} static_slot;
static static_slot *g_slots;
static int g_nslots;
static int g_slot_next;      /* next slot a cluster head may take (pinned slots are skipped) */

/* Returns the slot of an object static, -1 for the others. */
static int add_static(int ci, const char *nm, uint8_t type, uint64_t value) {
    int k = hprof_out_static(g_out, ci, nm, type, value);
    check(k);
    if (type != LW_T_OBJECT) return -1;
    g_slots = xrealloc(g_slots, (size_t)(g_nslots + 1) * sizeof *g_slots);
    g_slots[g_nslots] = (static_slot){ci, k, 0, 0};
    return g_nslots++;
}
/* Position of field `nm` declared by class `decl` in the layout of class `ci`. */
static int lay_pos(int ci, int decl, const char *nm) {
    int pos = hprof_out_field_pos(g_out, ci, decl, nm);
    check(pos);
    return pos;
}

/* well-known classes and field positions */
static int C_OBJECT, C_STRING, C_INTEGER, C_LONG, C_NUMBER, C_ARRAYLIST, C_HASHMAP, C_HMNODE, C_LINKEDLIST,
    C_LLNODE, C_THREAD, C_REFERENCE, C_WEAKREF, C_CLASSLOADER, C_APPLOADER, C_CICOMP, C_OBJARR, C_NODEARR,
    C_STRARR, C_LEAKREG, C_LEAKSCREEN, C_KWR, C_WATCHER, C_APP0;
static int P_STR_VALUE, P_STR_HASH, P_STR_CODER, P_AL_DATA, P_AL_SIZE, P_AL_MOD, P_HM_TABLE, P_HM_SIZE, P_HM_MOD,
    P_HM_THRESH, P_HM_LF, P_N_HASH, P_N_KEY, P_N_VALUE, P_N_NEXT, P_LL_SIZE, P_LL_FIRST, P_LL_LAST, P_LN_ITEM,
    P_LN_NEXT, P_LN_PREV, P_T_NAME, P_T_TID, P_T_PRIO, P_T_DAEMON, P_T_CCL, P_REF_REFERENT, P_INT_VALUE,
    P_LONG_VALUE, P_CL_NAME, P_CL_CLASSES, P_LS_TITLE, P_LS_ROOT, P_LS_DESTROYED, P_LS_ID, P_KWR_KEY, P_KWR_DESC,
    P_KWR_WATCH, P_KWR_RET, P_KWR_REFERENT;
static int S_CI_ORDER, S_AL_EMPTY, S_AL_DEFEMPTY, S_LEAK_LISTENERS, S_WATCHER_REFS;
static int g_app_ref_classes[APP_CLASSES]; /* app classes with >= 1 reference field */
static int g_napp_ref;
static int g_app_tree_classes[APP_CLASSES]; /* ... with >= 2 */
static int g_napp_tree;

static const char *const k_vocab[] = {
    "context", "listener", "cache", "count", "name", "parent", "children", "state", "handler", "callback",
    "owner", "id", "size", "value", "next", "prev", "data", "buffer", "config", "session", "user",
    "timestamp", "flags", "enabled", "level", "delegate", "target", "source", "result", "error", "items",
    "index", "key", "entry", "options", "view", "adapter", "model", "presenter", "repository", "service",
    "client", "request", "response", "headers", "body", "status", "retries", "timeout", "executor", "lock",
    "queue", "pool", "factory", "builder", "observer", "subscription", "token", "width", "height", "color",
    "title", "label", "icon",
};

static void build_classes(uint64_t seed) {
    rng r = {seed ^ 0xC1A55E5ull};
    C_OBJECT = add_class("java/lang/Object", -1, 1, NULL);
    C_STRING = add_class("java/lang/String", C_OBJECT, 1, "value:O coder:B hash:I hashIsZero:Z");
    add_static(C_STRING, "serialVersionUID", LW_T_LONG, (uint64_t)-6849794470754667710LL);
    add_static(C_STRING, "COMPACT_STRINGS", LW_T_BOOLEAN, 1);
    S_CI_ORDER = add_static(C_STRING, "CASE_INSENSITIVE_ORDER", LW_T_OBJECT, 0);
    C_CICOMP = add_class("java/lang/String$CaseInsensitiveComparator", C_OBJECT, 1, NULL);
    add_class("java/lang/Class", C_OBJECT, 1, NULL);
    C_NUMBER = add_class("java/lang/Number", C_OBJECT, 1, NULL);
    C_INTEGER = add_class("java/lang/Integer", C_NUMBER, 1, "value:I");
    add_static(C_INTEGER, "MIN_VALUE", LW_T_INT, 0x80000000u);
    C_LONG = add_class("java/lang/Long", C_NUMBER, 1, "value:J");
    int absc = add_class("java/util/AbstractCollection", C_OBJECT, 1, NULL);
    int absl = add_class("java/util/AbstractList", absc, 1, "modCount:I");
    C_ARRAYLIST = add_class("java/util/ArrayList", absl, 1, "elementData:O size:I");
    add_static(C_ARRAYLIST, "serialVersionUID", LW_T_LONG, 8683452581122892189ull);
    S_AL_EMPTY = add_static(C_ARRAYLIST, "EMPTY_ELEMENTDATA", LW_T_OBJECT, 0);
    S_AL_DEFEMPTY = add_static(C_ARRAYLIST, "DEFAULTCAPACITY_EMPTY_ELEMENTDATA", LW_T_OBJECT, 0);
    int absm = add_class("java/util/AbstractMap", C_OBJECT, 1, "keySet:O values:O");
    C_HASHMAP = add_class("java/util/HashMap", absm, 1,
                          "table:O entrySet:O size:I modCount:I threshold:I loadFactor:F");
    C_HMNODE = add_class("java/util/HashMap$Node", C_OBJECT, 1, "hash:I key:O value:O next:O");
    int absseq = add_class("java/util/AbstractSequentialList", absl, 1, NULL);
    C_LINKEDLIST = add_class("java/util/LinkedList", absseq, 1, "size:I first:O last:O");
    C_LLNODE = add_class("java/util/LinkedList$Node", C_OBJECT, 1, "item:O next:O prev:O");
    C_THREAD = add_class("java/lang/Thread", C_OBJECT, 1,
                         "name:O tid:J priority:I daemon:Z contextClassLoader:O target:O");
    add_static(C_THREAD, "threadSeqNumber", LW_T_LONG, 40);
    C_REFERENCE = add_class("java/lang/ref/Reference", C_OBJECT, 1, "referent:O queue:O next:O discovered:O");
    C_WEAKREF = add_class("java/lang/ref/WeakReference", C_REFERENCE, 1, NULL);
    C_CLASSLOADER = add_class("java/lang/ClassLoader", C_OBJECT, 1, "parent:O name:O classes:O");
    int builtin = add_class("jdk/internal/loader/BuiltinClassLoader", C_CLASSLOADER, 1, NULL);
    C_APPLOADER = add_class("jdk/internal/loader/ClassLoaders$AppClassLoader", builtin, 1, NULL);
    C_OBJARR = add_class("[Ljava/lang/Object;", C_OBJECT, 1, NULL);
    C_NODEARR = add_class("[Ljava/util/HashMap$Node;", C_OBJECT, 1, NULL);
    C_STRARR = add_class("[Ljava/lang/String;", C_OBJECT, 1, NULL);
    static const char *const prim_arrays[] = {"[Z", "[C", "[F", "[D", "[B", "[S", "[I", "[J"};
    for (size_t i = 0; i < sizeof prim_arrays / sizeof prim_arrays[0]; i++)
        add_class(prim_arrays[i], C_OBJECT, 1, NULL);

    /* the app: the benchmark's known leak and the watcher */
    C_LEAKREG = add_class("com/example/bench/LeakRegistry", C_OBJECT, 0, NULL);
    S_LEAK_LISTENERS = add_static(C_LEAKREG, "listeners", LW_T_OBJECT, 0);
    add_static(C_LEAKREG, "registered", LW_T_INT, 5);
    C_LEAKSCREEN = add_class("com/example/bench/LeakedScreen", C_OBJECT, 0,
                             "title:O rootView:O destroyed:Z screenId:I");
    C_KWR = add_class("io/leakwatch/KeyedWeakReference", C_WEAKREF, 0,
                      "key:O description:O watchUptimeMillis:J retainedUptimeMillis:J");
    add_static(C_KWR, "heapDumpUptimeMillis", LW_T_LONG, 1234567);
    C_WATCHER = add_class("io/leakwatch/Watcher", C_OBJECT, 0, NULL);
    S_WATCHER_REFS = add_static(C_WATCHER, "references", LW_T_OBJECT, 0);

    /* ~2000 synthetic app classes; a third extend an earlier one. Field types as type letters
     * (see hprof_out_class), about half of them references. */
    static const char types[] = "OOOOOOOOOOOOOOOIIIJJZZBSCFD";
    size_t nvocab = sizeof k_vocab / sizeof k_vocab[0];
    C_APP0 = hprof_out_class_count(g_out);
    for (int i = 0; i < APP_CLASSES; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "com/example/gen/C%d", i);
        int super = (i > 10 && runif(&r) < 0.3) ? C_APP0 + (int)rbelow(&r, (uint64_t)i) : C_OBJECT;
        /* keep hierarchies shallow, as apps' are */
        int depth = 0;
        for (int k = super; k >= 0; k = hprof_out_super(g_out, k)) depth++;
        if (depth > 4) super = C_OBJECT;
        int nf = (int)rrange(&r, 1, 6);
        int first = (int)rbelow(&r, nvocab);
        char fields[6 * 48];
        size_t len = 0;
        for (int f = 0; f < nf; f++)
            len += (size_t)snprintf(fields + len, sizeof fields - len, "%s%s%s:%c", f ? " " : "",
                                    k_vocab[(size_t)(first + f * 7) % nvocab], f >= 3 ? "2" : "",
                                    types[rbelow(&r, sizeof types - 1)]);
        int ci = add_class(nm, super, 0, fields);
        double u = runif(&r);
        int ns = u < 0.3 ? 0 : u < 0.6 ? 1 : u < 0.85 ? 2 : 3;
        for (int s = 0; s < ns; s++) {
            char sname[48];
            snprintf(sname, sizeof sname, "s%s%d", k_vocab[rbelow(&r, nvocab)], s);
            double v = runif(&r);
            if (v < 0.7) add_static(ci, sname, LW_T_OBJECT, 0);
            else if (v < 0.85) add_static(ci, sname, LW_T_INT, rbelow(&r, 100000));
            else if (v < 0.9) add_static(ci, sname, LW_T_LONG, rnext(&r) >> 8);
            else add_static(ci, sname, LW_T_BOOLEAN, rbelow(&r, 2));
        }
    }
    for (int i = C_APP0; i < hprof_out_class_count(g_out); i++) {
        if (ref_fields(i) >= 1) g_app_ref_classes[g_napp_ref++] = i;
        if (ref_fields(i) >= 2) g_app_tree_classes[g_napp_tree++] = i;
    }

    P_STR_VALUE = lay_pos(C_STRING, C_STRING, "value");
    P_STR_HASH = lay_pos(C_STRING, C_STRING, "hash");
    P_STR_CODER = lay_pos(C_STRING, C_STRING, "coder");
    P_AL_DATA = lay_pos(C_ARRAYLIST, C_ARRAYLIST, "elementData");
    P_AL_SIZE = lay_pos(C_ARRAYLIST, C_ARRAYLIST, "size");
    P_AL_MOD = lay_pos(C_ARRAYLIST, absl, "modCount");
    P_HM_TABLE = lay_pos(C_HASHMAP, C_HASHMAP, "table");
    P_HM_SIZE = lay_pos(C_HASHMAP, C_HASHMAP, "size");
    P_HM_MOD = lay_pos(C_HASHMAP, C_HASHMAP, "modCount");
    P_HM_THRESH = lay_pos(C_HASHMAP, C_HASHMAP, "threshold");
    P_HM_LF = lay_pos(C_HASHMAP, C_HASHMAP, "loadFactor");
    P_N_HASH = lay_pos(C_HMNODE, C_HMNODE, "hash");
    P_N_KEY = lay_pos(C_HMNODE, C_HMNODE, "key");
    P_N_VALUE = lay_pos(C_HMNODE, C_HMNODE, "value");
    P_N_NEXT = lay_pos(C_HMNODE, C_HMNODE, "next");
    P_LL_SIZE = lay_pos(C_LINKEDLIST, C_LINKEDLIST, "size");
    P_LL_FIRST = lay_pos(C_LINKEDLIST, C_LINKEDLIST, "first");
    P_LL_LAST = lay_pos(C_LINKEDLIST, C_LINKEDLIST, "last");
    P_LN_ITEM = lay_pos(C_LLNODE, C_LLNODE, "item");
    P_LN_NEXT = lay_pos(C_LLNODE, C_LLNODE, "next");
    P_LN_PREV = lay_pos(C_LLNODE, C_LLNODE, "prev");
    P_T_NAME = lay_pos(C_THREAD, C_THREAD, "name");
    P_T_TID = lay_pos(C_THREAD, C_THREAD, "tid");
    P_T_PRIO = lay_pos(C_THREAD, C_THREAD, "priority");
    P_T_DAEMON = lay_pos(C_THREAD, C_THREAD, "daemon");
    P_T_CCL = lay_pos(C_THREAD, C_THREAD, "contextClassLoader");
    P_REF_REFERENT = lay_pos(C_WEAKREF, C_REFERENCE, "referent");
    P_INT_VALUE = lay_pos(C_INTEGER, C_INTEGER, "value");
    P_LONG_VALUE = lay_pos(C_LONG, C_LONG, "value");
    P_CL_NAME = lay_pos(C_APPLOADER, C_CLASSLOADER, "name");
    P_CL_CLASSES = lay_pos(C_APPLOADER, C_CLASSLOADER, "classes");
    P_LS_TITLE = lay_pos(C_LEAKSCREEN, C_LEAKSCREEN, "title");
    P_LS_ROOT = lay_pos(C_LEAKSCREEN, C_LEAKSCREEN, "rootView");
    P_LS_DESTROYED = lay_pos(C_LEAKSCREEN, C_LEAKSCREEN, "destroyed");
    P_LS_ID = lay_pos(C_LEAKSCREEN, C_LEAKSCREEN, "screenId");
    P_KWR_KEY = lay_pos(C_KWR, C_KWR, "key");
    P_KWR_DESC = lay_pos(C_KWR, C_KWR, "description");
    P_KWR_WATCH = lay_pos(C_KWR, C_KWR, "watchUptimeMillis");
    P_KWR_RET = lay_pos(C_KWR, C_KWR, "retainedUptimeMillis");
    P_KWR_REFERENT = lay_pos(C_KWR, C_REFERENCE, "referent");

    g_slots[S_CI_ORDER].pinned = g_slots[S_AL_EMPTY].pinned = g_slots[S_AL_DEFEMPTY].pinned = 1;
    g_slots[S_LEAK_LISTENERS].pinned = g_slots[S_WATCHER_REFS].pinned = 1;
}

/* ---- thread stacks (STACK_FRAME / STACK_TRACE records) --------------------------------- */

static const char *const k_thread_names[THREADS] = {
    "main", "Reference Handler", "Finalizer", "Signal Dispatcher", "Common-Cleaner", "Notification Thread",
    "pool-1-thread-1", "pool-1-thread-2", "pool-1-thread-3", "pool-1-thread-4", "http-worker-1",
    "http-worker-2", "http-worker-3", "db-writer", "scheduler-1", "scheduler-2", "event-bus", "metrics",
    "cache-evictor", "ui-render",
};
static const char *const k_methods[] = {"run", "runWorker", "call", "invoke", "handle", "process", "dispatch",
                                        "execute", "park", "take", "poll", "onEvent", "render", "flush",
                                        "main", "doWork", "apply", "accept", "lambda$start$0", "await"};
static int g_frames[THREADS];

/* ---- the generator's object state --------------------------------------------------------- */

enum { K_INST = 1, K_OARR = 2, K_PARR = 3 };
enum { F_NORES = 1, F_ASCII = 2, F_TEXT = 4, F_ZERO = 8 };
#define LOCAL(i) ((1ull << 63) | (uint64_t)(i))
#define IS_LOCAL(v) (((v) >> 63) != 0)
#define PRIM_RANDOM 0xFFFFFFFFFFFFFFFEull /* instance primitive: filled with random bits at write time */

typedef struct gobj {
    uint64_t id;
    uint64_t v0;   /* first value in g_vals: instance layout values, or object-array elements */
    uint32_t cls;  /* class index; element type for primitive arrays */
    uint32_t n;    /* array length */
    uint8_t kind, flags;
    uint16_t text; /* F_TEXT: index into k_texts */
} gobj;

static gobj *g_objs;
static size_t g_nobj, g_capobj;
static uint64_t *g_vals;
static size_t g_nval, g_capval;
static uint32_t *g_sib; /* reachable instances of the cluster, for sibling references */
static size_t g_nsib, g_capsib;

static const char *k_texts[64];
static int g_ntexts;
static uint64_t g_app_loader; /* found by the dry pass; the app classes' loader in CLASS_DUMPs */

typedef struct gen {
    int pass;                /* 0 = dry, 1 = write (g_out's file is open) */
    uint64_t target;         /* objects wanted */
    rng r;                   /* structure */
    rng fill;                /* contents that do not change the layout (pass 1 only) */
    uint64_t addr, region_end;
    uint64_t regions;
    uint64_t instances, obj_arrays, prim_arrays, refs, static_refs, file_bytes_est;
    uint64_t big_arrays, big_bytes, garbage_objs, weak_refs, clusters, direct, registries;
    uint64_t reservoir[RESERVOIR];
    uint64_t res_seen;
    uint64_t pending[PENDING_MAX + 64];
    int npending;
    uint64_t thread_ids[THREADS];
    uint64_t locals[THREADS][64];
    int nlocals[THREADS];
    uint64_t app_loader;
    uint64_t leak_screen, leak_kwr;
    int leak_done;
    uint64_t next_big_at, big_step;
    uint64_t *ids;           /* an object's resolved values, on their way to hprof_out */
    size_t idscap;
} gen;

static uint64_t objects(const gen *g) { return g->instances + g->obj_arrays + g->prim_arrays; }

static uint64_t *need_ids(gen *g, size_t n) {
    if (n > g->idscap) {
        g->idscap = n + n / 2;
        g->ids = xrealloc(g->ids, g->idscap * sizeof *g->ids);
    }
    return g->ids;
}

static size_t new_obj(uint8_t kind, uint32_t cls, uint32_t n, uint8_t flags, size_t nvals) {
    if (g_nobj == g_capobj) {
        g_capobj = g_capobj ? 2 * g_capobj : 65536;
        g_objs = xrealloc(g_objs, g_capobj * sizeof *g_objs);
    }
    if (g_nval + nvals > g_capval) {
        while (g_nval + nvals > g_capval) g_capval = g_capval ? 2 * g_capval : 262144;
        g_vals = xrealloc(g_vals, g_capval * sizeof *g_vals);
    }
    gobj *o = &g_objs[g_nobj];
    o->id = 0;
    o->v0 = g_nval;
    o->cls = cls;
    o->n = n;
    o->kind = kind;
    o->flags = flags;
    o->text = 0;
    g_nval += nvals;
    return g_nobj++;
}
static void add_sib(size_t i) {
    if (g_nsib == g_capsib) {
        g_capsib = g_capsib ? 2 * g_capsib : 4096;
        g_sib = xrealloc(g_sib, g_capsib * sizeof *g_sib);
    }
    g_sib[g_nsib++] = (uint32_t)i;
}
static uint64_t *val(size_t o, int pos) { return &g_vals[g_objs[o].v0 + (size_t)pos]; }
/* Position of instance o's first reference field at or after `from`; -1 when there is none. */
static int next_ref(size_t o, int from) {
    const uint8_t *lay;
    int nlay = (int)layout((int)g_objs[o].cls, &lay);
    for (int i = from; i < nlay; i++)
        if (lay[i] == LW_T_OBJECT) return i;
    return -1;
}

static size_t new_inst(uint32_t cls, uint8_t flags) {
    const uint8_t *lay;
    size_t nlay = layout((int)cls, &lay);
    size_t o = new_obj(K_INST, cls, 0, flags, nlay);
    uint64_t *v = &g_vals[g_objs[o].v0];
    for (size_t i = 0; i < nlay; i++) v[i] = lay[i] == LW_T_OBJECT ? 0 : PRIM_RANDOM;
    return o;
}
static size_t new_oarr(uint32_t cls, uint32_t n, uint8_t flags) {
    size_t o = new_obj(K_OARR, cls, n, flags, n);
    memset(&g_vals[g_objs[o].v0], 0, (size_t)n * sizeof *g_vals);
    return o;
}
static size_t new_parr(uint8_t type, uint32_t n, uint8_t flags) { return new_obj(K_PARR, type, n, flags, 0); }

static size_t new_string(gen *g, uint32_t len, uint8_t flags) {
    size_t s = new_inst((uint32_t)C_STRING, flags);
    size_t a = new_parr(LW_T_BYTE, len, (uint8_t)(flags | F_ASCII));
    *val(s, P_STR_VALUE) = LOCAL(a);
    *val(s, P_STR_CODER) = 0;
    *val(s, P_STR_HASH) = runif(&g->r) < 0.5 ? 0 : (rnext(&g->r) & 0xffffffffu);
    return s;
}
static size_t new_text_string(gen *g, const char *text, uint8_t flags) {
    if (g_ntexts >= (int)(sizeof k_texts / sizeof k_texts[0])) die("too many texts%s", "");
    k_texts[g_ntexts] = text;
    size_t s = new_string(g, (uint32_t)strlen(text), flags);
    size_t a = (size_t)(*val(s, P_STR_VALUE) & ~(1ull << 63));
    g_objs[a].flags = (uint8_t)((g_objs[a].flags & ~F_ASCII) | F_TEXT);
    g_objs[a].text = (uint16_t)g_ntexts++;
    return s;
}
static uint32_t string_len(gen *g) { return (uint32_t)rlog(&g->r, 3, 80); }

static uint64_t reservoir_pick(gen *g) {
    uint64_t n = g->res_seen < RESERVOIR ? g->res_seen : RESERVOIR;
    return n ? g->reservoir[rbelow(&g->r, n)] : 0;
}

static size_t make_app_obj(gen *g, int budget, uint8_t flags);

static uint32_t list_capacity(uint32_t n) {
    uint32_t cap = 10;
    while (cap < n) cap += cap >> 1;
    return cap;
}

/* An element of a small collection: a string, a sibling, a new app object or null. */
static uint64_t element_ref(gen *g, int budget, uint8_t flags) {
    double u = runif(&g->r);
    if (u < 0.03) return 0;
    if (u < 0.3) return LOCAL(new_string(g, string_len(g), flags));
    if (u < 0.7 && g_nsib) return LOCAL(g_sib[rbelow(&g->r, g_nsib)]);
    if (u < 0.95 && budget > 0) return LOCAL(make_app_obj(g, budget - 1, flags));
    return reservoir_pick(g);
}

/* A field's small collection: an ArrayList, a bare Object[] or a String[]. */
static size_t make_small_collection(gen *g, int budget, uint8_t flags) {
    double u = runif(&g->r);
    uint32_t n = (uint32_t)rlog(&g->r, 1, 24);
    if (u < 0.4) {
        size_t l = new_inst((uint32_t)C_ARRAYLIST, flags);
        uint32_t cap = list_capacity(n);
        size_t data = new_oarr((uint32_t)C_OBJARR, cap, flags);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t v = element_ref(g, budget, flags);
            g_vals[g_objs[data].v0 + i] = v;
        }
        *val(l, P_AL_DATA) = LOCAL(data);
        *val(l, P_AL_SIZE) = n;
        *val(l, P_AL_MOD) = n;
        return l;
    }
    if (u < 0.75) {
        size_t a = new_oarr((uint32_t)C_OBJARR, n, flags);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t v = element_ref(g, budget, flags);
            g_vals[g_objs[a].v0 + i] = v;
        }
        return a;
    }
    size_t a = new_oarr((uint32_t)C_STRARR, n, flags);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = runif(&g->r) < 0.9 ? LOCAL(new_string(g, string_len(g), flags)) : 0;
        g_vals[g_objs[a].v0 + i] = v;
    }
    return a;
}

/* A value for a reference field of an app object. */
static uint64_t app_ref(gen *g, int budget, uint8_t flags) {
    double u = runif(&g->r);
    if (u < 0.05) return 0;
    if (u < 0.17) return LOCAL(new_string(g, string_len(g), flags));
    if (u < 0.21) {
        static const uint8_t pt[] = {LW_T_INT, LW_T_LONG, LW_T_BYTE, LW_T_CHAR, LW_T_INT, LW_T_BYTE};
        uint8_t t = pt[rbelow(&g->r, sizeof pt)];
        return LOCAL(new_parr(t, (uint32_t)rlog(&g->r, 1, 256), flags));
    }
    if (u < 0.29) return LOCAL(make_small_collection(g, budget, flags));
    if (u < 0.45) return budget > 0 ? LOCAL(make_app_obj(g, budget - 1, flags)) : 0;
    if (u < 0.80) {
        if (g_nsib) return LOCAL(g_sib[rbelow(&g->r, g_nsib)]);
        return 0;
    }
    return reservoir_pick(g);
}

static size_t make_app_obj(gen *g, int budget, uint8_t flags) {
    uint32_t cls = (uint32_t)(C_APP0 + (int)rlog(&g->r, 1, APP_CLASSES) - 1); /* a few classes are common */
    size_t o = new_inst(cls, flags);
    if (!(flags & F_NORES)) add_sib(o);
    for (int i = next_ref(o, 0); i >= 0; i = next_ref(o, i + 1)) {
        uint64_t v = app_ref(g, budget, flags);
        *val(o, i) = v;
    }
    return o;
}

/* A value in a map or a list: a boxed number, a String or an app object (with children). */
static uint64_t make_value(gen *g, int budget, uint8_t flags) {
    double u = runif(&g->r);
    if (u < 0.15) {
        size_t b = new_inst((uint32_t)C_INTEGER, flags);
        *val(b, P_INT_VALUE) = rbelow(&g->r, 100000);
        return LOCAL(b);
    }
    if (u < 0.2) {
        size_t b = new_inst((uint32_t)C_LONG, flags);
        *val(b, P_LONG_VALUE) = 1700000000000ull + rbelow(&g->r, 100000000000ull);
        return LOCAL(b);
    }
    if (u < 0.32) return LOCAL(new_string(g, string_len(g), flags));
    return LOCAL(make_app_obj(g, budget, flags));
}

/* ---- addresses and writing ------------------------------------------------------------------ */

static uint64_t heap_size(const gobj *o) {
    switch (o->kind) {
    case K_INST: return align8(16 + hprof_out_instance_size(g_out, (int)o->cls));
    case K_OARR: return align8(16 + 8ull * o->n);
    default: return align8(16 + (uint64_t)o->n * lw__type_size(o->cls, 8));
    }
}
static uint64_t record_size(const gobj *o) {
    switch (o->kind) {
    case K_INST: return hprof_out_instance_bytes(g_out, (int)o->cls);
    case K_OARR: return hprof_out_object_array_bytes(o->n);
    default: return hprof_out_primitive_array_bytes((uint8_t)o->cls, o->n);
    }
}

static uint64_t alloc_addr(gen *g, uint64_t size) {
    if (g->addr + size > g->region_end) {
        uint64_t gap = rrange(&g->r, 1, 6) << 20;
        uint64_t start = g->region_end + gap;
        uint64_t span = size > REGION_BYTES ? (size + REGION_BYTES - 1) / REGION_BYTES * REGION_BYTES : REGION_BYTES;
        g->addr = start;
        g->region_end = start + span;
        g->regions++;
    }
    uint64_t id = g->addr;
    g->addr += size;
    return id;
}

static uint64_t resolve(uint64_t v) { return IS_LOCAL(v) ? g_objs[v & ~(1ull << 63)].id : v; }

static uint64_t random_prim(gen *g, uint8_t t) {
    uint64_t x = rnext(&g->fill);
    switch (t) {
    case LW_T_BOOLEAN: return x & 1;
    case LW_T_BYTE: return x & 0xff;
    case LW_T_CHAR: return 'a' + (x % 26);
    case LW_T_SHORT: return x % 1000;
    case LW_T_INT: return (x & 3) == 0 ? 0 : (x & 3) == 1 ? (x >> 8) % 1000 : (x >> 8) & 0xffffffffu;
    case LW_T_LONG: return (x & 3) == 0 ? 0 : (x & 3) == 1 ? 1700000000000ull + ((x >> 8) % 100000000000ull) : x >> 2;
    case LW_T_FLOAT: { float f = (float)((x >> 40) % 100000) / 100.0f; uint32_t b; memcpy(&b, &f, 4); return b; }
    case LW_T_DOUBLE: { double d = (double)((x >> 20) % 100000000) / 1000.0; uint64_t b; memcpy(&b, &d, 8); return b; }
    default: return 0;
    }
}

static void fill_prim_array(gen *g, const gobj *o, uint8_t *p, uint64_t bytes) {
    unsigned es = lw__type_size(o->cls, 8);
    if (o->flags & F_TEXT) {
        memcpy(p, k_texts[o->text], (size_t)bytes);
    } else if (o->flags & F_ASCII) {
        static const char alpha[64] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
        uint64_t x = 0;
        for (uint64_t i = 0, k = 0; i < bytes; i += es, k++) {
            if ((k & 7) == 0) x = rnext(&g->fill);
            if (es == 2) p[i] = 0;
            p[i + es - 1] = (uint8_t)alpha[(x >> (8 * (k & 7))) & 63];
        }
    } else {
        for (uint64_t i = 0; i < bytes; i += es) {
            uint64_t v = random_prim(g, (uint8_t)o->cls);
            for (unsigned b = 0; b < es; b++) p[i + b] = (uint8_t)(v >> (8 * (es - 1 - b)));
        }
    }
}

/* Gives the cluster's objects their addresses, counts them, and writes them (pass 1). */
static void flush_cluster(gen *g) {
    for (size_t i = 0; i < g_nobj; i++) {
        gobj *o = &g_objs[i];
        o->id = alloc_addr(g, heap_size(o));
        g->file_bytes_est += record_size(o);
        if (o->kind == K_INST) g->instances++;
        else if (o->kind == K_OARR) g->obj_arrays++;
        else g->prim_arrays++;
        if (!(o->flags & F_NORES) && o->kind != K_PARR) {
            g->res_seen++;
            if (g->res_seen <= RESERVOIR) g->reservoir[g->res_seen - 1] = o->id;
            else {
                uint64_t j = rbelow(&g->r, g->res_seen);
                if (j < RESERVOIR) g->reservoir[j] = o->id;
            }
        }
    }
    for (size_t i = 0; i < g_nobj; i++) {
        const gobj *o = &g_objs[i];
        if (o->kind == K_INST) {
            const uint8_t *lay;
            size_t nlay = layout((int)o->cls, &lay);
            const uint64_t *v = &g_vals[o->v0];
            uint64_t *x = need_ids(g, nlay);
            for (size_t f = 0; f < nlay; f++) {
                x[f] = v[f];
                if (lay[f] == LW_T_OBJECT) {
                    x[f] = resolve(v[f]);
                    if (x[f]) g->refs++;
                } else if (v[f] == PRIM_RANDOM) {
                    x[f] = g->pass ? random_prim(g, lay[f]) : 0;
                }
            }
            if (g->pass) check(hprof_out_instance(g_out, o->id, (int)o->cls, x, nlay));
        } else if (o->kind == K_OARR) {
            uint64_t *x = need_ids(g, o->n);
            for (uint32_t k = 0; k < o->n; k++) {
                x[k] = resolve(g_vals[o->v0 + k]);
                if (x[k]) g->refs++;
            }
            if (g->pass) check(hprof_out_object_array(g_out, o->id, (int)o->cls, x, o->n));
        } else if (g->pass) {
            uint64_t bytes = (uint64_t)o->n * lw__type_size(o->cls, 8);
            uint8_t *p = NULL; /* all zeros */
            if (!(o->flags & F_ZERO) && (bytes <= 65536 || (o->flags & (F_TEXT | F_ASCII)))) {
                p = hprof_out_buffer(g_out, (size_t)bytes + 8);
                if (!p) die("%s", hprof_out_error(g_out));
                fill_prim_array(g, o, p, bytes);
            }
            check(hprof_out_primitive_array(g_out, o->id, (uint8_t)o->cls, p, o->n));
        }
    }
}

static void begin_cluster(void) { g_nobj = g_nval = g_nsib = 0; }

/* ---- static slots ---------------------------------------------------------------------------- */

static void set_slot(gen *g, int slot, uint64_t id) {
    static_slot *s = &g_slots[slot];
    if (g->pass == 0) {
        s->val = id;
        check(hprof_out_set_static(g_out, s->cls, s->k, id));
    } else if (s->val != id) {
        die("internal error: the two passes disagree%s", "");
    }
    if (id) g->static_refs++;
}

/* Attaches a cluster head: to a free static slot, a thread's locals, or the pending set (later
 * held by a registry). Direct attachments are spread over the whole heap; registries and big
 * structures (`agg`) get a slot while any is left. */
static void attach_head(gen *g, uint64_t id, int agg) {
    g->clusters++;
    while (g_slot_next < g_nslots && g_slots[g_slot_next].pinned) g_slot_next++;
    int free_slots = g_nslots - g_slot_next;
    if (agg) {
        if (free_slots > 0) {
            set_slot(g, g_slot_next++, id);
            g->direct++;
            return;
        }
    } else {
        double u = runif(&g->r);
        if (u < 0.04) {
            int t = (int)rbelow(&g->r, THREADS);
            if (g->nlocals[t] < 48) {
                g->locals[t][g->nlocals[t]++] = id;
                return;
            }
        }
        double per_cluster = (double)objects(g) / (double)g->clusters;
        double left = (double)(g->target > objects(g) ? g->target - objects(g) : 0) / per_cluster + 1.0;
        double spare = (double)(free_slots - g_nslots / 4);
        if (spare > 0 && runif(&g->r) < spare / left) {
            set_slot(g, g_slot_next++, id);
            g->direct++;
            return;
        }
    }
    if (g->npending >= PENDING_MAX + 8) die("internal error: too many pending heads%s", "");
    g->pending[g->npending++] = id;
}

/* ---- clusters ---------------------------------------------------------------------------------- */

/* java.util.HashMap with String keys; values made by make_value, or taken from `given`. */
static size_t build_map(gen *g, uint32_t n, int budget, uint8_t flags, const uint64_t *given) {
    size_t h = new_inst((uint32_t)C_HASHMAP, flags);
    uint32_t cap = 16;
    while ((double)cap * 0.75 < (double)n) cap *= 2;
    size_t first_node = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t node = new_inst((uint32_t)C_HMNODE, flags);
        if (i == 0) first_node = node;
        size_t key = new_string(g, (uint32_t)rrange(&g->r, 6, 36), flags);
        uint64_t v = given ? given[i] : make_value(g, budget, flags);
        *val(node, P_N_KEY) = LOCAL(key);
        *val(node, P_N_VALUE) = v;
        *val(node, P_N_HASH) = rnext(&g->r) & 0xffffffffu;
    }
    /* the table is allocated last (after the resizes), nodes hashed into random buckets */
    size_t table = new_oarr((uint32_t)C_NODEARR, cap, flags);
    size_t node = first_node;
    for (uint32_t i = 0; i < n; i++) {
        while (g_objs[node].cls != (uint32_t)C_HMNODE || g_objs[node].kind != K_INST) node++;
        uint64_t b = rbelow(&g->r, cap);
        uint64_t *slot = &g_vals[g_objs[table].v0 + b];
        *val(node, P_N_NEXT) = *slot;
        *slot = LOCAL(node);
        node++;
    }
    *val(h, P_HM_TABLE) = LOCAL(table);
    *val(h, P_HM_SIZE) = n;
    *val(h, P_HM_MOD) = n;
    *val(h, P_HM_THRESH) = (uint64_t)(cap * 3 / 4);
    *val(h, P_HM_LF) = 0x3f400000u; /* 0.75f */
    return h;
}

/* java.util.ArrayList; elements made by make_value, or taken from `given`. */
static size_t build_list(gen *g, uint32_t n, int budget, uint8_t flags, const uint64_t *given) {
    size_t l = new_inst((uint32_t)C_ARRAYLIST, flags);
    uint64_t *tmp = NULL;
    if (!given) {
        tmp = xrealloc(NULL, (size_t)(n ? n : 1) * sizeof *tmp);
        for (uint32_t i = 0; i < n; i++) tmp[i] = make_value(g, budget, flags);
        given = tmp;
    }
    size_t data = new_oarr((uint32_t)C_OBJARR, list_capacity(n), flags);
    memcpy(&g_vals[g_objs[data].v0], given, (size_t)n * sizeof *given);
    *val(l, P_AL_DATA) = LOCAL(data);
    *val(l, P_AL_SIZE) = n;
    *val(l, P_AL_MOD) = n;
    free(tmp);
    return l;
}

static size_t build_chain(gen *g, uint32_t n) {
    size_t l = new_inst((uint32_t)C_LINKEDLIST, 0);
    size_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t node = new_inst((uint32_t)C_LLNODE, 0);
        *val(node, P_LN_ITEM) = make_value(g, 0, 0);
        if (i == 0) *val(l, P_LL_FIRST) = LOCAL(node);
        else {
            *val(node, P_LN_PREV) = LOCAL(prev);
            *val(prev, P_LN_NEXT) = LOCAL(node);
        }
        prev = node;
    }
    if (n) *val(l, P_LL_LAST) = LOCAL(prev);
    *val(l, P_LL_SIZE) = n;
    return l;
}

/* A tree of app objects: children, back references to the parent (cycles), strings. */
static size_t build_tree(gen *g, uint32_t n, uint8_t flags) {
    size_t *queue = xrealloc(NULL, (size_t)(n + 1) * sizeof *queue);
    size_t *parent = xrealloc(NULL, (size_t)(n + 1) * sizeof *parent);
    uint32_t made = 1, head = 0;
    size_t root = new_inst((uint32_t)g_app_tree_classes[rbelow(&g->r, (uint64_t)g_napp_tree)], flags);
    if (!(flags & F_NORES)) add_sib(root);
    queue[0] = root;
    parent[0] = (size_t)-1;
    while (head < made) {
        size_t o = queue[head];
        size_t par = parent[head];
        head++;
        for (int i = next_ref(o, 0); i >= 0; i = next_ref(o, i + 1)) {
            double u = runif(&g->r);
            uint64_t v;
            if (u < 0.55 && made < n) {
                size_t c = new_inst((uint32_t)g_app_tree_classes[rbelow(&g->r, (uint64_t)g_napp_tree)], flags);
                if (!(flags & F_NORES)) add_sib(c);
                queue[made] = c;
                parent[made] = o;
                made++;
                v = LOCAL(c);
            } else if (u < 0.65 && par != (size_t)-1) {
                v = LOCAL(par);
            } else {
                v = app_ref(g, 0, flags);
            }
            *val(o, i) = v;
        }
    }
    free(queue);
    free(parent);
    return root;
}

/* A holder: an app object with a reference field (its first, *first) for what the caller
 * makes next. fill_holder then gives the other reference fields their values: in this order,
 * so that what it holds comes right after it in the heap. */
static size_t new_holder(gen *g, int *first) {
    size_t h = new_inst((uint32_t)g_app_ref_classes[rbelow(&g->r, (uint64_t)g_napp_ref)], 0);
    *first = next_ref(h, 0);
    return h;
}
static void fill_holder(gen *g, size_t h, int first) {
    for (int i = next_ref(h, first + 1); i >= 0; i = next_ref(h, i + 1)) *val(h, i) = app_ref(g, 0, 0);
}

static size_t build_buffer(gen *g, uint64_t bytes) {
    int first;
    size_t h = new_holder(g, &first);
    add_sib(h);
    int chars = runif(&g->r) < 0.3;
    uint32_t n = (uint32_t)(chars ? bytes / 2 : bytes);
    /* contents: text (payloads, documents), zeros (fresh buffers) or binary data */
    double c = runif(&g->r);
    uint8_t content = c < 0.55 ? F_ASCII : c < 0.8 ? F_ZERO : 0;
    *val(h, first) = LOCAL(new_parr(chars ? LW_T_CHAR : LW_T_BYTE, n, content));
    fill_holder(g, h, first);
    return h;
}

/* ArrayList of WeakReferences whose referents nothing else holds. */
static size_t build_weak(gen *g, uint32_t n) {
    uint64_t *refs = xrealloc(NULL, (size_t)(n ? n : 1) * sizeof *refs);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t referent = runif(&g->r) < 0.85 ? LOCAL(make_app_obj(g, 1, F_NORES)) : 0;
        size_t wr = new_inst((uint32_t)C_WEAKREF, 0);
        *val(wr, P_REF_REFERENT) = referent;
        refs[i] = LOCAL(wr);
        g->weak_refs++;
    }
    size_t l = build_list(g, n, 0, 0, refs);
    free(refs);
    return l;
}

static void build_garbage(gen *g, uint32_t n) {
    size_t start = g_nobj;
    while (g_nobj - start < n) make_app_obj(g, 2, F_NORES);
    g->garbage_objs += g_nobj - start;
}

/* A registry object holding the heads of earlier clusters (a map or an array). */
static size_t build_aggregate(gen *g, int k) {
    g->registries++;
    uint64_t *given = xrealloc(NULL, (size_t)k * sizeof *given);
    for (int i = 0; i < k; i++) {
        int j = (int)rbelow(&g->r, (uint64_t)g->npending);
        given[i] = g->pending[j];
        g->pending[j] = g->pending[--g->npending];
    }
    size_t h;
    if (runif(&g->r) < 0.5) {
        h = build_map(g, (uint32_t)k, 0, 0, given);
    } else {
        int first;
        h = new_holder(g, &first);
        size_t arr = new_oarr((uint32_t)C_OBJARR, (uint32_t)k, 0);
        memcpy(&g_vals[g_objs[arr].v0], given, (size_t)k * sizeof *given);
        *val(h, first) = LOCAL(arr);
        fill_holder(g, h, first);
    }
    free(given);
    return h;
}

/* The app class loader (holds the list of its classes), thread objects, shared empties. */
static void build_system(gen *g) {
    begin_cluster();
    size_t loader = new_inst((uint32_t)C_APPLOADER, 0);
    *val(loader, P_CL_NAME) = LOCAL(new_text_string(g, "app", 0));
    int ncls = hprof_out_class_count(g_out);
    uint64_t *cls_ids = xrealloc(NULL, (size_t)(ncls - C_APP0 + 6) * sizeof *cls_ids);
    uint32_t k = 0;
    for (int i = 0; i < ncls; i++)
        if (!hprof_out_boot(g_out, i)) cls_ids[k++] = hprof_out_class_id(g_out, i);
    *val(loader, P_CL_CLASSES) = LOCAL(build_list(g, k, 0, 0, cls_ids));
    free(cls_ids);
    size_t empty = new_oarr((uint32_t)C_OBJARR, 0, 0);
    size_t defempty = new_oarr((uint32_t)C_OBJARR, 0, 0);
    size_t cicomp = new_inst((uint32_t)C_CICOMP, 0);
    size_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        threads[t] = new_inst((uint32_t)C_THREAD, 0);
        *val(threads[t], P_T_NAME) = LOCAL(new_text_string(g, k_thread_names[t], 0));
        *val(threads[t], P_T_TID) = (uint64_t)t + 1;
        *val(threads[t], P_T_PRIO) = t < 6 ? 10 : 5;
        *val(threads[t], P_T_DAEMON) = t < 6;
        *val(threads[t], P_T_CCL) = LOCAL(loader);
    }
    flush_cluster(g);
    g->app_loader = g_objs[loader].id;
    if (g->pass == 0) g_app_loader = g->app_loader;
    else if (g_app_loader != g->app_loader) die("internal error: the two passes disagree%s", "");
    for (int t = 0; t < THREADS; t++) g->thread_ids[t] = g_objs[threads[t]].id;
    set_slot(g, S_AL_EMPTY, g_objs[empty].id);
    set_slot(g, S_AL_DEFEMPTY, g_objs[defempty].id);
    set_slot(g, S_CI_ORDER, g_objs[cicomp].id);
}

/* The known leak and the watcher's references. */
static void build_leak(gen *g) {
    begin_cluster();
    uint64_t elems[5];
    size_t screen = 0, first_listener = 0;
    for (int i = 0; i < 5; i++) {
        if (i == 3) {
            screen = new_inst((uint32_t)C_LEAKSCREEN, 0);
            g_objs[screen].flags = F_NORES; /* nothing else may hold it */
            *val(screen, P_LS_TITLE) = LOCAL(new_text_string(g, "Leaked screen", F_NORES));
            *val(screen, P_LS_ROOT) = LOCAL(build_tree(g, 300, F_NORES));
            *val(screen, P_LS_DESTROYED) = 1;
            *val(screen, P_LS_ID) = 42;
            elems[i] = LOCAL(screen);
        } else {
            size_t o = make_app_obj(g, 1, 0);
            if (i == 0) first_listener = o;
            elems[i] = LOCAL(o);
        }
    }
    size_t listeners = build_list(g, 5, 0, 0, elems);
    static const char *const keys[3] = {LEAK_KEY, "b3c8a7e0-0000-4000-8000-000000000002",
                                        "b3c8a7e0-0000-4000-8000-000000000003"};
    static const char *const descs[3] = {"LeakedScreen destroyed", "SettingsScreen destroyed",
                                         "DetailScreen destroyed"};
    uint64_t kwrs[3];
    size_t leak_kwr = 0;
    for (int i = 0; i < 3; i++) {
        size_t k = new_inst((uint32_t)C_KWR, 0);
        *val(k, P_KWR_KEY) = LOCAL(new_text_string(g, keys[i], 0));
        *val(k, P_KWR_DESC) = LOCAL(new_text_string(g, descs[i], 0));
        *val(k, P_KWR_WATCH) = 1200000 + (uint64_t)i * 1000;
        if (i == 0) { /* retained: the leak */
            *val(k, P_KWR_REFERENT) = LOCAL(screen);
            *val(k, P_KWR_RET) = 1205102;
            leak_kwr = k;
        } else if (i == 1) { /* watched, not retained yet: not a leak */
            *val(k, P_KWR_REFERENT) = LOCAL(first_listener);
            *val(k, P_KWR_RET) = (uint64_t)-1;
        } else { /* cleared by the GC: not a leak */
            *val(k, P_KWR_REFERENT) = 0;
            *val(k, P_KWR_RET) = 1203000;
        }
        kwrs[i] = LOCAL(k);
    }
    size_t watched = build_list(g, 3, 0, 0, kwrs);
    flush_cluster(g);
    set_slot(g, S_LEAK_LISTENERS, g_objs[listeners].id);
    set_slot(g, S_WATCHER_REFS, g_objs[watched].id);
    g->leak_screen = g_objs[screen].id;
    g->leak_kwr = g_objs[leak_kwr].id;
    g->leak_done = 1;
}

static void step(gen *g) {
    uint64_t n_obj = objects(g);
    if (!g->leak_done && n_obj >= g->target / 10 * 6) {
        build_leak(g);
        return;
    }
    begin_cluster();
    uint64_t cap = g->target / 100 < 100000 ? g->target / 100 : 100000;
    if (cap < 400) cap = 400;
    if (g->npending >= PENDING_MAX) {
        size_t h = build_aggregate(g, (int)rrange(&g->r, 64, PENDING_MAX));
        flush_cluster(g);
        attach_head(g, g_objs[h].id, 1);
        return;
    }
    if (n_obj >= g->next_big_at) { /* a few buffers of several MB */
        g->next_big_at += g->big_step;
        uint64_t bytes = rlog(&g->r, 2u << 20, 12u << 20);
        size_t h = build_buffer(g, bytes);
        flush_cluster(g);
        g->big_arrays++;
        g->big_bytes += bytes;
        attach_head(g, g_objs[h].id, 0);
        return;
    }
    if (g->file_bytes_est + (2u << 20) < n_obj * BYTES_PER_OBJECT) { /* keep ~100 bytes/object */
        size_t h = build_buffer(g, rlog(&g->r, 1024, 256 * 1024));
        flush_cluster(g);
        attach_head(g, g_objs[h].id, 0);
        return;
    }
    double u = runif(&g->r);
    size_t h;
    if (u < 0.30) {
        uint32_t n = (uint32_t)(runif(&g->r) < 0.06 ? rlog(&g->r, 400, cap) : rlog(&g->r, 2, 400));
        h = build_map(g, n, 1, 0, NULL);
    } else if (u < 0.55) {
        uint32_t n = (uint32_t)(runif(&g->r) < 0.06 ? rlog(&g->r, 200, cap / 2) : rlog(&g->r, 1, 200));
        h = build_list(g, n, 2, 0, NULL);
    } else if (u < 0.58) { /* a static array of objects (a pool, a cache) */
        uint32_t n = (uint32_t)rlog(&g->r, 16, cap / 2);
        h = new_oarr((uint32_t)C_OBJARR, n, 0);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t v = runif(&g->r) < 0.9 ? LOCAL(make_app_obj(g, 1, 0)) : 0;
            g_vals[g_objs[h].v0 + i] = v;
        }
    } else if (u < 0.74) {
        uint32_t n = (uint32_t)(runif(&g->r) < 0.04 ? rlog(&g->r, 500, cap / 5) : rlog(&g->r, 4, 500));
        h = build_tree(g, n, 0);
    } else if (u < 0.82) {
        h = build_chain(g, (uint32_t)rlog(&g->r, 2, 2000));
    } else if (u < 0.87) {
        h = build_weak(g, (uint32_t)rlog(&g->r, 1, 64));
    } else {
        build_garbage(g, (uint32_t)rlog(&g->r, 1, 300));
        flush_cluster(g);
        return;
    }
    flush_cluster(g);
    attach_head(g, g_objs[h].id, g_nobj >= 2000); /* big structures hang off statics */
}

/* One stack trace per thread (hprof_out_open wrote the frameless one objects refer to). */
static void write_stack_traces(void) {
    uint8_t body[12 + 8 * 64];
    uint64_t sig = intern("()V"), src = intern("Worker.java");
    uint64_t frame_id = 0x7f3b00000000ull;
    for (int t = 0; t < THREADS; t++) {
        uint64_t first = frame_id;
        for (int f = 0; f < g_frames[t]; f++) {
            uint8_t fr[4 * 8 + 8];
            lw__put_be64(fr, frame_id + (uint64_t)f * 16);
            lw__put_be64(fr + 8, intern(k_methods[(size_t)(t * 7 + f) % (sizeof k_methods / sizeof k_methods[0])]));
            lw__put_be64(fr + 16, sig);
            lw__put_be64(fr + 24, src);
            lw__put_be32(fr + 32, (uint32_t)(C_APP0 + t * 13 + f) + 1);
            lw__put_be32(fr + 36, (uint32_t)(100 + f * 17));
            check(hprof_out_record(g_out, LW_TAG_STACK_FRAME, fr, sizeof fr));
        }
        lw__put_be32(body, 100 + (uint32_t)t);
        lw__put_be32(body + 4, (uint32_t)t + 1);
        lw__put_be32(body + 8, (uint32_t)g_frames[t]);
        for (int f = 0; f < g_frames[t]; f++) lw__put_be64(body + 12 + 8 * f, first + (uint64_t)f * 16);
        check(hprof_out_record(g_out, LW_TAG_STACK_TRACE, body, 12 + 8 * (uint32_t)g_frames[t]));
        frame_id += 0x1000;
    }
}

/* Thread objects and their locals, JNI globals; hprof_out_end adds the STICKY_CLASS roots. */
static void write_roots(gen *g) {
    for (int t = 0; t < THREADS; t++) {
        check(hprof_out_root(g_out, LW_SUB_ROOT_THREAD_OBJECT, g->thread_ids[t], (uint32_t)t + 1, 100 + (uint32_t)t));
        for (int l = 0; l < g->nlocals[t]; l++)
            check(hprof_out_root(g_out, LW_SUB_ROOT_JAVA_FRAME, g->locals[t][l], (uint32_t)t + 1,
                                 (uint32_t)(l % g_frames[t])));
    }
    for (int i = 0; i < 2000; i++) {
        uint64_t id = reservoir_pick(g);
        if (id)
            check(hprof_out_root(g_out, LW_SUB_ROOT_JNI_GLOBAL, id, (uint32_t)(0x7f3c0000u + 16u * (uint32_t)i), 0));
    }
}

static uint64_t g_seed;
static uint64_t g_first_object; /* above the class objects at the bottom of the heap */

static void run_pass(gen *g) {
    g->r.s = g_seed * 0x9E3779B97F4A7C15ull + 17;
    g->fill.s = g_seed ^ 0xF111F111ull;
    g->addr = g_first_object;
    g->region_end = HEAP_BASE + REGION_BYTES;
    g->regions = 1;
    g->big_step = g->target / 24 > 100000 ? g->target / 24 : 100000;
    g->next_big_at = g->big_step / 2;
    for (int t = 0; t < THREADS; t++) g_frames[t] = 4 + (t * 5) % 9;
    g_slot_next = 0;
    if (g->pass) {
        write_stack_traces();
        check(hprof_out_class_dumps(g_out, g_app_loader));
    }
    build_system(g);
    while (objects(g) < g->target) step(g);
    if (!g->leak_done) build_leak(g);
    /* settle the pending heads: into free static slots, the rest into registries */
    while (g->npending > 0) {
        while (g_slot_next < g_nslots && g_slots[g_slot_next].pinned) g_slot_next++;
        if (g_slot_next < g_nslots && g->npending <= g_nslots - g_slot_next) {
            set_slot(g, g_slot_next++, g->pending[--g->npending]);
            continue;
        }
        begin_cluster();
        int k = g->npending < 256 ? g->npending : 256;
        size_t h = build_aggregate(g, k);
        flush_cluster(g);
        g->pending[g->npending++] = g_objs[h].id;
    }
    /* threads' locals also point at some recently used objects */
    for (int t = 0; t < THREADS; t++)
        while (g->nlocals[t] < 24) g->locals[t][g->nlocals[t]++] = reservoir_pick(g);
    if (g->pass) {
        write_roots(g);
        check(hprof_out_end(g_out));
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(void) {
    fprintf(stderr, "usage: gen_heap OUT.hprof [--objects N] [--seed S]\n       gen_heap --version\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *out = NULL;
    uint64_t target = 10000000, seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s\n", GEN_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--objects") == 0 && i + 1 < argc) {
            target = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (argv[i][0] == '-' || out) {
            usage();
        } else {
            out = argv[i];
        }
    }
    if (!out) usage();
    if (target < 10000 || target > 2000000000ull) die("--objects must be between 10000 and 2e9%s", "");
    g_seed = seed;
    double t0 = now();
    g_out = hprof_out_new();
    if (!g_out) die("out of memory%s", "");
    build_classes(seed);
    for (size_t i = 0; i < sizeof k_methods / sizeof k_methods[0]; i++) intern(k_methods[i]);
    intern("()V");
    intern("Worker.java");
    g_first_object = hprof_out_place_classes(g_out, HEAP_BASE);

    gen *g = calloc(1, sizeof *g);
    if (!g) die("out of memory%s", "");
    g->target = target;
    run_pass(g); /* dry: finds the ids the class statics point to */
    uint64_t dry_objects = objects(g), dry_refs = g->refs, dry_addr = g->addr;

    free(g->ids);
    memset(g, 0, sizeof *g);
    g->target = target;
    g->pass = 1;
    g_ntexts = 0;
    check(hprof_out_open(g_out, out));
    run_pass(g);
    uint64_t file_bytes;
    check(hprof_out_close(g_out, &file_bytes));
    if (objects(g) != dry_objects || g->refs != dry_refs || g->addr != dry_addr)
        die("internal error: the two passes disagree%s", "");
    double t1 = now();

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int ncls = hprof_out_class_count(g_out);
    uint64_t total = objects(g) + (uint64_t)ncls;
    printf("generator:        %s (seed %" PRIu64 ")\n", GEN_VERSION, seed);
    printf("file:             %s\n", out);
    printf("bytes:            %" PRIu64 " (%.1f MB, %.1f bytes/object)\n", file_bytes, (double)file_bytes / 1e6,
           (double)file_bytes / (double)total);
    printf("objects:          %" PRIu64 " (classes %d, instances %" PRIu64 ", object arrays %" PRIu64
           ", primitive arrays %" PRIu64 ")\n",
           total, ncls, g->instances, g->obj_arrays, g->prim_arrays);
    printf("references:       %" PRIu64 " non-null (+ %" PRIu64 " static), %.2f per object\n", g->refs,
           g->static_refs, (double)g->refs / (double)total);
    printf("heap:             0x%" PRIx64 "..0x%" PRIx64 " in %" PRIu64 " regions of 32 MiB\n", (uint64_t)HEAP_BASE,
           g->addr, g->regions);
    printf("big arrays:       %" PRIu64 " (%.1f MB)\n", g->big_arrays, (double)g->big_bytes / 1e6);
    printf("garbage objects:  %" PRIu64 ", weak references: %" PRIu64 "\n", g->garbage_objs, g->weak_refs);
    printf("clusters:         %" PRIu64 " (%" PRIu64 " on static fields, %" PRIu64 " registries, %d static slots)\n",
           g->clusters, g->direct, g->registries, g_nslots);
    printf("strings/names:    %zu\n", hprof_out_name_count(g_out));
    printf("leak key:         %s\n", LEAK_KEY);
    printf("leaking object:   com.example.bench.LeakedScreen @ 0x%" PRIx64 " (KeyedWeakReference @ 0x%" PRIx64 ")\n",
           g->leak_screen, g->leak_kwr);
    printf("time:             %.2f s (max RSS %.1f MB)\n", t1 - t0, (double)ru.ru_maxrss / 1024.0);

    free(g->ids);
    free(g);
    free(g_objs);
    free(g_vals);
    free(g_sib);
    free(g_slots);
    hprof_out_free(g_out);
    return 0;
}
