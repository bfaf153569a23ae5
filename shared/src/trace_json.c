/* trace_json.c — the trace JSON, format 1 (docs/trace-json.md): encode, and decode
 * untrusted input with a cap on every size. */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "json_reader.h"
#include "json_writer.h"
#include "trace_builder.h"

/* The enumerations' words, written as literals (LW__JW_WORD). */
static void leaking_word(lw__jw *w, lw_leaking l) {
    if (l == LW_LEAKING_YES) LW__JW_WORD(w, "YES");
    else if (l == LW_LEAKING_NO) LW__JW_WORD(w, "NO");
    else LW__JW_WORD(w, "UNKNOWN");
}
static void kind_word(lw__jw *w, lw_object_kind k) {
    if (k == LW_OBJECT_CLASS) LW__JW_WORD(w, "class");
    else if (k == LW_OBJECT_ARRAY) LW__JW_WORD(w, "array");
    else LW__JW_WORD(w, "instance");
}
static void ref_word(lw__jw *w, lw_ref_kind k) {
    switch (k) {
    case LW_REF_STATIC_FIELD: LW__JW_WORD(w, "static_field"); break;
    case LW_REF_ARRAY_ELEMENT: LW__JW_WORD(w, "array_element"); break;
    case LW_REF_LOCAL: LW__JW_WORD(w, "local"); break;
    default: LW__JW_WORD(w, "instance_field"); break;
    }
}

static void element_json(lw__jw *w, const lw_trace_element *e, int last) {
    lw__jw_open(w, '{');
    LW__JW_KEY(w, "class");
    lw__jw_string(w, e->class_name ? e->class_name : "");
    LW__JW_KEY(w, "object_kind");
    kind_word(w, e->object_kind);
    LW__JW_KEY(w, "leaking");
    leaking_word(w, e->leaking);
    LW__JW_KEY(w, "reason");
    lw__jw_string(w, e->reason ? e->reason : "");
    if (e->label_count) {
        LW__JW_KEY(w, "labels");
        lw__jw_open(w, '[');
        for (size_t i = 0; i < e->label_count; i++) lw__jw_string(w, e->labels[i] ? e->labels[i] : "");
        lw__jw_close(w, ']');
    }
    if (!last && e->has_reference) {
        LW__JW_KEY(w, "reference");
        lw__jw_open(w, '{');
        LW__JW_KEY(w, "kind");
        ref_word(w, e->ref_kind);
        if (e->ref_kind == LW_REF_ARRAY_ELEMENT) {
            LW__JW_KEY(w, "index");
            lw__jw_int(w, (int64_t)e->ref_index);
        } else {
            LW__JW_KEY(w, "name");
            lw__jw_string(w, e->ref_name ? e->ref_name : "");
        }
        LW__JW_KEY(w, "suspect");
        lw__jw_bool(w, e->suspect);
        lw__jw_close(w, '}');
    }
    if (last) {
        if (e->key) {
            LW__JW_KEY(w, "key");
            lw__jw_string(w, e->key);
        }
        if (e->description) {
            LW__JW_KEY(w, "description");
            lw__jw_string(w, e->description);
        }
        const struct { const char *name; int64_t v; } nums[] = {{"watch_ms", e->watch_ms},
                                                                {"retained_ms", e->retained_ms},
                                                                {"retained_bytes", e->retained_bytes},
                                                                {"retained_objects", e->retained_objects}};
        for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
            if (nums[i].v >= 0) {
                lw__jw_key(w, nums[i].name);
                lw__jw_int(w, nums[i].v);
            }
    }
    lw__jw_close(w, '}');
}

static void trace_json(lw__jw *w, const lw_trace *t) {
    lw__jw_open(w, '{');
    LW__JW_KEY(w, "gc_root");
    lw__jw_string(w, t->gc_root ? t->gc_root : "UNKNOWN");
    LW__JW_KEY(w, "elements");
    lw__jw_open(w, '[');
    for (size_t k = 0; k < t->element_count; k++) element_json(w, &t->elements[k], k + 1 == t->element_count);
    lw__jw_close(w, ']');
    lw__jw_close(w, '}');
}

char *lw_trace_to_json(const lw_trace *t) {
    if (!t) return NULL;
    lw__jw w;
    lw__jw_init(&w, 0);
    trace_json(&w, t);
    return lw__jw_take(&w);
}

