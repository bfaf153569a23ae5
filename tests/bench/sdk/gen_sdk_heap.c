/* gen_sdk_heap.c — writes a HotSpot-like synthetic heap dump whose primitive arrays hold
 * pseudo-random bytes (bitmaps, network and decode buffers), for the SDK benchmark: the
 * trimmer zeroes those arrays, plain zstd cannot compress them.
 *
 * gen_sdk_heap OUT.hprof [--mb N] [--seed S] [--random-fraction F]
 *
 *   --mb N               file size to aim at, in MB (default 1024)
 *   --seed S             structure and contents (default 1): same (N, S, F, version) = same bytes
 *   --random-fraction F  share of the file held by random-content primitive arrays (default 0.6)
 *
 * The heap: "screens" (an ArrayList of View objects; each View has a parent, a sibling, a
 * label String with a LATIN1 byte[] of text, four ints, and sometimes a random byte[] bitmap
 * (1 KB..512 KB, log-uniform) or a random int[] pixel buffer), held by a static Object[] in
 * bench.Cache; now and then a big random byte[] (1..8 MB) in bench.Buffers. The controller
 * adds random arrays whenever their share of the bytes written falls below F.
 *
 * One leak, as Leakwatch's JVM agent leaves it in a dump: bench.LeakRegistry.listeners ->
 * java.util.ArrayList.elementData -> java.lang.Object[] [1] -> bench.Screen$Listener.this$0 ->
 * bench.Screen, watched by a retained io.leakwatch.KeyedWeakReference (key LEAK_KEY) held in
 * io.leakwatch.LeakWatch.watchedReferences; plus a KeyedWeakReference not yet retained and a
 * cleared one (neither a leak).
 *
 * Object ids are heap addresses (8-byte aligned, ascending, packed). Class statics point to
 * objects written later, so the object pass runs twice: a dry pass finds those ids. Names,
 * classes and records go through ../hprof_out.h, which gen_heap shares. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "bench_rng.h"
#include "hprof_out.h"

#define GEN_VERSION "gen_sdk_heap 1"
#define LEAK_KEY "5d4c3b2a-0000-4000-8000-00000000beef"
#define HEAP_BASE 0x700000000ull

static uint64_t align8(uint64_t v) { return (v + 7) & ~7ull; }

static void die(const char *msg) {
    fprintf(stderr, "gen_sdk_heap: %s\n", msg);
    exit(1);
}

/* ---- classes (hprof_out) ------------------------------------------------------------------ */

static hprof_out *g_out;

/* The generator stops at hprof_out's first failure. */
static void check(int rc) {
    if (rc < 0) die(hprof_out_error(g_out));
}

static int add_class(const char *nm, int super, int boot, const char *fields) {
    int c = hprof_out_class(g_out, nm, super, boot, fields);
    check(c);
    return c;
}
static void add_static(int cls, const char *nm, uint8_t type, uint64_t value) {
    check(hprof_out_static(g_out, cls, nm, type, value));
}

static int C_OBJECT, C_STRING, C_ABSLIST, C_ARRAYLIST, C_REF, C_WEAKREF, C_OBJARR, C_BYTEARR, C_INTARR, C_KWR,
    C_LEAKWATCH, C_VIEW, C_SCREEN, C_LISTENER, C_REGISTRY, C_CACHE, C_BUFFERS;

