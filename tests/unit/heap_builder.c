/* heap_builder.c — synthetic HPROF dumps for the unit tests (see heap_builder.h). */
#define _GNU_SOURCE
#include "heap_builder.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "hprof_format.h"
#include "hprof_writer.h"

typedef struct {
    uint64_t id;
    char *text;
} hb_str;

typedef struct {
    char *name;
    uint8_t type;
    uint64_t value;
} hb_fdef;

typedef struct {
    char *name;
    uint64_t id;
    uint64_t super_id;
    int super_index;
    hb_fdef *fields;
    size_t nfields;
    hb_fdef *statics;
    size_t nstatics;
    uint32_t own_bytes;
} hb_cls;

enum { OBJ_INSTANCE, OBJ_OBJ_ARRAY, OBJ_PRIM_ARRAY, OBJ_PRIM_NODATA };

typedef struct {
    uint8_t kind;
    uint64_t id;
    int cls;              /* instance: class; object array: array class */
    uint8_t *data;        /* instance field bytes; primitive array bytes */
    uint32_t len;
    uint64_t *elems;      /* object array */
    uint32_t count;
    uint8_t elem_type;
    uint64_t end_offset;  /* file offset after the sub-record, once written */
} hb_obj;

typedef struct {
    uint8_t tag;
    uint64_t id;
    uint32_t a, b;
} hb_rt;

typedef struct {
    uint8_t tag;
    uint8_t *body;
    uint32_t len;
} hb_rec;

struct hb {
    char version[32];
    unsigned ids;
    uint64_t segment_max;
    int reverse;
    int64_t dump_uptime;
    hb_str *strs;
    size_t nstrs, cstrs;
    uint64_t next_string_id;
    hb_cls *classes;
    size_t nclasses, cclasses;
    uint64_t next_class_id;
    hb_obj *objs;
    size_t nobjs, cobjs;
    uint64_t next_obj_id, obj_step;
    /* id -> object index + 1 */
    uint64_t *map_ids;
    uint32_t *map_idx;
    size_t map_cap;
    hb_rt *roots;
    size_t nroots, croots;
    hb_rec *recs;
    size_t nrecs, crecs;
    hb_rec *raws; /* raw sub-records after the objects (tag == 0) or heap-dump infos (tag == 1) */
    size_t nraws, craws;
};

#define GROW(arr, n, cap)                                                              \
    do {                                                                               \
        if ((n) == (cap)) {                                                            \
            (cap) = (cap) ? (cap) * 2 : 16;                                            \
            void *np_ = realloc((arr), (cap) * sizeof *(arr));                         \
            if (!np_) fail_msg("heap builder: out of memory");                         \
            (arr) = np_;                                                               \
        }                                                                              \
    } while (0)

static char *xstrdup(const char *s) {
    char *d = strdup(s);
    if (!d) fail_msg("heap builder: out of memory");
    return d;
}

static void *xcalloc(size_t n, size_t s) {
    void *p = calloc(n ? n : 1, s ? s : 1);
    if (!p) fail_msg("heap builder: out of memory");
    return p;
}

static uint8_t type_of(char c) {
    switch (c) {
    case 'O': return LW_T_OBJECT;
    case 'Z': return LW_T_BOOLEAN;
    case 'C': return LW_T_CHAR;
    case 'F': return LW_T_FLOAT;
    case 'D': return LW_T_DOUBLE;
    case 'B': return LW_T_BYTE;
    case 'S': return LW_T_SHORT;
    case 'I': return LW_T_INT;
    case 'J': return LW_T_LONG;
    }
    fail_msg("heap builder: bad type letter '%c'", c);
    return 0;
}

static hb_fdef *parse_fields(const char *spec, size_t *n) {
    *n = 0;
    if (!spec || !*spec) return NULL;
    char *copy = xstrdup(spec);
    size_t cap = 0;
    hb_fdef *out = NULL;
    for (char *save = NULL, *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *colon = strrchr(tok, ':');
        if (!colon || colon[1] == 0 || colon[2] != 0) fail_msg("heap builder: bad field spec '%s'", tok);
        *colon = 0;
        GROW(out, *n, cap);
        out[*n] = (hb_fdef){xstrdup(tok), type_of(colon[1]), 0};
        (*n)++;
    }
    free(copy);
    return out;
}

