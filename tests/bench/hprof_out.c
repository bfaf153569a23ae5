/* hprof_out.c — the benchmark generators' shared dump writing (see hprof_out.h). */
#define _POSIX_C_SOURCE 200809L
#include "hprof_out.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "hprof_format.h"
#include "hprof_writer.h"

#define FIRST_NAME_ID 0x7f3a10000000ull /* where HotSpot keeps its Symbols */
#define TIMESTAMP_MS 1767225600000ull   /* 2026-01-01T00:00:00Z, fixed for reproducibility */
#define STACK_SERIAL 1u                 /* the frameless trace objects point to, as HotSpot does */
#define ID_SIZE 8u

typedef struct oname {
    char *s;
    size_t len;
    uint64_t id;
} oname;

typedef struct oclass {
    size_t name;                  /* index into names */
    int super;                    /* index, -1 for none */
    int boot;
    uint64_t id;
    lw__hprof_field_def *fields;  /* declared instance fields, in order */
    size_t nfields;
    lw__hprof_field_def *statics;
    size_t nstatics;
    uint8_t *layout;              /* own field types, then the super's, ... */
    size_t nlayout;
    uint32_t size;                /* INSTANCE_DUMP data bytes */
} oclass;

struct hprof_out {
    oname *names;
    size_t nnames, capnames;
    uint32_t *name_ht;            /* open addressing over names: 0 = empty, else index + 1 */
    size_t htcap;                 /* a power of two, at least twice nnames */
    uint64_t next_name_id;
    oclass *classes;
    size_t nclasses, capclasses;
    lw__hprof_writer *w;          /* NULL before hprof_out_open and after hprof_out_close */
    int dumped;                   /* the CLASS_DUMPs are written: statics are final */
    uint8_t *buf;
    size_t bufcap;
    char err[sizeof ((lw_error *)0)->message];
};

static int fail(hprof_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(hprof_out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->err, sizeof o->err, fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t align8(uint64_t v) { return (v + 7) & ~7ull; }

/* Room for one more of `n` items of `size` bytes at `items` (capacity *cap); the array, maybe
 * moved, or NULL (the old one intact) when out of memory. */
static void *grow(hprof_out *o, void *items, size_t n, size_t *cap, size_t size) {
    if (n < *cap) return items;
    size_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(items, c * size);
    if (!p) {
        fail(o, "out of memory");
        return NULL;
    }
    *cap = c;
    return p;
}

static const char *class_name(const hprof_out *o, int cls) { return o->names[o->classes[cls].name].s; }

static int bad_class(hprof_out *o, int cls) {
    if (cls >= 0 && (size_t)cls < o->nclasses) return 0;
    return fail(o, "no class %d (%zu declared)", cls, o->nclasses);
}

static int not_open(hprof_out *o) { return o->w ? 0 : fail(o, "no file open"); }

/* LOAD_CLASS records and class ids are out: a later class or static would not be in them. */
static int classes_final(hprof_out *o, const char *kind, const char *name) {
    return o->w ? fail(o, "%s %s after hprof_out_open: the classes are final", kind, name) : 0;
}

/* ---- names ----------------------------------------------------------------------------------- */

static size_t name_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return (size_t)h;
}

/* The hash table slot holding the name, or the empty one where it would go. */
static size_t name_slot(const hprof_out *o, const char *s, size_t len) {
    size_t m = o->htcap - 1, i = name_hash(s, len) & m;
    for (; o->name_ht[i]; i = (i + 1) & m) {
        const oname *n = &o->names[o->name_ht[i] - 1];
        if (n->len == len && memcmp(n->s, s, len) == 0) break;
    }
    return i;
}

static int rehash(hprof_out *o, size_t cap) {
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht) return fail(o, "out of memory");
    free(o->name_ht);
    o->name_ht = ht;
    o->htcap = cap;
    for (size_t k = 0; k < o->nnames; k++) o->name_ht[name_slot(o, o->names[k].s, o->names[k].len)] = (uint32_t)k + 1;
    return 0;
}

/* The name's index in names, added on first use. */
static int name_index(hprof_out *o, const char *s, size_t len, size_t *index) {
    size_t i = name_slot(o, s, len);
    if (o->name_ht[i]) {
        *index = o->name_ht[i] - 1;
        return 0;
    }
    if (o->w) return fail(o, "name \"%.*s\" after the STRING records were written", (int)len, s);
    if (o->nnames >= UINT32_MAX - 1) return fail(o, "too many names");
    oname *names = grow(o, o->names, o->nnames, &o->capnames, sizeof *names);
    if (!names) return -1;
    o->names = names;
    char *copy = malloc(len + 1);
    if (!copy) return fail(o, "out of memory");
    memcpy(copy, s, len);
    copy[len] = 0;
    /* ids step like Symbol addresses: a 24-byte header and the bytes, 8-aligned */
    names[o->nnames] = (oname){copy, len, o->next_name_id};
    o->next_name_id += align8(len + 24);
    *index = o->nnames++;
    o->name_ht[i] = (uint32_t)o->nnames;
    if (o->nnames * 2 >= o->htcap) return rehash(o, 2 * o->htcap);
    return 0;
}

