/* heap_objects.c — lw_heap_open/free, summaries, and reading single objects. */
#include "heap_objects.h"

#include <stdlib.h>

#include "java_names.h"

lw_status lw_heap_open(lw_heap **out, const char *path, const lw_heap_options *opts, lw_error *err) {
    if (!out || !path) return lw__fail(err, LW_ERR_USAGE, "lw_heap_open: missing argument");
    *out = NULL;
    /* The budget lives here until the heap it counts (itself included) is built. */
    lw__budget budget = {0};
    if (LW__HAS_FIELD(lw_heap_options, opts, memory_budget)) budget.limit = opts->memory_budget;
    lw__budget *outer = lw__budget_enter(&budget);
    lw_status st;
    lw_heap *heap = lw__calloc(1, sizeof *heap);
    if (!heap) {
        st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (LW__HAS_FIELD(lw_heap_options, opts, progress_user)) {
        heap->progress = opts->progress;
        heap->progress_user = opts->progress_user;
    }
    st = lw__hprof_open_file(&heap->hprof, path, opts, err);
    if (st == LW_OK) st = lw__heap_index_build(heap, 1, err);
out:
    lw__budget_leave(outer);
    st = lw__budget_verdict(&budget, st, "index", err);
    if (st != LW_OK) {
        lw_heap_free(heap); /* outside the call's scope: nothing left to count */
        return st;
    }
    heap->budget = budget;
    *out = heap;
    return LW_OK;
}

lw_status lw__heap_open_memory(lw_heap **out, const void *data, size_t size, lw_error *err);
lw_status lw__heap_open_memory(lw_heap **out, const void *data, size_t size, lw_error *err) {
    *out = NULL;
    lw_heap *heap = lw__calloc(1, sizeof *heap);
    if (!heap) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
    lw_status st = lw__hprof_open_memory(&heap->hprof, data, size, err);
    if (st == LW_OK) st = lw__heap_index_build(heap, 1, err);
    if (st != LW_OK) {
        lw_heap_free(heap);
        return st;
    }
    *out = heap;
    return LW_OK;
}

void lw_heap_free(lw_heap *heap) {
    if (!heap) return;
    lw__heap_index_free(heap);
    lw__hprof_close(&heap->hprof);
    lw__free(heap);
}

void lw_heap_get_summary(const lw_heap *heap, lw_heap_summary *out) { *out = heap->summary; }

uint64_t lw_heap_memory_peak(const lw_heap *heap) { return heap->budget.peak; }

static const char *primitive_array_name(unsigned t) {
    switch (t) {
    case LW_T_BOOLEAN: return "boolean[]";
    case LW_T_CHAR: return "char[]";
    case LW_T_FLOAT: return "float[]";
    case LW_T_DOUBLE: return "double[]";
    case LW_T_BYTE: return "byte[]";
    case LW_T_SHORT: return "short[]";
    case LW_T_INT: return "int[]";
    case LW_T_LONG: return "long[]";
    default: return "unknown[]";
    }
}

void lw__heap_object(const lw_heap *heap, uint32_t dense, lw__object *o) {
    lw__heap_object_at(heap, lw__heap_offset(heap, dense), o);
    if (o->tag == LW_SUB_CLASS_DUMP)
        o->class_index = dense >= heap->object_count ? (uint32_t)(dense - heap->object_count) : LW_NONE;
}

void lw__heap_object_at(const lw_heap *heap, uint64_t off, lw__object *o) {
    const unsigned ids = heap->hprof.id_size;
    const uint8_t *d = heap->hprof.data + off;
    memset(o, 0, sizeof *o);
    o->tag = d[0];
    o->id = lw__be_id(d + 1, ids);
    o->class_index = LW_NONE;
    switch (o->tag) {
    case LW_SUB_INSTANCE_DUMP:
        o->class_index = lw__heap_class_by_id(heap, lw__be_id(d + 5 + ids, ids));
        o->data_len = lw__be32(d + 5 + 2 * ids);
        o->data = d + 9 + 2 * ids;
        break;
    case LW_SUB_OBJECT_ARRAY_DUMP:
        o->count = lw__be32(d + 5 + ids);
        o->class_index = lw__heap_class_by_id(heap, lw__be_id(d + 9 + ids, ids));
        o->data = d + 9 + 2 * ids;
        o->data_len = (uint64_t)o->count * ids;
        break;
    case LW_SUB_PRIMITIVE_ARRAY_DUMP:
    case LW_SUB_PRIMITIVE_ARRAY_NODATA:
        o->count = lw__be32(d + 5 + ids);
        o->elem_type = d[9 + ids];
        o->data = d + 10 + ids;
        o->data_len = o->tag == LW_SUB_PRIMITIVE_ARRAY_NODATA ? 0 : (uint64_t)o->count * lw__type_size(o->elem_type, ids);
        break;
    case LW_SUB_CLASS_DUMP:
        o->class_index = lw__heap_class_by_id(heap, o->id);
        break;
    }
}

const char *lw__object_class_name(const lw_heap *heap, const lw__object *o) {
    if (o->tag == LW_SUB_PRIMITIVE_ARRAY_DUMP || o->tag == LW_SUB_PRIMITIVE_ARRAY_NODATA)
        return primitive_array_name(o->elem_type);
    if (o->class_index != LW_NONE) return heap->classes[o->class_index].name;
    return o->tag == LW_SUB_OBJECT_ARRAY_DUMP ? "java.lang.Object[]" : "<unknown class>";
}

lw_object_kind lw__object_kind(const lw__object *o) {
    if (o->tag == LW_SUB_CLASS_DUMP) return LW_OBJECT_CLASS;
    if (o->tag == LW_SUB_INSTANCE_DUMP) return LW_OBJECT_INSTANCE;
    return LW_OBJECT_ARRAY;
}

uint64_t lw__object_shallow_size(const lw_heap *heap, const lw__object *o) {
    switch (o->tag) {
    case LW_SUB_INSTANCE_DUMP:
        return o->class_index != LW_NONE ? heap->classes[o->class_index].instance_size : o->data_len;
    case LW_SUB_OBJECT_ARRAY_DUMP:
        return (uint64_t)o->count * heap->hprof.id_size;
    case LW_SUB_PRIMITIVE_ARRAY_DUMP:
    case LW_SUB_PRIMITIVE_ARRAY_NODATA:
        return (uint64_t)o->count * lw__type_size(o->elem_type, heap->hprof.id_size);
    case LW_SUB_CLASS_DUMP:
        return o->class_index != LW_NONE ? heap->classes[o->class_index].dump_length : 0;
    }
    return 0;
}

static uint64_t read_value(const uint8_t *p, unsigned size) {
    uint64_t v = 0;
    for (unsigned i = 0; i < size; i++) v = (v << 8) | p[i];
    return v;
}

int lw__instance_field(const lw_heap *heap, const lw__object *o, const char *declaring, const char *name, uint8_t *type,
                       uint64_t *value) {
    if (o->tag != LW_SUB_INSTANCE_DUMP) return 0;
    const unsigned ids = heap->hprof.id_size;
    uint64_t base = 0;
    unsigned guard = 0;
    for (uint32_t k = o->class_index; k != LW_NONE && guard < 256; k = heap->classes[k].super_index, guard++) {
        const lw__class *c = &heap->classes[k];
        int here = !declaring || strcmp(c->name, declaring) == 0;
        uint64_t off = base;
        for (uint32_t f = 0; f < c->field_count; f++) {
            const lw__field *fd = &heap->fields[c->field_first + f];
            unsigned sz = lw__type_size(fd->type, ids);
            if (here && strcmp(fd->name, name) == 0) {
                if (off + sz > o->data_len) return 0;
                if (type) *type = fd->type;
                if (value) *value = read_value(o->data + off, sz);
                return 1;
            }
            off += sz;
        }
        base += c->own_bytes;
    }
    return 0;
}

int lw__class_static(const lw_heap *heap, uint32_t c, const char *name, uint8_t *type, uint64_t *value) {
    if (c == LW_NONE) return 0;
    const lw__class *k = &heap->classes[c];
    for (uint32_t i = 0; i < k->static_count; i++) {
        const lw__static_field *s = &heap->statics[k->static_first + i];
        if (strcmp(s->name, name) == 0) {
            if (type) *type = s->type;
            if (value) *value = s->value;
            return 1;
        }
    }
    return 0;
}

static void put_utf8(lw__buf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    lw__buf_append(b, u, n);
}

uint32_t lw__java_string_value_array(const lw_heap *heap, uint64_t id) {
    if (!id) return LW_NONE;
    uint32_t dense = lw__heap_lookup(heap, id);
    if (dense == LW_NONE || dense >= heap->object_count) return LW_NONE;
    lw__object s;
    lw__heap_object(heap, dense, &s);
    if (s.tag != LW_SUB_INSTANCE_DUMP || s.class_index == LW_NONE || !(heap->classes[s.class_index].flags & LW_CLASS_STRING))
        return LW_NONE;
    uint8_t t;
    uint64_t v;
    if (!lw__instance_field(heap, &s, NULL, "value", &t, &v) || t != LW_T_OBJECT || !v) return LW_NONE;
    uint32_t a = lw__heap_lookup(heap, v);
    return a != LW_NONE && a < heap->object_count ? a : LW_NONE;
}

char *lw__read_java_string(const lw_heap *heap, uint64_t id, size_t max) {
    uint32_t vd = lw__java_string_value_array(heap, id);
    if (vd == LW_NONE) return NULL;
    lw__object s, a;
    lw__heap_object(heap, lw__heap_lookup(heap, id), &s);
    lw__heap_object(heap, vd, &a);
    if (a.tag != LW_SUB_PRIMITIVE_ARRAY_DUMP) return NULL;
    uint8_t t;
    uint64_t v;
    uint64_t start = 0, count = a.count;
    int coder = -1;
    if (lw__instance_field(heap, &s, NULL, "coder", &t, &v)) coder = (int)v;
    if (lw__instance_field(heap, &s, NULL, "offset", &t, &v) && t == LW_T_INT) start = (uint32_t)v;
    if (lw__instance_field(heap, &s, NULL, "count", &t, &v) && t == LW_T_INT) {
        uint64_t c = (uint32_t)v;
        /* ART (API 26+) stores (length << 1) | uncompressed in count for compressed byte[] values. */
        if (a.elem_type == LW_T_BYTE && heap->android) c >>= 1;
        count = c;
    }
    if (start > a.count) start = a.count;
    lw__buf b = {.max = max + 8};
    if (a.elem_type == LW_T_CHAR) {
        if (count > a.count - start) count = a.count - start;
        for (uint64_t i = 0; i < count && b.size < max; i++) {
            uint32_t c = lw__be16(a.data + 2 * (start + i));
            if (c >= 0xD800 && c < 0xDC00 && i + 1 < count) {
                uint32_t lo = lw__be16(a.data + 2 * (start + i + 1));
                if (lo >= 0xDC00 && lo < 0xE000) {
                    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                    i++;
                }
            }
            put_utf8(&b, c);
        }
    } else if (a.elem_type == LW_T_BYTE) {
        if (coder == 1) { /* JDK 9+ UTF16 string: 2 bytes per char in the dumping machine's order (little-endian) */
            uint64_t chars = a.count / 2;
            for (uint64_t i = 0; i < chars && b.size < max; i++) put_utf8(&b, (uint32_t)a.data[2 * i] | ((uint32_t)a.data[2 * i + 1] << 8));
        } else {
            if (count > a.count - start) count = a.count - start;
            for (uint64_t i = 0; i < count && b.size < max; i++) put_utf8(&b, a.data[start + i]);
        }
    } else {
        return NULL;
    }
    return lw__buf_take(&b);
}

char *lw__string_field(const lw_heap *heap, const lw__object *o, const char *field, size_t max) {
    uint8_t t;
    uint64_t v;
    if (!lw__instance_field(heap, o, NULL, field, &t, &v) || t != LW_T_OBJECT) return NULL;
    return lw__read_java_string(heap, v, max);
}

typedef struct {
    uint32_t class_index;
    uint64_t count, bytes;
} hist_entry;

static int by_count(const void *a, const void *b) {
    const lw_class_stat *x = a, *y = b;
    if (x->instances != y->instances) return x->instances < y->instances ? 1 : -1;
    return strcmp(x->class_name, y->class_name);
}

static int by_bytes(const void *a, const void *b) {
    const lw_class_stat *x = a, *y = b;
    if (x->shallow_bytes != y->shallow_bytes) return x->shallow_bytes < y->shallow_bytes ? 1 : -1;
    return strcmp(x->class_name, y->class_name);
}

static size_t class_histogram(lw_heap *heap, int sort_by_bytes, lw_class_stat *out, size_t capacity, lw_error *err) {
    /* One slot per class, plus eight for primitive array types. */
    size_t slots = (size_t)heap->class_count + 16;
    lw_class_stat *all = lw__calloc(slots, sizeof *all);
    if (!all) {
        lw__fail(err, LW_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (uint32_t i = 0; i < heap->class_count; i++) all[i].class_name = heap->classes[i].name;
    for (unsigned t = 0; t < 16; t++) all[heap->class_count + t].class_name = primitive_array_name(t);
    for (uint64_t i = 0; i < heap->object_count; i++) {
        lw__object o;
        lw__heap_object(heap, (uint32_t)i, &o);
        size_t slot;
        if (o.tag == LW_SUB_PRIMITIVE_ARRAY_DUMP || o.tag == LW_SUB_PRIMITIVE_ARRAY_NODATA) slot = heap->class_count + (o.elem_type & 15);
        else if (o.class_index != LW_NONE) slot = o.class_index;
        else continue;
        all[slot].instances++;
        all[slot].shallow_bytes += lw__object_shallow_size(heap, &o);
    }
    size_t used = 0;
    for (size_t i = 0; i < slots; i++)
        if (all[i].instances) all[used++] = all[i];
    qsort(all, used, sizeof *all, sort_by_bytes ? by_bytes : by_count);
    size_t n = used < capacity ? used : capacity;
    memcpy(out, all, n * sizeof *out);
    lw__free(all);
    return n;
}

size_t lw_heap_class_histogram(lw_heap *heap, int sort_by_bytes, lw_class_stat *out, size_t capacity, lw_error *err) {
    lw__budget *outer = lw__budget_enter(&heap->budget);
    size_t n = class_histogram(heap, sort_by_bytes, out, capacity, err);
    lw__budget_leave(outer);
    if (lw__budget_verdict(&heap->budget, LW_OK, "class histogram", err) != LW_OK) return 0;
    return n;
}