char *lw_leak_report_to_json(const lw_leak_report *r, int pretty) {
    if (!r) return NULL;
    lw__jw w;
    lw__jw_init(&w, pretty);
    lw__jw_open(&w, '{');
    LW__JW_KEY(&w, "format");
    lw__jw_int(&w, r->format ? r->format : 1);
    LW__JW_KEY(&w, "analyzer");
    lw__jw_open(&w, '{');
    LW__JW_KEY(&w, "name");
    lw__jw_string(&w, r->analyzer_name ? r->analyzer_name : "leakwatch");
    LW__JW_KEY(&w, "version");
    lw__jw_string(&w, r->analyzer_version ? r->analyzer_version : LW_CORE_VERSION_STRING);
    lw__jw_close(&w, '}');
    if (r->hprof_version) {
        LW__JW_KEY(&w, "heap");
        lw__jw_open(&w, '{');
        LW__JW_KEY(&w, "hprof_version");
        lw__jw_string(&w, r->hprof_version);
        LW__JW_KEY(&w, "id_size");
        lw__jw_int(&w, r->id_size);
        LW__JW_KEY(&w, "objects");
        lw__jw_int(&w, (int64_t)r->objects);
        LW__JW_KEY(&w, "bytes");
        lw__jw_int(&w, (int64_t)r->bytes);
        lw__jw_close(&w, '}');
    }
    LW__JW_KEY(&w, "duration_ms");
    lw__jw_open(&w, '{');
    const struct { const char *name; int64_t v; } phases[] = {
        {"index", r->index_ms}, {"paths", r->paths_ms}, {"retained", r->retained_ms}};
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++)
        if (phases[i].v >= 0) {
            lw__jw_key(&w, phases[i].name);
            lw__jw_int(&w, phases[i].v);
        }
    lw__jw_close(&w, '}');
    LW__JW_KEY(&w, "leaks");
    lw__jw_open(&w, '[');
    for (size_t i = 0; i < r->leak_count; i++) {
        const lw_leak *l = &r->leaks[i];
        lw__jw_open(&w, '{');
        LW__JW_KEY(&w, "signature");
        lw__jw_string(&w, l->signature);
        LW__JW_KEY(&w, "kind");
        if (l->library) LW__JW_WORD(&w, "library");
        else LW__JW_WORD(&w, "application");
        LW__JW_KEY(&w, "short_description");
        lw__jw_string(&w, l->short_description ? l->short_description : "");
        LW__JW_KEY(&w, "library_pattern");
        lw__jw_string(&w, l->library_pattern);
        if (l->library_description) {
            LW__JW_KEY(&w, "library_description");
            lw__jw_string(&w, l->library_description);
        }
        LW__JW_KEY(&w, "count");
        lw__jw_int(&w, (int64_t)l->count);
        LW__JW_KEY(&w, "traces");
        lw__jw_open(&w, '[');
        for (size_t j = 0; j < l->trace_count; j++) trace_json(&w, &l->traces[j]);
        lw__jw_close(&w, ']');
        lw__jw_close(&w, '}');
    }
    lw__jw_close(&w, ']');
    lw__jw_close(&w, '}');
    return lw__jw_take(&w);
}

/* ---- decoding ------------------------------------------------------------------------------ */

typedef struct {
    lw_json_limits lim;
    lw_error *err;
    const lw__jr *jr;
    char *pool;      /* jr's strings, now the report's (lw_leak_report.lw__pool): the decoded */
    size_t pool_len; /* strings stay where the reader put them, one block for all of them */
} dec;

#define V(i) (&d->jr->v[i])
static int is_type(const dec *d, long i, lw__jr_type t) { return i >= 0 && V(i)->type == t; }
static int is_null(const dec *d, long i) { return i < 0 || V(i)->type == LW__JR_NULL; }

static lw_status bad(dec *d, const char *fmt, const char *what) {
    return lw__fail(d->err, LW_ERR_FORMAT, fmt, what);
}

/* The string value at `key` of `obj`, left where it lies in the document: *v its index, or -1
 * when it is absent or null and not `required`. Errors for a missing required string, another
 * type, or one over max_string. */
