/* hprof_out.h — a synthetic HotSpot-like heap dump being written: what the benchmark
 * generators (gen_heap.c, sdk/gen_sdk_heap.c) share, so that both write their names, classes
 * and records the same way through libleakcore's internal HPROF writer.
 *
 * It keeps the names (one STRING record each, ids spaced like HotSpot's Symbol addresses) and
 * the classes (LOAD_CLASS, CLASS_DUMP, instance layouts), and pins what both dumps share:
 * "JAVA PROFILE 1.0.2", 8-byte ids, a fixed timestamp (same arguments, same bytes), and the
 * frameless stack trace (serial 1) every object points to, as HotSpot writes it.
 *
 * Both generators run their object pass twice, because class statics point to objects written
 * later: the dry pass uses only the tables (layouts, sizes, class ids) and sets the statics;
 * hprof_out_open then starts the file for the second pass. In order:
 *   hprof_out_new, hprof_out_class / hprof_out_static (declares names as it goes),
 *   hprof_out_place_classes, [dry pass: hprof_out_set_static], hprof_out_open,
 *   [hprof_out_record], hprof_out_class_dumps, objects and roots, hprof_out_end,
 *   hprof_out_close, hprof_out_free.
 *
 * Functions returning int give 0 (or an index) on success and -1 on failure, with the reason
 * in hprof_out_error(). Write errors of the file itself are kept by the writer (which then
 * ignores later calls) and returned by hprof_out_close. Class indexes `cls` are the ones
 * hprof_out_class returned; the accessors take them on trust. */
#ifndef LW_BENCH_HPROF_OUT_H
#define LW_BENCH_HPROF_OUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct hprof_out hprof_out;

/* NULL when out of memory. */
hprof_out *hprof_out_new(void);
/* Also closes a file still open, without a word: for paths that already failed. */
void hprof_out_free(hprof_out *o);
const char *hprof_out_error(const hprof_out *o);

/* The id of the STRING record holding the `len` bytes at `s`, made on first use. New names
 * fail once the file is open: their STRING records would be missing. */
int hprof_out_name(hprof_out *o, const char *s, size_t len, uint64_t *id);
size_t hprof_out_name_count(const hprof_out *o);

/* Declares a class (JVM form: java/lang/String, [Ljava/lang/Object;); returns its index, in
 * declaration order (LOAD_CLASS serial = index + 1). `super` is an earlier index or -1; `boot`
 * classes get loader 0 and a STICKY_CLASS root. `fields` lists the declared instance fields
 * as space-separated "name:T", T one of O (object) Z C F D B S I J (as in heap_builder.h);
 * NULL or "" for none. A class is complete when declared, so its layout is final. */
int hprof_out_class(hprof_out *o, const char *name, int super, int boot, const char *fields);
/* Adds a static field (LW_T_* type, value's raw bits); returns its index within the class.
 * Classes and statics are declared before hprof_out_open. */
int hprof_out_static(hprof_out *o, int cls, const char *name, uint8_t type, uint64_t value);
/* Changes static `k`'s value: allowed until the CLASS_DUMPs are written. */
int hprof_out_set_static(hprof_out *o, int cls, int k, uint64_t value);

int hprof_out_class_count(const hprof_out *o);
int hprof_out_super(const hprof_out *o, int cls);
int hprof_out_boot(const hprof_out *o, int cls);
/* 0 until hprof_out_place_classes. */
uint64_t hprof_out_class_id(const hprof_out *o, int cls);
/* The instance field types as INSTANCE_DUMP holds them (own fields, then the super's, ...);
 * returns their count. */
size_t hprof_out_layout(const hprof_out *o, int cls, const uint8_t **types);
/* INSTANCE_DUMP data bytes of an instance of `cls`. */
uint32_t hprof_out_instance_size(const hprof_out *o, int cls);
/* Position in `cls`'s layout of field `name` declared by `decl` (`cls` or one of its supers). */
int hprof_out_field_pos(hprof_out *o, int cls, int decl, const char *name);

/* Gives every class its object id from `addr` up, sized like a java.lang.Class mirror, so
 * that class objects sit at the bottom of the heap as in HotSpot; returns the address after
 * them, where the objects start. */
uint64_t hprof_out_place_classes(hprof_out *o, uint64_t addr);

/* File bytes of an object's sub-record, for generators that steer by file size. */
uint64_t hprof_out_instance_bytes(const hprof_out *o, int cls);
uint64_t hprof_out_object_array_bytes(uint32_t count);
uint64_t hprof_out_primitive_array_bytes(uint8_t type, uint32_t count);

/* Creates `path` and writes what precedes the heap dump in both generators' files: the
 * header, a STRING record for every name, a LOAD_CLASS record for every class and the
 * frameless STACK_TRACE. Names and classes are final from here on. */
int hprof_out_open(hprof_out *o, const char *path);
/* Any other top-level record, given as its `len` body bytes (STACK_FRAME, STACK_TRACE). */
int hprof_out_record(hprof_out *o, uint8_t tag, const void *body, uint32_t len);
/* Starts the heap dump: a CLASS_DUMP for every class; non-boot classes name `app_loader`. */
int hprof_out_class_dumps(hprof_out *o, uint64_t app_loader);

/* An INSTANCE_DUMP: `values` holds one value per layout entry (`count` of them: the layout's
 * length), raw bits, written big-endian at each type's size. */
int hprof_out_instance(hprof_out *o, uint64_t id, int cls, const uint64_t *values, size_t count);
/* `cls` is the array class (e.g. [Ljava/lang/Object;). */
int hprof_out_object_array(hprof_out *o, uint64_t id, int cls, const uint64_t *elements, uint32_t count);
/* `data` holds `count` elements of LW_T_* `type`, already big-endian, or is NULL for zeros. */
int hprof_out_primitive_array(hprof_out *o, uint64_t id, uint8_t type, const void *data, uint32_t count);
/* A GC root; `a` and `b` are the tag's extra u4 fields (thread serial, frame number). */
int hprof_out_root(hprof_out *o, uint8_t sub_tag, uint64_t id, uint32_t a, uint32_t b);
/* Ends the heap dump with what HotSpot writes last: a STICKY_CLASS root for every boot class,
 * then HEAP_DUMP_END. */
int hprof_out_end(hprof_out *o);

/* A buffer of at least `n` bytes for the caller to fill (primitive array contents), owned by
 * `o`: the next hprof_out_buffer or hprof_out_instance reuses it. NULL when out of memory. */
void *hprof_out_buffer(hprof_out *o, size_t n);
/* Flushes and closes the file; `bytes` (may be NULL) gets its size. Returns the first error
 * of any write since hprof_out_open. */
int hprof_out_close(hprof_out *o, uint64_t *bytes);

#endif