int hprof_out_name(hprof_out *o, const char *s, size_t len, uint64_t *id) {
    size_t i;
    if (name_index(o, s, len, &i) < 0) return -1;
    *id = o->names[i].id;
    return 0;
}

size_t hprof_out_name_count(const hprof_out *o) { return o->nnames; }

hprof_out *hprof_out_new(void) {
    hprof_out *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->next_name_id = FIRST_NAME_ID;
    if (rehash(o, 1024) < 0) {
        free(o);
        return NULL;
    }
    return o;
}

void hprof_out_free(hprof_out *o) {
    if (!o) return;
    lw__hprof_writer_close(o->w, NULL);
    for (size_t i = 0; i < o->nnames; i++) free(o->names[i].s);
    free(o->names);
    free(o->name_ht);
    for (size_t i = 0; i < o->nclasses; i++) {
        free(o->classes[i].fields);
        free(o->classes[i].statics);
        free(o->classes[i].layout);
    }
    free(o->classes);
    free(o->buf);
    free(o);
}

const char *hprof_out_error(const hprof_out *o) { return o->err; }

/* ---- classes --------------------------------------------------------------------------------- */

static const struct {
    char letter;
    uint8_t type;
} k_types[] = {{'O', LW_T_OBJECT}, {'Z', LW_T_BOOLEAN}, {'C', LW_T_CHAR},  {'F', LW_T_FLOAT}, {'D', LW_T_DOUBLE},
               {'B', LW_T_BYTE},   {'S', LW_T_SHORT},   {'I', LW_T_INT},   {'J', LW_T_LONG}};

static uint8_t type_of(char letter) {
    for (size_t t = 0; t < sizeof k_types / sizeof k_types[0]; t++)
        if (k_types[t].letter == letter) return k_types[t].type;
    return 0;
}

/* Fills c->fields from "name:T name:T ...". */
static int parse_fields(hprof_out *o, oclass *c, const char *cname, const char *spec) {
    size_t count = 0; /* counted first: one exact allocation per class, of which there are thousands */
    for (const char *p = spec ? spec : ""; *(p += strspn(p, " ")); p += strcspn(p, " ")) count++;
    if (count > UINT16_MAX) return fail(o, "class %s: too many fields", cname);
    if (count && !(c->fields = malloc(count * sizeof *c->fields))) return fail(o, "out of memory");
    for (const char *p = spec ? spec : ""; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        size_t len = strcspn(p, " ");
        const char *colon = memchr(p, ':', len);
        uint8_t type = colon && colon > p && colon + 2 == p + len ? type_of(colon[1]) : 0;
        if (!type) return fail(o, "class %s: bad field \"%.*s\" (name:T, T one of OZCFDBSIJ)", cname, (int)len, p);
        size_t n;
        if (name_index(o, p, (size_t)(colon - p), &n) < 0) return -1;
        c->fields[c->nfields++] = (lw__hprof_field_def){o->names[n].id, type, 0};
        p += len;
    }
    return 0;
}

/* Own fields first, then the super's layout (already final: supers are declared earlier). */
static int make_layout(hprof_out *o, oclass *c) {
    const oclass *s = c->super >= 0 ? &o->classes[c->super] : NULL;
    c->nlayout = c->nfields + (s ? s->nlayout : 0);
    c->layout = malloc(c->nlayout ? c->nlayout : 1);
    if (!c->layout) return fail(o, "out of memory");
    uint64_t size = 0;
    for (size_t f = 0; f < c->nfields; f++) c->layout[f] = c->fields[f].type;
    if (s) memcpy(c->layout + c->nfields, s->layout, s->nlayout);
    for (size_t f = 0; f < c->nlayout; f++) size += lw__type_size(c->layout[f], ID_SIZE);
    if (size > UINT32_MAX) return fail(o, "class %s: instances of %llu bytes", o->names[c->name].s, (unsigned long long)size);
    c->size = (uint32_t)size;
    return 0;
}