/* ---- id map ---------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static void map_put(hb *b, uint64_t id, uint32_t idx);

static void map_grow(hb *b) {
    uint64_t *old_ids = b->map_ids;
    uint32_t *old_idx = b->map_idx;
    size_t old_cap = b->map_cap;
    b->map_cap = old_cap ? old_cap * 2 : 1024;
    b->map_ids = xcalloc(b->map_cap, sizeof *b->map_ids);
    b->map_idx = xcalloc(b->map_cap, sizeof *b->map_idx);
    for (size_t i = 0; i < old_cap; i++)
        if (old_idx[i]) map_put(b, old_ids[i], old_idx[i] - 1);
    free(old_ids);
    free(old_idx);
}

static void map_put(hb *b, uint64_t id, uint32_t idx) {
    size_t mask = b->map_cap - 1;
    for (size_t s = mix(id) & mask;; s = (s + 1) & mask) {
        if (!b->map_idx[s]) {
            b->map_ids[s] = id;
            b->map_idx[s] = idx + 1;
            return;
        }
        if (b->map_ids[s] == id) return; /* duplicate id: the first object keeps it */
    }
}

static hb_obj *obj_by_id(const hb *b, uint64_t id) {
    if (!b->map_cap) return NULL;
    size_t mask = b->map_cap - 1;
    for (size_t s = mix(id) & mask;; s = (s + 1) & mask) {
        if (!b->map_idx[s]) return NULL;
        if (b->map_ids[s] == id) return &b->objs[b->map_idx[s] - 1];
    }
}

static hb_obj *new_obj(hb *b, uint8_t kind) {
    GROW(b->objs, b->nobjs, b->cobjs);
    hb_obj *o = &b->objs[b->nobjs];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->id = b->next_obj_id;
    b->next_obj_id += b->obj_step;
    if ((b->nobjs + 1) * 2 > b->map_cap) map_grow(b);
    map_put(b, o->id, (uint32_t)b->nobjs);
    b->nobjs++;
    return o;
}

/* ---- construction ------------------------------------------------------------------------- */

static int class_index(const hb *b, const char *name) {
    for (size_t i = 0; i < b->nclasses; i++)
        if (strcmp(b->classes[i].name, name) == 0) return (int)i;
    return -1;
}

static int class_index_by_id(const hb *b, uint64_t id) {
    for (size_t i = 0; i < b->nclasses; i++)
        if (b->classes[i].id == id) return (int)i;
    return -1;
}

hb *hb_new(const char *version, unsigned id_size) {
    hb *b = xcalloc(1, sizeof *b);
    snprintf(b->version, sizeof b->version, "%s", version);
    b->ids = id_size;
    b->dump_uptime = 10000;
    b->next_string_id = 0x100000;
    b->next_class_id = 0x1000000;
    b->next_obj_id = 0x10000000;
    b->obj_step = 16;
    hb_class(b, "java.lang.Object", NULL, NULL, NULL);
    hb_class(b, "java.lang.String", NULL, "value:O coder:B hash:I", NULL);
    hb_class(b, "java.lang.Thread", NULL, "name:O priority:I", NULL);
    hb_class(b, "java.lang.ref.Reference", NULL, "referent:O queue:O", NULL);
    hb_class(b, "java.lang.ref.WeakReference", "java.lang.ref.Reference", NULL, NULL);
    hb_class(b, "java.lang.ref.SoftReference", "java.lang.ref.Reference", NULL, NULL);
    hb_class(b, "java.lang.ref.PhantomReference", "java.lang.ref.Reference", NULL, NULL);
    hb_class(b, HB_OBJECT_ARRAY, NULL, NULL, NULL);
    return b;
}

