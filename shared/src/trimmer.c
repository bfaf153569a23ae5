/* trimmer.c — a copy of a dump that ships no user data: every primitive array that analysis
 * does not read keeps its length (so sizes stay right) but has its contents zeroed (so zstd
 * erases them). The output has the input's exact layout: a valid HPROF any tool opens.
 *
 * Noting what to keep takes three quick walks over the mapped file (structure; the
 * KeyedWeakReference and Thread instances, whose key, description and name Strings analysis
 * prints; those Strings, for their value arrays); writing is one more. Memory holds the
 * class table and the few ids kept, never a per-object table. */
#define _FILE_OFFSET_BITS 64
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

#include "heap_index.h"
#include "heap_objects.h"

typedef struct {
    uint64_t *ids;
    size_t count, cap;
} id_set;

static int set_add(id_set *s, uint64_t id) {
    if (!id) return 0;
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        uint64_t *n = lw__realloc(s->ids, cap * sizeof *n);
        if (!n) return -1;
        s->ids = n;
        s->cap = cap;
    }
    s->ids[s->count++] = id;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void set_seal(id_set *s) {
    if (s->count) qsort(s->ids, s->count, sizeof *s->ids, cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < s->count; i++)
        if (!k || s->ids[i] != s->ids[k - 1]) s->ids[k++] = s->ids[i];
    s->count = k;
}

static int set_has(const id_set *s, uint64_t id) {
    size_t lo = 0, hi = s->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->count && s->ids[lo] == id;
}

/* Calls `fn` for every heap-dump sub-record, in file order; a nonzero return stops the walk
 * with that status (err already filled). */
typedef lw_status (*subrecord_fn)(const lw_heap *heap, const lw__subrecord *sub, void *user);

static lw_status each_subrecord(const lw_heap *heap, subrecord_fn fn, void *user, lw_error *err) {
    const lw__hprof *h = &heap->hprof;
    lw__record rec;
    int r;
    for (uint64_t pos = h->records_start; (r = lw__hprof_record_at(h, pos, &rec, err)) == 1; pos = rec.body + rec.length) {
        if (rec.tag != LW_TAG_HEAP_DUMP && rec.tag != LW_TAG_HEAP_DUMP_SEGMENT) continue;
        uint64_t end = rec.body + rec.length;
        lw__subrecord sub;
        for (uint64_t p = rec.body; p < end; p += sub.length) {
            if (lw__hprof_subrecord_at(h, p, end, &sub, err) < 0) return LW_ERR_FORMAT;
            lw_status st = fn(heap, &sub, user);
            if (st != LW_OK) return st;
        }
    }
    return r < 0 ? LW_ERR_FORMAT : LW_OK;
}

/* Calls `fn` for every INSTANCE_DUMP of a known class; a nonzero return means out of memory. */
typedef int (*instance_fn)(const lw_heap *heap, const lw__object *o, void *user);

typedef struct {
    instance_fn fn;
    void *user;
    lw_error *err;
} instance_walk;

static lw_status visit_instance(const lw_heap *heap, const lw__subrecord *sub, void *user) {
    instance_walk *w = user;
    if (sub->tag != LW_SUB_INSTANCE_DUMP) return LW_OK;
    lw__object o;
    lw__heap_object_at(heap, sub->offset, &o);
    if (o.class_index == LW_NONE || !w->fn(heap, &o, w->user)) return LW_OK;
    return lw__fail(w->err, LW_ERR_NOMEM, "out of memory");
}

static lw_status each_instance(const lw_heap *heap, instance_fn fn, void *user, lw_error *err) {
    instance_walk w = {fn, user, err};
    return each_subrecord(heap, visit_instance, &w, err);
}