/* Object statics start null: main sets them from the dry pass. */
static void build_classes(void) {
    C_OBJECT = add_class("java/lang/Object", -1, 1, NULL);
    C_STRING = add_class("java/lang/String", C_OBJECT, 1, "value:O coder:B hash:I hashIsZero:Z");
    C_ABSLIST = add_class("java/util/AbstractList", C_OBJECT, 1, "modCount:I");
    C_ARRAYLIST = add_class("java/util/ArrayList", C_ABSLIST, 1, "elementData:O size:I");
    C_REF = add_class("java/lang/ref/Reference", C_OBJECT, 1, "referent:O queue:O next:O discovered:O");
    C_WEAKREF = add_class("java/lang/ref/WeakReference", C_REF, 1, NULL);
    C_OBJARR = add_class("[Ljava/lang/Object;", C_OBJECT, 1, NULL);
    C_BYTEARR = add_class("[B", C_OBJECT, 1, NULL);
    C_INTARR = add_class("[I", C_OBJECT, 1, NULL);
    C_KWR = add_class("io/leakwatch/KeyedWeakReference", C_WEAKREF, 0,
                      "key:O description:O watchUptimeMillis:J retainedUptimeMillis:J");
    add_static(C_KWR, "heapDumpUptimeMillis", LW_T_LONG, 1300000);
    C_LEAKWATCH = add_class("io/leakwatch/LeakWatch", C_OBJECT, 0, NULL);
    add_static(C_LEAKWATCH, "watchedReferences", LW_T_OBJECT, 0);
    C_VIEW = add_class("bench/View", C_OBJECT, 0,
                       "parent:O next:O label:O bitmap:O left:I top:I width:I height:I");
    C_SCREEN = add_class("bench/Screen", C_OBJECT, 0, "title:O views:O pixels:O destroyed:Z");
    C_LISTENER = add_class("bench/Screen$Listener", C_OBJECT, 0, "this$0:O");
    C_REGISTRY = add_class("bench/LeakRegistry", C_OBJECT, 0, NULL);
    add_static(C_REGISTRY, "listeners", LW_T_OBJECT, 0);
    C_CACHE = add_class("bench/Cache", C_OBJECT, 0, NULL);
    add_static(C_CACHE, "screens", LW_T_OBJECT, 0);
    C_BUFFERS = add_class("bench/Buffers", C_OBJECT, 0, NULL);
    add_static(C_BUFFERS, "big", LW_T_OBJECT, 0);
}

/* ---- the object pass (run twice: dry, then writing) ------------------------------------------ */

typedef struct gen {
    int writing;         /* 0: the dry pass; 1: g_out's file is open */
    rng r, fill;
    uint64_t addr, target, random_target;
    uint64_t bytes, random_bytes; /* file bytes of objects so far, of random arrays */
    uint64_t instances, obj_arrays, prim_arrays, random_arrays;
    uint64_t *heads; size_t nheads, capheads;
    uint64_t *bigs; size_t nbigs, capbigs;
    uint64_t cache_arr, big_arr, registry_list, watched_list; /* what the statics point to */
    uint64_t leak_screen, leak_kwr;
    int leak_done;
} gen;

static void push(uint64_t **a, size_t *n, size_t *cap, uint64_t v) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        *a = realloc(*a, *cap * sizeof **a);
        if (!*a) die("out of memory");
    }
    (*a)[(*n)++] = v;
}

static uint64_t alloc(gen *g, uint64_t heap_bytes) {
    uint64_t id = g->addr;
    g->addr += align8(heap_bytes);
    return id;
}

/* Instances: `vals` holds the `n` values of the class's layout (its fields, then the super's). */
static uint64_t w_instance(gen *g, int cls, const uint64_t *vals, size_t n) {
    uint64_t id = alloc(g, 16 + hprof_out_instance_size(g_out, cls));
    g->instances++;
    g->bytes += hprof_out_instance_bytes(g_out, cls);
    if (g->writing) check(hprof_out_instance(g_out, id, cls, vals, n));
    return id;
}
static uint64_t w_objarr(gen *g, const uint64_t *el, uint32_t n) {
    uint64_t id = alloc(g, 16 + 8ull * n);
    g->obj_arrays++;
    g->bytes += hprof_out_object_array_bytes(n);
    if (g->writing) check(hprof_out_object_array(g_out, id, C_OBJARR, el, n));
    return id;
}
/* A primitive array: random contents, or `text` repeated. */
static uint64_t w_primarr(gen *g, uint8_t type, uint32_t n, const char *text) {
    uint64_t bytes = (uint64_t)n * lw__type_size(type, 8);
    uint64_t id = alloc(g, 16 + bytes);
    g->prim_arrays++;
    g->bytes += hprof_out_primitive_array_bytes(type, n);
    if (!text) {
        g->random_arrays++;
        g->random_bytes += bytes;
    }
    if (!g->writing) return id;
    uint8_t *p = hprof_out_buffer(g_out, bytes);
    if (!p) die(hprof_out_error(g_out));
    if (text) {
        size_t tl = strlen(text);
        for (uint64_t i = 0; i < bytes; i++) p[i] = (uint8_t)text[i % tl];
    } else {
        uint64_t i = 0;
        for (; i + 8 <= bytes; i += 8) {
            uint64_t x = rnext(&g->fill);
            memcpy(p + i, &x, 8);
        }
        for (uint64_t x = rnext(&g->fill); i < bytes; i++, x >>= 8) p[i] = (uint8_t)x;
    }
    check(hprof_out_primitive_array(g_out, id, type, p, n));
    return id;
}
static uint64_t w_string(gen *g, const char *s) {
    uint64_t value = w_primarr(g, LW_T_BYTE, (uint32_t)strlen(s), s);
    uint64_t vals[4] = {value, 0 /* LATIN1 */, 0, 1};
    return w_instance(g, C_STRING, vals, 4);
}
static uint64_t w_arraylist(gen *g, const uint64_t *el, uint32_t n) {
    uint32_t cap = n < 10 ? 10 : n + n / 2;
    uint64_t *all = calloc(cap, sizeof *all);
    if (!all) die("out of memory");
    memcpy(all, el, n * sizeof *el);
    uint64_t arr = w_objarr(g, all, cap);
    free(all);
    uint64_t vals[3] = {arr, n, 1};
    return w_instance(g, C_ARRAYLIST, vals, 3);
}
static int random_behind(const gen *g) {
    return (double)g->random_bytes < (double)g->random_target * (double)g->bytes / (double)g->target;
}