void hb_free(hb *b) {
    if (!b) return;
    for (size_t i = 0; i < b->nstrs; i++) free(b->strs[i].text);
    for (size_t i = 0; i < b->nclasses; i++) {
        hb_cls *c = &b->classes[i];
        free(c->name);
        for (size_t k = 0; k < c->nfields; k++) free(c->fields[k].name);
        for (size_t k = 0; k < c->nstatics; k++) free(c->statics[k].name);
        free(c->fields);
        free(c->statics);
    }
    for (size_t i = 0; i < b->nobjs; i++) {
        free(b->objs[i].data);
        free(b->objs[i].elems);
    }
    for (size_t i = 0; i < b->nrecs; i++) free(b->recs[i].body);
    for (size_t i = 0; i < b->nraws; i++) free(b->raws[i].body);
    free(b->strs);
    free(b->classes);
    free(b->objs);
    free(b->map_ids);
    free(b->map_idx);
    free(b->roots);
    free(b->recs);
    free(b->raws);
    free(b);
}

void hb_set_segment_max(hb *b, uint64_t m) { b->segment_max = m; }
void hb_set_reverse_objects(hb *b, int r) { b->reverse = r; }
void hb_set_next_object_id(hb *b, uint64_t id, uint64_t step) {
    b->next_obj_id = id;
    b->obj_step = step;
}
void hb_set_heap_dump_uptime(hb *b, int64_t ms) { b->dump_uptime = ms; }

uint64_t hb_string_id(hb *b, const char *text) {
    for (size_t i = 0; i < b->nstrs; i++)
        if (strcmp(b->strs[i].text, text) == 0) return b->strs[i].id;
    GROW(b->strs, b->nstrs, b->cstrs);
    b->strs[b->nstrs] = (hb_str){b->next_string_id++, xstrdup(text)};
    return b->strs[b->nstrs++].id;
}

uint64_t hb_class(hb *b, const char *name, const char *super_name, const char *fields, const char *statics) {
    if (class_index(b, name) >= 0) fail_msg("heap builder: class %s defined twice", name);
    int super = -1;
    if (super_name) {
        super = class_index(b, super_name);
        if (super < 0) fail_msg("heap builder: unknown super class %s", super_name);
    } else if (strcmp(name, "java.lang.Object") != 0) {
        super = class_index(b, "java.lang.Object");
    }
    GROW(b->classes, b->nclasses, b->cclasses);
    hb_cls *c = &b->classes[b->nclasses];
    memset(c, 0, sizeof *c);
    c->name = xstrdup(name);
    c->id = b->next_class_id;
    b->next_class_id += 16;
    c->super_index = super;
    c->super_id = super >= 0 ? b->classes[super].id : 0;
    c->fields = parse_fields(fields, &c->nfields);
    c->statics = parse_fields(statics, &c->nstatics);
    for (size_t i = 0; i < c->nfields; i++) c->own_bytes += lw__type_size(c->fields[i].type, b->ids);
    b->nclasses++;
    hb_string_id(b, name);
    for (size_t i = 0; i < c->nfields; i++) hb_string_id(b, c->fields[i].name);
    for (size_t i = 0; i < c->nstatics; i++) hb_string_id(b, c->statics[i].name);
    return c->id;
}

uint64_t hb_class_id(hb *b, const char *name) {
    int i = class_index(b, name);
    return i < 0 ? 0 : b->classes[i].id;
}

void hb_set_static(hb *b, uint64_t class_id, const char *name, uint64_t value) {
    int ci = class_index_by_id(b, class_id);
    if (ci < 0) fail_msg("heap builder: no class with id 0x%llx", (unsigned long long)class_id);
    hb_cls *c = &b->classes[ci];
    for (size_t i = 0; i < c->nstatics; i++)
        if (strcmp(c->statics[i].name, name) == 0) {
            c->statics[i].value = value;
            return;
        }
    fail_msg("heap builder: class %s has no static %s", c->name, name);
}

static uint32_t data_bytes(const hb *b, int ci) {
    uint32_t n = 0;
    for (; ci >= 0; ci = b->classes[ci].super_index) n += b->classes[ci].own_bytes;
    return n;
}

uint64_t hb_instance(hb *b, const char *class_name) {
    int ci = class_index(b, class_name);
    if (ci < 0) fail_msg("heap builder: unknown class %s", class_name);
    uint32_t len = data_bytes(b, ci);
    hb_obj *o = new_obj(b, OBJ_INSTANCE);
    o->cls = ci;
    o->len = len;
    o->data = xcalloc(len, 1);
    return o->id;
}