static lw_status find_string(dec *d, long obj, const char *key, int required, long *v, const char *where) {
    *v = lw__jr_get(d->jr, obj, key);
    if (is_null(d, *v)) {
        *v = -1;
        return required ? lw__fail(d->err, LW_ERR_FORMAT, "%s: missing string \"%s\"", where, key) : LW_OK;
    }
    if (!is_type(d, *v, LW__JR_STRING)) return lw__fail(d->err, LW_ERR_FORMAT, "%s: \"%s\" must be a string", where, key);
    size_t n = V(*v)->str_len;
    if (n > d->lim.max_string)
        return lw__fail(d->err, LW_ERR_LIMIT, "%s: \"%s\" is %zu bytes, over the %zu-byte limit", where, key, n, d->lim.max_string);
    return LW_OK;
}

static lw_status get_string(dec *d, long obj, const char *key, int required, char **out, const char *where) {
    long v;
    *out = NULL;
    lw_status st = find_string(d, obj, key, required, &v, where);
    if (st != LW_OK || v < 0) return st;
    *out = d->pool + (V(v)->str - d->pool);
    return LW_OK;
}

static lw_status get_int(dec *d, long obj, const char *key, int64_t *out, int64_t dflt, int64_t min, const char *where) {
    long v = lw__jr_get(d->jr, obj, key);
    if (is_null(d, v)) {
        *out = dflt;
        return LW_OK;
    }
    if (!is_type(d, v, LW__JR_INT)) return lw__fail(d->err, LW_ERR_FORMAT, "%s: \"%s\" must be an integer", where, key);
    *out = V(v)->num;
    if (*out < min) return lw__fail(d->err, LW_ERR_FORMAT, "%s: \"%s\" must be at least %lld", where, key, (long long)min);
    return LW_OK;
}

/* The index in `words` of string value `v`, compared where it lies in the document (no copy:
 * these are read for every element of every trace); -1 when it is none of them. */
static int word_at(const dec *d, long v, const char *const *words, int n) {
    for (int i = 0; i < n; i++)
        if (strlen(words[i]) == V(v)->str_len && memcmp(V(v)->str, words[i], V(v)->str_len) == 0) return i;
    return -1;
}

/* The required string at `key` of `obj` as an index in `words` (-1: none of them). */
static lw_status get_word(dec *d, long obj, const char *key, const char *const *words, int n, int *out,
                          const char *where) {
    long v;
    *out = -1;
    lw_status st = find_string(d, obj, key, 1, &v, where);
    if (st == LW_OK) *out = word_at(d, v, words, n);
    return st;
}