static const char *const k_words[] = {"Top stories", "Settings", "Inbox", "Compose", "Profile", "Search results",
                                      "Play queue", "Photo viewer", "Checkout", "Notifications", "Map", "Help"};

/* A screen: views (a list with parents and siblings), label Strings, bitmaps while random
 * data is behind target. Returns the Screen. */
static uint64_t build_screen(gen *g, int leaked) {
    uint32_t nviews = (uint32_t)(20 + rbelow(&g->r, 180));
    uint64_t *views = malloc(nviews * sizeof *views);
    if (!views) die("out of memory");
    uint64_t prev = 0, parent = 0;
    for (uint32_t i = 0; i < nviews; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s / item %u", k_words[rbelow(&g->r, 12)], (unsigned)rbelow(&g->r, 100000));
        uint64_t lab = w_string(g, label);
        uint64_t bitmap = 0;
        if (random_behind(g)) {
            uint32_t bytes = (uint32_t)rlog(&g->r, 1024, 512 * 1024);
            bitmap = rbelow(&g->r, 4) ? w_primarr(g, LW_T_BYTE, bytes, NULL) : w_primarr(g, LW_T_INT, bytes / 4, NULL);
        }
        uint64_t vals[8] = {parent, prev, lab, bitmap, rbelow(&g->r, 1080), rbelow(&g->r, 1920), 1 + rbelow(&g->r, 1080),
                            1 + rbelow(&g->r, 400)};
        views[i] = w_instance(g, C_VIEW, vals, 8);
        if (i % 8 == 0) parent = views[i];
        prev = views[i];
    }
    uint64_t list = w_arraylist(g, views, nviews);
    free(views);
    uint64_t title = w_string(g, leaked ? "Leaked screen" : k_words[rbelow(&g->r, 12)]);
    uint64_t pixels = leaked ? w_primarr(g, LW_T_BYTE, 64 * 1024, NULL) : 0;
    uint64_t vals[4] = {title, list, pixels, (uint64_t)leaked};
    return w_instance(g, C_SCREEN, vals, 4);
}

static void build_leak(gen *g) {
    uint64_t screen = build_screen(g, 1);
    uint64_t listener = w_instance(g, C_LISTENER, &screen, 1);
    uint64_t other_screen = build_screen(g, 0);
    uint64_t other = w_instance(g, C_LISTENER, &other_screen, 1);
    uint64_t els[3] = {other, listener, other};
    g->registry_list = w_arraylist(g, els, 3);
    static const char *const keys[3] = {LEAK_KEY, "5d4c3b2a-0000-4000-8000-00000000bee2",
                                        "5d4c3b2a-0000-4000-8000-00000000bee3"};
    static const char *const descs[3] = {"bench.Screen destroyed", "bench.Screen#onDestroy was called",
                                         "bench.Screen destroyed"};
    uint64_t kwrs[3];
    for (int i = 0; i < 3; i++) {
        uint64_t key = w_string(g, keys[i]), desc = w_string(g, descs[i]);
        /* own fields first (key, description, watch, retained), then Reference's */
        uint64_t referent = i == 0 ? screen : i == 1 ? other : 0;
        uint64_t retained = i == 0 ? 1205102 : i == 1 ? (uint64_t)-1 : 1203000;
        uint64_t vals[8] = {key, desc, 1200000 + (uint64_t)i * 1000, retained, referent, 0, 0, 0};
        kwrs[i] = w_instance(g, C_KWR, vals, 8);
        if (i == 0) g->leak_kwr = kwrs[i];
    }
    g->watched_list = w_arraylist(g, kwrs, 3);
    g->leak_screen = screen;
    g->leak_done = 1;
}