static void put_be(uint8_t *p, unsigned n, uint64_t v) {
    for (unsigned i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

void hb_set(hb *b, uint64_t obj, const char *field, uint64_t value) {
    hb_obj *o = obj_by_id(b, obj);
    if (!o || o->kind != OBJ_INSTANCE) fail_msg("heap builder: 0x%llx is no instance", (unsigned long long)obj);
    uint32_t off = 0;
    for (int ci = o->cls; ci >= 0; ci = b->classes[ci].super_index) {
        const hb_cls *c = &b->classes[ci];
        for (size_t i = 0; i < c->nfields; i++) {
            unsigned sz = lw__type_size(c->fields[i].type, b->ids);
            if (strcmp(c->fields[i].name, field) == 0) {
                put_be(o->data + off, sz, value);
                return;
            }
            off += sz;
        }
    }
    fail_msg("heap builder: class %s has no field %s", b->classes[o->cls].name, field);
}

uint64_t hb_object_array(hb *b, const char *array_class, const uint64_t *elements, uint32_t count) {
    const char *cn = array_class ? array_class : HB_OBJECT_ARRAY;
    int ci = class_index(b, cn);
    if (ci < 0) {
        hb_class(b, cn, NULL, NULL, NULL);
        ci = class_index(b, cn);
    }
    hb_obj *o = new_obj(b, OBJ_OBJ_ARRAY);
    o->cls = ci;
    o->count = count;
    o->elems = xcalloc(count, sizeof *o->elems);
    if (elements) memcpy(o->elems, elements, count * sizeof *elements);
    return o->id;
}

void hb_array_set(hb *b, uint64_t array, uint32_t index, uint64_t value) {
    hb_obj *o = obj_by_id(b, array);
    if (!o || o->kind != OBJ_OBJ_ARRAY || index >= o->count) fail_msg("heap builder: bad array set");
    o->elems[index] = value;
}

uint64_t hb_prim_array(hb *b, uint8_t type, const void *be_data, uint32_t count) {
    unsigned es = lw__type_size(type, b->ids);
    if (!es || type == LW_T_OBJECT) fail_msg("heap builder: bad primitive type %u", type);
    hb_obj *o = new_obj(b, OBJ_PRIM_ARRAY);
    o->elem_type = type;
    o->count = count;
    o->len = count * es;
    o->data = xcalloc(o->len, 1);
    if (be_data) memcpy(o->data, be_data, o->len);
    return o->id;
}

uint64_t hb_prim_array_nodata(hb *b, uint8_t type, uint32_t count) {
    hb_obj *o = new_obj(b, OBJ_PRIM_NODATA);
    o->elem_type = type;
    o->count = count;
    return o->id;
}

uint64_t hb_jstring(hb *b, const char *text) {
    uint64_t value = hb_prim_array(b, LW_T_BYTE, text, (uint32_t)strlen(text));
    uint64_t s = hb_instance(b, "java.lang.String");
    hb_set(b, s, "value", value);
    hb_set(b, s, "coder", 0);
    return s;
}

void hb_root(hb *b, uint8_t tag, uint64_t id, uint32_t a, uint32_t bb) {
    GROW(b->roots, b->nroots, b->croots);
    b->roots[b->nroots++] = (hb_rt){tag, id, a, bb};
}

uint64_t hb_thread(hb *b, const char *name, uint32_t serial) {
    uint64_t t = hb_instance(b, "java.lang.Thread");
    hb_set(b, t, "name", hb_jstring(b, name));
    hb_root(b, LW_SUB_ROOT_THREAD_OBJECT, t, serial, 0);
    return t;
}

static const char *kwr_class(hb *b, hb_kwr_kind kind) {
    static const char *const names[] = {"io.leakwatch.KeyedWeakReference", "leakcanary.KeyedWeakReference",
                                        "com.squareup.leakcanary.KeyedWeakReference"};
    const char *n = names[kind];
    if (class_index(b, n) < 0) {
        if (kind == HB_KWR_LEAKCANARY1) {
            hb_class(b, n, "java.lang.ref.WeakReference", "key:O name:O", NULL);
        } else {
            uint64_t c = hb_class(b, n, "java.lang.ref.WeakReference",
                                  "key:O description:O watchUptimeMillis:J retainedUptimeMillis:J", "heapDumpUptimeMillis:J");
            hb_set_static(b, c, "heapDumpUptimeMillis", (uint64_t)b->dump_uptime);
        }
    }
    return n;
}

uint64_t hb_watch_ex(hb *b, hb_kwr_kind kind, uint64_t obj, const char *key, const char *description,
                     int64_t watch_uptime, int64_t retained_uptime) {
    const char *cn = kwr_class(b, kind);
    uint64_t k = hb_jstring(b, key);
    uint64_t d = description ? hb_jstring(b, description) : 0;
    uint64_t r = hb_instance(b, cn);
    hb_set(b, r, "referent", obj);
    hb_set(b, r, "key", k);
    if (kind == HB_KWR_LEAKCANARY1) {
        hb_set(b, r, "name", d);
    } else {
        hb_set(b, r, "description", d);
        hb_set(b, r, "watchUptimeMillis", (uint64_t)watch_uptime);
        hb_set(b, r, "retainedUptimeMillis", (uint64_t)retained_uptime);
    }
    return r;
}

uint64_t hb_watch(hb *b, uint64_t obj, const char *key, const char *description, int retained) {
    return hb_watch_ex(b, HB_KWR_LEAKWATCH, obj, key, description, 1000, retained ? 5000 : -1);
}

void hb_add_screen_leaks(hb *b, uint64_t registry) {
    hb_class(b, "com.example.Listener", NULL, "owner:O name:O", NULL);
    hb_class(b, "com.example.Screen", NULL, "data:O", NULL);
    uint64_t arr = hb_object_array(b, NULL, NULL, 8);
    hb_set_static(b, registry, "listeners", arr);
    for (uint32_t i = 0; i < 3; i++) {
        uint64_t l = hb_instance(b, "com.example.Listener"), s = hb_instance(b, "com.example.Screen");
        hb_set(b, s, "data", hb_prim_array(b, LW_T_INT, NULL, 10));
        hb_set(b, l, "owner", s);
        hb_set(b, l, "name", hb_jstring(b, "listener"));
        hb_array_set(b, arr, i * 2 + 1, l);
        char key[32];
        snprintf(key, sizeof key, "screen-%u", i);
        hb_watch(b, s, key, "Screen closed", 1);
    }
    uint64_t single = hb_instance(b, "com.example.Screen");
    hb_set_static(b, registry, "single", single);
    hb_watch(b, single, "single", "single screen", 1);
}

void hb_add_local_leak(hb *b) {
    hb_class(b, "com.example.Job", NULL, NULL, NULL);
    uint64_t job = hb_instance(b, "com.example.Job");
    hb_thread(b, "worker", 3);
    hb_root(b, LW_SUB_ROOT_JAVA_FRAME, job, 3, 0);
    hb_watch(b, job, "job", "job done", 1);
}

void hb_record(hb *b, uint8_t tag, const void *body, uint32_t len) {
    GROW(b->recs, b->nrecs, b->crecs);
    uint8_t *copy = xcalloc(len, 1);
    if (len) memcpy(copy, body, len);
    b->recs[b->nrecs++] = (hb_rec){tag, copy, len};
}

static void add_raw(hb *b, uint8_t kind, const void *bytes, size_t len) {
    GROW(b->raws, b->nraws, b->craws);
    uint8_t *copy = xcalloc(len, 1);
    memcpy(copy, bytes, len);
    b->raws[b->nraws++] = (hb_rec){kind, copy, (uint32_t)len};
}

void hb_subrecord_raw(hb *b, const void *bytes, size_t len) { add_raw(b, 0, bytes, len); }

void hb_heap_dump_info(hb *b, uint32_t heap_id, const char *name) {
    uint8_t buf[13];
    buf[0] = LW_SUB_HEAP_DUMP_INFO;
    lw__put_be32(buf + 1, heap_id);
    lw__put_be_id(buf + 5, hb_string_id(b, name), b->ids);
    add_raw(b, 1, buf, 5 + b->ids);
}

/* ---- writing -------------------------------------------------------------------------------- */

static void write_obj(hb *b, lw__hprof_writer *w, hb_obj *o) {
    switch (o->kind) {
    case OBJ_INSTANCE:
        lw__hprof_writer_instance(w, o->id, 0, b->classes[o->cls].id, o->data, o->len);
        break;
    case OBJ_OBJ_ARRAY:
        lw__hprof_writer_object_array(w, o->id, 0, b->classes[o->cls].id, o->elems, o->count);
        break;
    case OBJ_PRIM_ARRAY:
        lw__hprof_writer_primitive_array(w, o->id, 0, o->elem_type, o->data, o->count);
        break;
    case OBJ_PRIM_NODATA: {
        uint8_t buf[32];
        size_t n = 0;
        buf[n++] = LW_SUB_PRIMITIVE_ARRAY_NODATA;
        lw__put_be_id(buf + n, o->id, b->ids);
        n += b->ids;
        lw__put_be32(buf + n, 0);
        n += 4;
        lw__put_be32(buf + n, o->count);
        n += 4;
        buf[n++] = o->elem_type;
        lw__hprof_writer_subrecord_raw(w, buf, n);
        break;
    }
    }
    o->end_offset = lw__hprof_writer_offset(w);
}

void hb_write(hb *b, const char *path) {
    lw__hprof_writer *w = NULL;
    lw_error err = {0};
    if (lw__hprof_writer_open(&w, path, b->version, b->ids, 1700000000000ull, b->segment_max, &err) != LW_OK)
        fail_msg("heap builder: %s", err.message);
    for (size_t i = 0; i < b->nstrs; i++) lw__hprof_writer_string(w, b->strs[i].id, b->strs[i].text, strlen(b->strs[i].text));
    for (size_t i = 0; i < b->nclasses; i++)
        lw__hprof_writer_load_class(w, (uint32_t)i + 1, b->classes[i].id, 0, hb_string_id(b, b->classes[i].name));
    for (size_t i = 0; i < b->nrecs; i++) lw__hprof_writer_record(w, b->recs[i].tag, b->recs[i].body, b->recs[i].len);
    for (size_t i = 0; i < b->nraws; i++)
        if (b->raws[i].tag == 1) lw__hprof_writer_subrecord_raw(w, b->raws[i].body, b->raws[i].len);
    for (size_t i = 0; i < b->nroots; i++)
        lw__hprof_writer_root(w, b->roots[i].tag, b->roots[i].id, b->roots[i].a, b->roots[i].b);
    for (size_t i = 0; i < b->nclasses; i++) {
        hb_cls *c = &b->classes[i];
        lw__hprof_field_def *st = xcalloc(c->nstatics, sizeof *st), *fd = xcalloc(c->nfields, sizeof *fd);
        for (size_t k = 0; k < c->nstatics; k++)
            st[k] = (lw__hprof_field_def){hb_string_id(b, c->statics[k].name), c->statics[k].type, c->statics[k].value};
        for (size_t k = 0; k < c->nfields; k++) fd[k] = (lw__hprof_field_def){hb_string_id(b, c->fields[k].name), c->fields[k].type, 0};
        lw__hprof_class_def def = {c->id, c->super_id, 0, 0, data_bytes(b, (int)i) + 16, st, c->nstatics, fd, c->nfields};
        lw__hprof_writer_class_dump(w, &def);
        free(st);
        free(fd);
    }
    for (size_t i = 0; i < b->nobjs; i++) write_obj(b, w, &b->objs[b->reverse ? b->nobjs - 1 - i : i]);
    for (size_t i = 0; i < b->nraws; i++)
        if (b->raws[i].tag == 0) lw__hprof_writer_subrecord_raw(w, b->raws[i].body, b->raws[i].len);
    lw__hprof_writer_end_heap_dump(w);
    if (lw__hprof_writer_close(w, &err) != LW_OK) fail_msg("heap builder: %s", err.message);
}

char *hb_temp_path(const char *suffix) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    char buf[512];
    snprintf(buf, sizeof buf, "%s/lw-unit-XXXXXX%s", dir, suffix ? suffix : "");
    int fd = mkstemps(buf, suffix ? (int)strlen(suffix) : 0);
    if (fd < 0) fail_msg("heap builder: mkstemps failed");
    close(fd);
    return xstrdup(buf);
}

char *hb_write_temp(hb *b) {
    char *p = hb_temp_path(".hprof");
    hb_write(b, p);
    return p;
}

uint8_t *hb_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) fail_msg("cannot stat %s", path);
    uint8_t *d = xcalloc((size_t)sb.st_size, 1);
    if (sb.st_size && fread(d, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) fail_msg("cannot read %s", path);
    fclose(f);
    *size = (size_t)sb.st_size;
    return d;
}