static lw_status decode_element(dec *d, long jo, lw_trace_element *e, int last, const char *where) {
    static const char *const kinds[] = {"instance", "class", "array"};
    static const char *const leak_words[] = {"UNKNOWN", "NO", "YES"};
    static const char *const refs[] = {"instance_field", "static_field", "array_element", "local"};
    lw_status st;
    e->watch_ms = e->retained_ms = e->retained_bytes = e->retained_objects = -1;
    if (!is_type(d, jo, LW__JR_OBJECT)) return bad(d, "%s: an element must be an object", where);
    if ((st = get_string(d, jo, "class", 1, &e->class_name, where)) != LW_OK) return st;
    if (!e->class_name[0]) return bad(d, "%s: empty class name", where);
    int k;
    if ((st = get_word(d, jo, "object_kind", kinds, 3, &k, where)) != LW_OK) return st;
    if (k < 0) return bad(d, "%s: object_kind must be instance, class or array", where);
    e->object_kind = (lw_object_kind)k;
    if ((st = get_word(d, jo, "leaking", leak_words, 3, &k, where)) != LW_OK) return st;
    if (k < 0) return bad(d, "%s: leaking must be YES, NO or UNKNOWN", where);
    e->leaking = (lw_leaking)k;
    if ((st = get_string(d, jo, "reason", 0, &e->reason, where)) != LW_OK) return st;
    if (!e->reason) e->reason = d->pool + d->pool_len - 1; /* the pool's last byte: "" */
    long labels = lw__jr_get(d->jr, jo, "labels");
    if (!is_null(d, labels)) {
        if (!is_type(d, labels, LW__JR_ARRAY) || V(labels)->count > 64) return bad(d, "%s: labels must be an array of at most 64 strings", where);
        e->labels = lw__calloc(V(labels)->count + 1, sizeof *e->labels);
        if (!e->labels) return lw__fail(d->err, LW_ERR_NOMEM, "out of memory");
        for (uint32_t l = (uint32_t)labels + 1; l < V(labels)->end; l = V(l)->end) {
            if (V(l)->type != LW__JR_STRING || V(l)->str_len > d->lim.max_string) return bad(d, "%s: a label must be a short string", where);
            e->labels[e->label_count++] = d->pool + (V(l)->str - d->pool);
        }
    }
    long ref = lw__jr_get(d->jr, jo, "reference");
    if (last) {
        if (!is_null(d, ref)) return bad(d, "%s: the last element (the leaking object) has no reference", where);
        if ((st = get_string(d, jo, "key", 0, &e->key, where)) != LW_OK) return st;
        if ((st = get_string(d, jo, "description", 0, &e->description, where)) != LW_OK) return st;
        if ((st = get_int(d, jo, "watch_ms", &e->watch_ms, -1, -1, where)) != LW_OK) return st;
        if ((st = get_int(d, jo, "retained_ms", &e->retained_ms, -1, -1, where)) != LW_OK) return st;
        if ((st = get_int(d, jo, "retained_bytes", &e->retained_bytes, -1, -1, where)) != LW_OK) return st;
        if ((st = get_int(d, jo, "retained_objects", &e->retained_objects, -1, -1, where)) != LW_OK) return st;
        return LW_OK;
    }
    if (!is_type(d, ref, LW__JR_OBJECT)) return bad(d, "%s: every element but the last needs a reference object", where);
    e->has_reference = 1;
    if ((st = get_word(d, ref, "kind", refs, 4, &k, where)) != LW_OK) return st;
    if (k < 0) return bad(d, "%s: reference kind must be instance_field, static_field, array_element or local", where);
    e->ref_kind = (lw_ref_kind)k;
    if (e->ref_kind == LW_REF_ARRAY_ELEMENT) {
        int64_t idx;
        if (lw__jr_get(d->jr, ref, "index") < 0) return bad(d, "%s: an array_element reference needs an index", where);
        if ((st = get_int(d, ref, "index", &idx, 0, 0, where)) != LW_OK) return st;
        e->ref_index = (uint64_t)idx;
    } else {
        if ((st = get_string(d, ref, "name", 1, &e->ref_name, where)) != LW_OK) return st;
    }
    long s = lw__jr_get(d->jr, ref, "suspect");
    if (s >= 0 && !is_type(d, s, LW__JR_TRUE) && !is_type(d, s, LW__JR_FALSE))
        return bad(d, "%s: suspect must be true or false", where);
    e->suspect = is_type(d, s, LW__JR_TRUE);
    return LW_OK;
}

/* Appends "NAME[n]" to `b` at *len (within cap, '\0'-terminated): a path for error messages,
 * built for every leak, trace and element read, where snprintf cost 4 % of leakd's CPU. */
static void path_add(char *b, size_t cap, size_t *len, const char *name, size_t n) {
    char digits[24];
    size_t nd = 0;
    do digits[nd++] = (char)('0' + n % 10); while ((n /= 10) != 0);
    size_t nl = strlen(name);
    if (*len + nl + nd + 3 > cap) return; /* cannot happen with the sizes below */
    memcpy(b + *len, name, nl);
    *len += nl;
    b[(*len)++] = '[';
    while (nd) b[(*len)++] = digits[--nd];
    b[(*len)++] = ']';
    b[*len] = '\0';
}