static int note_strings(const lw_heap *heap, const lw__object *o, void *user) {
    id_set *strings = user;
    uint32_t flags = heap->classes[o->class_index].flags;
    uint8_t t;
    uint64_t v;
    static const char *const kwr_fields[] = {"key", "description", "name"};
    if (flags & LW_CLASS_KWR) {
        for (size_t i = 0; i < 3; i++)
            if (lw__instance_field(heap, o, NULL, kwr_fields[i], &t, &v) && t == LW_T_OBJECT && set_add(strings, v)) return 1;
    }
    if ((flags & LW_CLASS_THREAD) && lw__instance_field(heap, o, NULL, "name", &t, &v) && t == LW_T_OBJECT &&
        set_add(strings, v))
        return 1;
    return 0;
}

typedef struct {
    const id_set *strings;
    id_set *arrays;
} value_note;

static int note_values(const lw_heap *heap, const lw__object *o, void *user) {
    value_note *vn = user;
    if (!(heap->classes[o->class_index].flags & LW_CLASS_STRING) || !set_has(vn->strings, o->id)) return 0;
    uint8_t t;
    uint64_t v;
    if (lw__instance_field(heap, o, NULL, "value", &t, &v) && t == LW_T_OBJECT && set_add(vn->arrays, v)) return 1;
    return 0;
}

/* ---- output: plain or zstd, to a temp file renamed into place ------------------------------ */

typedef struct {
    int fd;
    ZSTD_CCtx *z;
    uint8_t *zbuf;
    size_t zcap;
    uint64_t written;
    const char *path;
    lw_error *err;
    lw_status st;
} sink;

static void raw_write(sink *s, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0 && s->st == LW_OK) {
        ssize_t w = write(s->fd, b, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            s->st = lw__fail(s->err, LW_ERR_IO, "%s: write failed: %s", s->path, strerror(errno));
            return;
        }
        b += w;
        n -= (size_t)w;
        s->written += (uint64_t)w;
    }
}

static void sink_write(sink *s, const void *p, size_t n, int end) {
    if (s->st != LW_OK) return;
    if (!s->z) {
        raw_write(s, p, n);
        return;
    }
    ZSTD_inBuffer in = {p, n, 0};
    for (;;) {
        ZSTD_outBuffer out = {s->zbuf, s->zcap, 0};
        size_t rem = ZSTD_compressStream2(s->z, &out, &in, end ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(rem)) {
            s->st = lw__fail(s->err, LW_ERR_IO, "zstd: %s", ZSTD_getErrorName(rem));
            return;
        }
        raw_write(s, s->zbuf, out.pos);
        if (s->st != LW_OK) return;
        if (end ? rem == 0 : in.pos == in.size) return;
    }
}

static void sink_zeros(sink *s, uint64_t n) {
    static const uint8_t zeros[65536];
    while (n > 0 && s->st == LW_OK) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        sink_write(s, zeros, k, 0);
        n -= k;
    }
}

typedef struct {
    sink *s;
    const id_set *keep;
    lw_trim_stats *stats;
    const lw_trim_options *opts;
    uint64_t copied_to;       /* input bytes written so far */
    uint64_t next_progress;
} copy_state;