uint8_t *hb_bytes(hb *b, size_t *size) {
    char *p = hb_write_temp(b);
    uint8_t *d = hb_read_file(p, size);
    unlink(p);
    free(p);
    return d;
}

void hb_get_counts(const hb *b, hb_counts *c) {
    memset(c, 0, sizeof *c);
    c->classes = b->nclasses;
    for (size_t i = 0; i < b->nobjs; i++) {
        switch (b->objs[i].kind) {
        case OBJ_INSTANCE: c->instances++; break;
        case OBJ_OBJ_ARRAY: c->object_arrays++; break;
        default: c->primitive_arrays++; break;
        }
    }
    for (size_t i = 0; i < b->nroots; i++) c->roots += b->roots[i].id != 0;
}

int hb_data_range(const hb *b, uint64_t id, uint64_t *offset, uint64_t *len) {
    hb_obj *o = obj_by_id(b, id);
    if (!o || o->kind != OBJ_PRIM_ARRAY || !o->end_offset) return 0;
    *offset = o->end_offset - o->len;
    *len = o->len;
    return 1;
}

void hb_scan_records(const uint8_t *d, size_t size, uint64_t *tag_counts, uint64_t *boundaries, size_t cap, size_t *nb) {
    size_t n = 0;
    const uint8_t *nul = memchr(d, 0, size);
    if (!nul) fail_msg("scan: no header");
    size_t pos = (size_t)(nul - d) + 1 + 12;
    if (tag_counts) memset(tag_counts, 0, 256 * sizeof *tag_counts);
    for (;;) {
        if (boundaries && n < cap) boundaries[n] = pos;
        n++;
        if (pos >= size) break;
        if (size - pos < 9) fail_msg("scan: truncated record header at %zu", pos);
        uint32_t len = lw__be32(d + pos + 5);
        if (tag_counts) tag_counts[d[pos]]++;
        pos += 9 + (size_t)len;
        if (pos > size) fail_msg("scan: record runs past the end");
    }
    if (nb) *nb = n;
}