static lw_status decode(dec *d, long root, lw_leak_report *r) {
    lw_status st;
    char where[96];
    if (!is_type(d, root, LW__JR_OBJECT)) return bad(d, "%s", "the document must be a JSON object");
    int64_t format = 0;
    if (is_null(d, lw__jr_get(d->jr, root, "format")))
        return bad(d, "%s", "document: missing integer \"format\" (this reader knows format 1)");
    if ((st = get_int(d, root, "format", &format, -1, INT64_MIN, "document")) != LW_OK) return st;
    if (format != 1) return lw__fail(d->err, LW_ERR_FORMAT, "document: unsupported format %lld (this reader knows format 1)", (long long)format);
    r->format = 1;
    long an = lw__jr_get(d->jr, root, "analyzer");
    if (is_type(d, an, LW__JR_OBJECT)) {
        if ((st = get_string(d, an, "name", 0, &r->analyzer_name, "analyzer")) != LW_OK) return st;
        if ((st = get_string(d, an, "version", 0, &r->analyzer_version, "analyzer")) != LW_OK) return st;
    }
    long h = lw__jr_get(d->jr, root, "heap");
    if (is_type(d, h, LW__JR_OBJECT)) {
        int64_t v = 0;
        if ((st = get_string(d, h, "hprof_version", 0, &r->hprof_version, "heap")) != LW_OK) return st;
        if ((st = get_int(d, h, "id_size", &v, 0, 0, "heap")) != LW_OK) return st;
        r->id_size = (unsigned)(v > 8 ? 0 : v);
        if ((st = get_int(d, h, "objects", &v, 0, 0, "heap")) != LW_OK) return st;
        r->objects = (uint64_t)v;
        if ((st = get_int(d, h, "bytes", &v, 0, 0, "heap")) != LW_OK) return st;
        r->bytes = (uint64_t)v;
    }
    r->index_ms = r->paths_ms = r->retained_ms = -1;
    long dur = lw__jr_get(d->jr, root, "duration_ms");
    if (is_type(d, dur, LW__JR_OBJECT)) {
        if ((st = get_int(d, dur, "index", &r->index_ms, -1, -1, "duration_ms")) != LW_OK) return st;
        if ((st = get_int(d, dur, "paths", &r->paths_ms, -1, -1, "duration_ms")) != LW_OK) return st;
        if ((st = get_int(d, dur, "retained", &r->retained_ms, -1, -1, "duration_ms")) != LW_OK) return st;
    }
    long leaks = lw__jr_get(d->jr, root, "leaks");
    if (!is_type(d, leaks, LW__JR_ARRAY)) return bad(d, "%s", "document: \"leaks\" must be an array");
    size_t nl = V(leaks)->count;
    if (nl > d->lim.max_leaks) return lw__fail(d->err, LW_ERR_LIMIT, "document: %zu leaks, over the limit of %zu", nl, d->lim.max_leaks);
    r->leaks = lw__calloc(nl + 1, sizeof *r->leaks);
    if (!r->leaks) return lw__fail(d->err, LW_ERR_NOMEM, "out of memory");
    long lo = leaks + 1;
    for (size_t i = 0; i < nl; i++, lo = V(lo)->end) {
        lw_leak *l = &r->leaks[r->leak_count++];
        size_t wl = 0, wl_leak, wl_trace;
        path_add(where, sizeof where, &wl, "leaks", i);
        wl_leak = wl;
        if (!is_type(d, lo, LW__JR_OBJECT)) return bad(d, "%s: must be an object", where);
        long v;
        if ((st = find_string(d, lo, "signature", 0, &v, where)) != LW_OK) return st;
        if (v >= 0) {
            size_t n = V(v)->str_len < sizeof l->signature - 1 ? V(v)->str_len : sizeof l->signature - 1;
            memcpy(l->signature, V(v)->str, n);
            l->signature[n] = '\0'; /* a NUL inside ends it, as before */
        }
        static const char *const leak_kinds[] = {"application", "library"};
        if ((st = find_string(d, lo, "kind", 0, &v, where)) != LW_OK) return st;
        int kind = v < 0 ? 0 : word_at(d, v, leak_kinds, 2); /* absent: application */
        if (kind < 0) return bad(d, "%s: kind must be application or library", where);
        l->library = kind == 1;
        if ((st = get_string(d, lo, "short_description", 0, &l->short_description, where)) != LW_OK) return st;
        if ((st = get_string(d, lo, "library_pattern", 0, &l->library_pattern, where)) != LW_OK) return st;
        if ((st = get_string(d, lo, "library_description", 0, &l->library_description, where)) != LW_OK) return st;
        if (l->library && !l->library_pattern) return bad(d, "%s: a library leak needs its library_pattern", where);
        int64_t count = 0;
        if ((st = get_int(d, lo, "count", &count, 1, 1, where)) != LW_OK) return st;
        l->count = (uint64_t)count;
        long traces = lw__jr_get(d->jr, lo, "traces");
        if (!is_type(d, traces, LW__JR_ARRAY) || V(traces)->count == 0) return bad(d, "%s: \"traces\" must be a non-empty array", where);
        size_t nt = V(traces)->count;
        if (nt > d->lim.max_traces) return lw__fail(d->err, LW_ERR_LIMIT, "%s: %zu traces, over the limit of %zu", where, nt, d->lim.max_traces);
        l->traces = lw__calloc(nt, sizeof *l->traces);
        if (!l->traces) return lw__fail(d->err, LW_ERR_NOMEM, "out of memory");
        long to = traces + 1;
        for (size_t j = 0; j < nt; j++, to = V(to)->end) {
            lw_trace *t = &l->traces[l->trace_count++];
            t->lw__pool = d->pool;
            t->lw__pool_len = d->pool_len;
            wl = wl_leak;
            path_add(where, sizeof where, &wl, ".traces", j);
            wl_trace = wl;
            if (!is_type(d, to, LW__JR_OBJECT)) return bad(d, "%s: must be an object", where);
            if ((st = get_string(d, to, "gc_root", 1, &t->gc_root, where)) != LW_OK) return st;
            long els = lw__jr_get(d->jr, to, "elements");
            if (!is_type(d, els, LW__JR_ARRAY) || V(els)->count == 0) return bad(d, "%s: \"elements\" must be a non-empty array", where);
            size_t ne = V(els)->count;
            if (ne > d->lim.max_elements)
                return lw__fail(d->err, LW_ERR_LIMIT, "%s: %zu elements, over the limit of %zu", where, ne, d->lim.max_elements);
            t->elements = lw__calloc(ne, sizeof *t->elements);
            if (!t->elements) return lw__fail(d->err, LW_ERR_NOMEM, "out of memory");
            long eo = els + 1;
            for (size_t k = 0; k < ne; k++, eo = V(eo)->end) {
                t->element_count++;
                wl = wl_trace;
                path_add(where, sizeof where, &wl, ".elements", k);
                if ((st = decode_element(d, eo, &t->elements[k], k + 1 == ne, where)) != LW_OK) return st;
            }
        }
    }
    return LW_OK;
}