static lw_status copy_subrecord(const lw_heap *heap, const lw__subrecord *sub, void *user) {
    copy_state *c = user;
    const lw__hprof *h = &heap->hprof;
    if (sub->tag != LW_SUB_PRIMITIVE_ARRAY_DUMP) return LW_OK;
    c->stats->primitive_arrays++;
    uint64_t p = sub->offset;
    uint64_t hdr = 1 + (uint64_t)h->id_size + 9;
    if (set_has(c->keep, lw__be_id(h->data + p + 1, h->id_size)) || sub->length == hdr) {
        c->stats->primitive_arrays_kept++;
        return LW_OK;
    }
    sink_write(c->s, h->data + c->copied_to, (size_t)(p + hdr - c->copied_to), 0);
    sink_zeros(c->s, sub->length - hdr);
    c->stats->bytes_zeroed += sub->length - hdr;
    c->copied_to = p + sub->length;
    if (c->opts->progress && p >= c->next_progress) {
        c->next_progress = p + (64u << 20);
        c->opts->progress(c->opts->progress_user, "trim", p, h->size);
    }
    return c->s->st;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

lw_status lw_trim_file(const char *in_path, const char *out_path, const lw_trim_options *opts, lw_trim_stats *stats,
                       lw_error *err) {
    if (!in_path || !out_path) return lw__fail(err, LW_ERR_USAGE, "lw_trim_file: missing path");
    lw_trim_options o = {sizeof o, 0, 0, NULL, NULL};
    if (opts && opts->struct_size >= sizeof o) o = *opts;
    int compress = o.compress > 0 || (o.compress == 0 && ends_with(out_path, ".zst"));
    lw_trim_stats local = {0};
    lw_status st;
    id_set strings = {0}, arrays = {0};
    char *tmp = NULL;
    sink s = {.fd = -1, .path = out_path, .err = err};
    lw_heap *heap = lw__calloc(1, sizeof *heap);
    if (!heap) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
    heap->progress = o.progress;
    heap->progress_user = o.progress_user;
    st = lw__hprof_open_file(&heap->hprof, in_path, NULL, err);
    if (st != LW_OK) goto out;
    st = lw__heap_index_build(heap, 0, err);
    if (st != LW_OK) goto out;
    st = each_instance(heap, note_strings, &strings, err);
    if (st != LW_OK) goto out;
    set_seal(&strings);
    value_note vn = {&strings, &arrays};
    st = each_instance(heap, note_values, &vn, err);
    if (st != LW_OK) goto out;
    set_seal(&arrays);

    size_t tl = strlen(out_path) + 16;
    tmp = lw__malloc(tl);
    if (!tmp) {
        st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
        goto out;
    }
    snprintf(tmp, tl, "%s.tmp-XXXXXX", out_path);
    s.fd = mkstemp(tmp);
    if (s.fd < 0) {
        st = lw__fail(err, LW_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    s.path = tmp;
    if (compress) {
        s.z = ZSTD_createCCtx();
        s.zcap = ZSTD_CStreamOutSize();
        s.zbuf = lw__malloc(s.zcap);
        if (!s.z || !s.zbuf) {
            st = lw__fail(err, LW_ERR_NOMEM, "out of memory");
            goto out;
        }
        ZSTD_CCtx_setParameter(s.z, ZSTD_c_compressionLevel, o.compression_level ? o.compression_level : 3);
        ZSTD_CCtx_setParameter(s.z, ZSTD_c_checksumFlag, 1);
        ZSTD_CCtx_setPledgedSrcSize(s.z, heap->hprof.size);
    }
    /* Copy everything; inside heap dumps, cut primitive arrays not kept down to their header. */
    const lw__hprof *h = &heap->hprof;
    copy_state cs = {&s, &arrays, &local, &o, 0, 0};
    st = each_subrecord(heap, copy_subrecord, &cs, err);
    if (st == LW_OK) st = s.st;
    if (st != LW_OK) goto out;
    uint64_t copied_to = cs.copied_to;
    sink_write(&s, h->data + copied_to, (size_t)(h->size - copied_to), 1);
    if (s.st == LW_OK && fsync(s.fd) != 0) s.st = lw__fail(err, LW_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    st = s.st;
    if (st != LW_OK) goto out;
    if (close(s.fd) != 0) {
        s.fd = -1;
        st = lw__fail(err, LW_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
        goto out;
    }
    s.fd = -1;
    if (rename(tmp, out_path) != 0) {
        st = lw__fail(err, LW_ERR_IO, "cannot rename %s to %s: %s", tmp, out_path, strerror(errno));
        goto out;
    }
    local.in_bytes = h->size;
    local.out_bytes = s.written;
    if (stats) *stats = local;
out:
    if (s.fd >= 0) close(s.fd);
    if (st != LW_OK && tmp && tmp[0]) unlink(tmp);
    ZSTD_freeCCtx(s.z);
    lw__free(s.zbuf);
    lw__free(tmp);
    lw__free(strings.ids);
    lw__free(arrays.ids);
    lw_heap_free(heap);
    return st;
}