int hprof_out_class(hprof_out *o, const char *name, int super, int boot, const char *fields) {
    if (classes_final(o, "class", name) < 0 || (super != -1 && bad_class(o, super) < 0)) return -1;
    if (o->nclasses >= INT32_MAX) return fail(o, "too many classes");
    oclass *classes = grow(o, o->classes, o->nclasses, &o->capclasses, sizeof *classes);
    if (!classes) return -1;
    o->classes = classes;
    oclass c = {.super = super, .boot = boot};
    if (name_index(o, name, strlen(name), &c.name) < 0 || parse_fields(o, &c, name, fields) < 0 ||
        make_layout(o, &c) < 0) {
        free(c.fields);
        free(c.layout);
        return -1;
    }
    classes[o->nclasses] = c;
    return (int)o->nclasses++;
}

int hprof_out_static(hprof_out *o, int cls, const char *name, uint8_t type, uint64_t value) {
    if (classes_final(o, "static", name) < 0 || bad_class(o, cls) < 0) return -1;
    oclass *c = &o->classes[cls];
    if (!lw__type_size(type, ID_SIZE)) return fail(o, "class %s: static %s of type %u", class_name(o, cls), name, type);
    if (c->nstatics >= UINT16_MAX) return fail(o, "class %s: too many statics", class_name(o, cls));
    size_t n;
    if (name_index(o, name, strlen(name), &n) < 0) return -1;
    lw__hprof_field_def *s = realloc(c->statics, (c->nstatics + 1) * sizeof *s);
    if (!s) return fail(o, "out of memory");
    c->statics = s;
    s[c->nstatics] = (lw__hprof_field_def){o->names[n].id, type, value};
    return (int)c->nstatics++;
}

int hprof_out_set_static(hprof_out *o, int cls, int k, uint64_t value) {
    if (bad_class(o, cls) < 0) return -1;
    oclass *c = &o->classes[cls];
    if (k < 0 || (size_t)k >= c->nstatics) return fail(o, "class %s: no static %d", class_name(o, cls), k);
    if (o->dumped) return fail(o, "class %s: static set after the CLASS_DUMPs were written", class_name(o, cls));
    c->statics[k].value = value;
    return 0;
}

int hprof_out_class_count(const hprof_out *o) { return (int)o->nclasses; }
int hprof_out_super(const hprof_out *o, int cls) { return o->classes[cls].super; }
int hprof_out_boot(const hprof_out *o, int cls) { return o->classes[cls].boot; }
uint64_t hprof_out_class_id(const hprof_out *o, int cls) { return o->classes[cls].id; }
uint32_t hprof_out_instance_size(const hprof_out *o, int cls) { return o->classes[cls].size; }

size_t hprof_out_layout(const hprof_out *o, int cls, const uint8_t **types) {
    *types = o->classes[cls].layout;
    return o->classes[cls].nlayout;
}

int hprof_out_field_pos(hprof_out *o, int cls, int decl, const char *name) {
    if (bad_class(o, cls) < 0 || bad_class(o, decl) < 0) return -1;
    size_t slot = name_slot(o, name, strlen(name)), pos = 0;
    for (int k = cls; k >= 0 && o->name_ht[slot]; k = o->classes[k].super) {
        const oclass *c = &o->classes[k];
        if (k == decl) {
            for (size_t f = 0; f < c->nfields; f++)
                if (c->fields[f].name_id == o->names[o->name_ht[slot] - 1].id) return (int)(pos + f);
            break;
        }
        pos += c->nfields;
    }
    return fail(o, "class %s: no field %s declared by %s", class_name(o, cls), name, class_name(o, decl));
}

uint64_t hprof_out_place_classes(hprof_out *o, uint64_t addr) {
    for (size_t i = 0; i < o->nclasses; i++) {
        o->classes[i].id = addr;
        addr += align8(16 + 96 + 8ull * o->classes[i].nstatics); /* header, Class's fields, the statics */
    }
    return addr;
}

/* Tag, id, stack serial, class id or length and type, as HPROF lays them out with 8-byte ids. */
uint64_t hprof_out_instance_bytes(const hprof_out *o, int cls) { return 25 + (uint64_t)o->classes[cls].size; }
uint64_t hprof_out_object_array_bytes(uint32_t count) { return 25 + (uint64_t)ID_SIZE * count; }
uint64_t hprof_out_primitive_array_bytes(uint8_t type, uint32_t count) {
    return 18 + (uint64_t)count * lw__type_size(type, ID_SIZE);
}

/* ---- the file -------------------------------------------------------------------------------- */

int hprof_out_open(hprof_out *o, const char *path) {
    if (o->w) return fail(o, "a file is open already");
    lw_error e;
    if (lw__hprof_writer_open(&o->w, path, LW_HPROF_VERSION_JVM, ID_SIZE, TIMESTAMP_MS, 0, &e) != LW_OK) {
        memcpy(o->err, e.message, sizeof o->err);
        return -1;
    }
    for (size_t i = 0; i < o->nnames; i++) lw__hprof_writer_string(o->w, o->names[i].id, o->names[i].s, o->names[i].len);
    for (size_t i = 0; i < o->nclasses; i++)
        lw__hprof_writer_load_class(o->w, (uint32_t)i + 1, o->classes[i].id, STACK_SERIAL, o->names[o->classes[i].name].id);
    uint8_t trace[12] = {0}; /* serial, thread serial 0, no frames */
    lw__put_be32(trace, STACK_SERIAL);
    lw__hprof_writer_record(o->w, LW_TAG_STACK_TRACE, trace, sizeof trace);
    return 0;
}