lw_status lw_leak_report_from_json(const char *text, size_t len, const lw_json_limits *limits, lw_leak_report **out,
                                   lw_error *err) {
    if (!text || !out) return lw__fail(err, LW_ERR_USAGE, "lw_leak_report_from_json: missing argument");
    *out = NULL;
    dec d = {.err = err};
    if (limits) d.lim = *limits;
    if (!d.lim.max_bytes) d.lim.max_bytes = 16u << 20;
    if (!d.lim.max_leaks) d.lim.max_leaks = 1000;
    if (!d.lim.max_traces) d.lim.max_traces = 100;
    if (!d.lim.max_elements) d.lim.max_elements = 10000;
    if (!d.lim.max_string) d.lim.max_string = 64u << 10;
    if (len > d.lim.max_bytes)
        return lw__fail(err, LW_ERR_LIMIT, "trace JSON is %zu bytes, over the %zu-byte limit", len, d.lim.max_bytes);
    lw__jr jr;
    char msg[96];
    size_t pos = 0;
    int rc = lw__jr_parse(&jr, text, len, msg, sizeof msg, &pos);
    if (rc != 0) {
        lw__jr_free(&jr);
        if (rc == -2) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
        size_t line, col;
        lw__jr_position(text, pos, &line, &col);
        return lw__fail(err, LW_ERR_FORMAT, "trace JSON is malformed at line %zu, column %zu (byte %zu): %s", line, col, pos,
                        msg);
    }
    d.jr = &jr;
    lw_leak_report *r = lw__calloc(1, sizeof *r);
    lw_status st = LW_OK;
    if (r) {
        /* The decoded strings take at most len bytes (each loses its quotes and gains a NUL):
         * the block's last byte is free to be every missing reason's "". */
        jr.strings[len] = '\0';
        r->lw__pool = d.pool = jr.strings;
        r->lw__pool_len = d.pool_len = len + 1;
        jr.strings = NULL;
        st = decode(&d, 0, r);
    } else {
        st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
    }
    lw__jr_free(&jr);
    if (st != LW_OK) {
        lw_leak_report_free(r);
        return st;
    }
    *out = r;
    return LW_OK;
}