static uint64_t g_first_object; /* above the class objects at the bottom of the heap */

static void run_pass(gen *g, uint64_t seed) {
    g->r.s = seed * 0x9E3779B97F4A7C15ull + 17;
    g->fill.s = seed ^ 0xF111F111ull;
    g->addr = g_first_object;
    if (g->writing) check(hprof_out_class_dumps(g_out, 0)); /* the app classes too: loader 0 */
    while (g->bytes < g->target) {
        if (!g->leak_done && g->bytes >= g->target * 6 / 10) build_leak(g);
        push(&g->heads, &g->nheads, &g->capheads, build_screen(g, 0));
        if (random_behind(g) && rbelow(&g->r, 8) == 0)
            push(&g->bigs, &g->nbigs, &g->capbigs,
                 w_primarr(g, LW_T_BYTE, (uint32_t)rlog(&g->r, 1u << 20, 8u << 20), NULL));
    }
    if (!g->leak_done) build_leak(g);
    g->cache_arr = w_objarr(g, g->heads, (uint32_t)g->nheads);
    g->big_arr = w_objarr(g, g->bigs, (uint32_t)g->nbigs);
    if (g->writing) check(hprof_out_end(g_out));
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    const char *out = NULL;
    uint64_t mb = 1024, seed = 1;
    double frac = 0.6;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s\n", GEN_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            mb = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--random-fraction") == 0 && i + 1 < argc) {
            frac = strtod(argv[++i], NULL);
        } else if (argv[i][0] == '-' || out) {
            fprintf(stderr, "usage: gen_sdk_heap OUT.hprof [--mb N] [--seed S] [--random-fraction F]\n");
            return 2;
        } else {
            out = argv[i];
        }
    }
    if (!out || mb < 4 || mb > 65536 || frac < 0 || frac > 0.95) {
        fprintf(stderr, "usage: gen_sdk_heap OUT.hprof [--mb 4..65536] [--seed S] [--random-fraction 0..0.95]\n");
        return 2;
    }
    double t0 = now();
    g_out = hprof_out_new();
    if (!g_out) die("out of memory");
    build_classes();
    g_first_object = hprof_out_place_classes(g_out, HEAP_BASE);
    gen *g = calloc(1, sizeof *g);
    if (!g) die("out of memory");
    g->target = mb * 1000000ull;
    g->random_target = (uint64_t)((double)g->target * frac);
    run_pass(g, seed); /* dry: the ids the statics point to (each the class's only static) */
    check(hprof_out_set_static(g_out, C_CACHE, 0, g->cache_arr));
    check(hprof_out_set_static(g_out, C_BUFFERS, 0, g->big_arr));
    check(hprof_out_set_static(g_out, C_REGISTRY, 0, g->registry_list));
    check(hprof_out_set_static(g_out, C_LEAKWATCH, 0, g->watched_list));
    uint64_t dry_addr = g->addr;
    free(g->heads);
    free(g->bigs);
    memset(g, 0, sizeof *g);
    g->target = mb * 1000000ull;
    g->random_target = (uint64_t)((double)g->target * frac);
    g->writing = 1;
    check(hprof_out_open(g_out, out));
    run_pass(g, seed);
    uint64_t file_bytes;
    check(hprof_out_close(g_out, &file_bytes));
    if (g->addr != dry_addr) die("internal error: the two passes disagree");
    printf("generator:        %s (seed %" PRIu64 ", random fraction %.2f)\n", GEN_VERSION, seed, frac);
    printf("file:             %s\n", out);
    printf("bytes:            %" PRIu64 " (%.1f MB)\n", file_bytes, (double)file_bytes / 1e6);
    printf("objects:          %" PRIu64 " instances, %" PRIu64 " object arrays, %" PRIu64 " primitive arrays\n",
           g->instances, g->obj_arrays, g->prim_arrays);
    printf("random arrays:    %" PRIu64 " holding %.1f MB (%.1f %% of the file)\n", g->random_arrays,
           (double)g->random_bytes / 1e6, 100.0 * (double)g->random_bytes / (double)file_bytes);
    printf("leak key:         %s (bench.Screen @ 0x%" PRIx64 ")\n", LEAK_KEY, g->leak_screen);
    printf("time:             %.2f s\n", now() - t0);
    free(g->heads);
    free(g->bigs);
    free(g);
    hprof_out_free(g_out);
    return 0;
}