/* ---- conveniences --------------------------------------------------------------------------- */

lw_heap *hb_open(hb *b) {
    char *p = hb_write_temp(b);
    lw_heap *heap = NULL;
    lw_error err = {0};
    lw_status st = lw_heap_open(&heap, p, NULL, &err);
    unlink(p);
    free(p);
    if (st != LW_OK) fail_msg("lw_heap_open: %s (%s)", lw_strerror(st), err.message);
    return heap;
}

lw_leak_report *hb_analyze(lw_heap *heap, const char *key) {
    lw_analysis_options o = {sizeof o, key, 0, NULL, NULL};
    lw_leak_report *r = NULL;
    lw_error err = {0};
    lw_status st = lw_heap_analyze(heap, &o, &r, &err);
    if (st != LW_OK) fail_msg("lw_heap_analyze: %s (%s)", lw_strerror(st), err.message);
    return r;
}

lw_leak_report *hb_analyze_dump(hb *b, const char *key) {
    lw_heap *heap = hb_open(b);
    lw_leak_report *r = hb_analyze(heap, key);
    lw_heap_free(heap);
    return r;
}

char *hb_report_json(lw_leak_report *r) {
    int64_t a = r->index_ms, p = r->paths_ms, t = r->retained_ms;
    r->index_ms = r->paths_ms = r->retained_ms = -1;
    char *s = lw_leak_report_to_json(r, 0);
    r->index_ms = a;
    r->paths_ms = p;
    r->retained_ms = t;
    if (!s) fail_msg("lw_leak_report_to_json returned NULL");
    return s;
}