int hprof_out_record(hprof_out *o, uint8_t tag, const void *body, uint32_t len) {
    if (not_open(o) < 0) return -1;
    lw__hprof_writer_record(o->w, tag, body, len);
    return 0;
}

int hprof_out_class_dumps(hprof_out *o, uint64_t app_loader) {
    if (not_open(o) < 0) return -1;
    for (size_t i = 0; i < o->nclasses; i++) {
        const oclass *c = &o->classes[i];
        lw__hprof_class_def d = {
            .id = c->id,
            .super_id = c->super >= 0 ? o->classes[c->super].id : 0,
            .loader_id = c->boot ? 0 : app_loader,
            .stack_serial = STACK_SERIAL,
            .instance_size = c->size,
            .statics = c->statics,
            .static_count = c->nstatics,
            .fields = c->fields,
            .field_count = c->nfields,
        };
        lw__hprof_writer_class_dump(o->w, &d);
    }
    o->dumped = 1;
    return 0;
}

void *hprof_out_buffer(hprof_out *o, size_t n) {
    if (!o->buf || n > o->bufcap) {
        size_t cap = n + n / 2 + 64;
        uint8_t *b = realloc(o->buf, cap);
        if (!b) {
            fail(o, "out of memory");
            return NULL;
        }
        o->buf = b;
        o->bufcap = cap;
    }
    return o->buf;
}

int hprof_out_instance(hprof_out *o, uint64_t id, int cls, const uint64_t *values, size_t count) {
    if (not_open(o) < 0 || bad_class(o, cls) < 0) return -1;
    const oclass *c = &o->classes[cls];
    if (count != c->nlayout)
        return fail(o, "class %s: %zu values for %zu instance fields", class_name(o, cls), count, c->nlayout);
    uint8_t *p = hprof_out_buffer(o, c->size);
    if (!p) return -1;
    for (size_t f = 0, off = 0; f < count; f++) {
        unsigned n = lw__type_size(c->layout[f], ID_SIZE);
        for (unsigned b = 0; b < n; b++) p[off + b] = (uint8_t)(values[f] >> (8 * (n - 1 - b)));
        off += n;
    }
    lw__hprof_writer_instance(o->w, id, STACK_SERIAL, c->id, p, c->size);
    return 0;
}

int hprof_out_object_array(hprof_out *o, uint64_t id, int cls, const uint64_t *elements, uint32_t count) {
    if (not_open(o) < 0 || bad_class(o, cls) < 0) return -1;
    lw__hprof_writer_object_array(o->w, id, STACK_SERIAL, o->classes[cls].id, elements, count);
    return 0;
}

int hprof_out_primitive_array(hprof_out *o, uint64_t id, uint8_t type, const void *data, uint32_t count) {
    if (not_open(o) < 0) return -1;
    if (type == LW_T_OBJECT || !lw__type_size(type, ID_SIZE)) return fail(o, "primitive array of type %u", type);
    lw__hprof_writer_primitive_array(o->w, id, STACK_SERIAL, type, data, count);
    return 0;
}

int hprof_out_root(hprof_out *o, uint8_t sub_tag, uint64_t id, uint32_t a, uint32_t b) {
    if (not_open(o) < 0) return -1;
    if (lw__root_extra_bytes(sub_tag, ID_SIZE) < 0) return fail(o, "0x%02x is no root tag", sub_tag);
    lw__hprof_writer_root(o->w, sub_tag, id, a, b);
    return 0;
}

int hprof_out_end(hprof_out *o) {
    if (not_open(o) < 0) return -1;
    for (size_t i = 0; i < o->nclasses; i++)
        if (o->classes[i].boot) lw__hprof_writer_root(o->w, LW_SUB_ROOT_STICKY_CLASS, o->classes[i].id, 0, 0);
    lw__hprof_writer_end_heap_dump(o->w);
    return 0;
}

int hprof_out_close(hprof_out *o, uint64_t *bytes) {
    if (not_open(o) < 0) return -1;
    if (bytes) *bytes = lw__hprof_writer_offset(o->w);
    lw_error e;
    lw_status st = lw__hprof_writer_close(o->w, &e);
    o->w = NULL;
    if (st == LW_OK) return 0;
    memcpy(o->err, e.message, sizeof o->err);
    return -1;
}
