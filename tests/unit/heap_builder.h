/* heap_builder.h — builds synthetic HPROF dumps for the unit tests, on top of the library's
 * internal writer (lw__hprof_writer): named classes with instance and static fields,
 * instances with field values set by name, object and primitive arrays, java.lang.String,
 * threads, GC roots of every kind, KeyedWeakReference watches (LeakCanary 1 and 2 and
 * Leakwatch layouts), both id sizes and both HPROF versions.
 *
 * The builder keeps the dump in memory and writes it in one go (hb_write*), in this order:
 * header, STRING records, LOAD_CLASS records, extra top-level records (hb_record), then the
 * heap dump: roots, CLASS_DUMPs, objects (in creation order, or reversed), raw sub-records,
 * HEAP_DUMP_END. Any failure inside the builder aborts the test (fail_msg). */
#ifndef LW_TEST_HEAP_BUILDER_H
#define LW_TEST_HEAP_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "leakcore.h"

#define HB_JVM "JAVA PROFILE 1.0.2"
#define HB_ANDROID "JAVA PROFILE 1.0.3"
#define HB_OBJECT_ARRAY "[Ljava/lang/Object;" /* array class name as HotSpot writes it */

typedef struct hb hb;

/* A new dump with the well-known classes already defined: java.lang.Object,
 * java.lang.String (value:O coder:B hash:I), java.lang.Thread (name:O),
 * java.lang.ref.Reference (referent:O queue:O), java.lang.ref.WeakReference,
 * java.lang.ref.SoftReference, java.lang.ref.PhantomReference and [Ljava/lang/Object;. */
hb *hb_new(const char *version, unsigned id_size);
void hb_free(hb *b);

/* Options (set before writing). */
void hb_set_segment_max(hb *b, uint64_t segment_max); /* 0 = the writer's default */
void hb_set_reverse_objects(hb *b, int reverse);      /* write objects in reverse creation order */
void hb_set_next_object_id(hb *b, uint64_t id, uint64_t step); /* ids of the next objects */
void hb_set_heap_dump_uptime(hb *b, int64_t ms);      /* KeyedWeakReference.heapDumpUptimeMillis; default 10000 */

/* The id of a STRING record holding `text` (created on first use). */
uint64_t hb_string_id(hb *b, const char *text);

/* Defines a class. `fields` and `statics` are space-separated "name:T" lists, T one of
 * O (object) Z C F D B S I J (NULL or "" for none). `super_name` NULL = java.lang.Object
 * (except for java.lang.Object itself). Returns the class object id. */
uint64_t hb_class(hb *b, const char *name, const char *super_name, const char *fields, const char *statics);
uint64_t hb_class_id(hb *b, const char *name); /* 0 when undefined */
void hb_set_static(hb *b, uint64_t class_id, const char *name, uint64_t value);

/* An instance of class `class_name` with all fields zero; fields set by name (the nearest
 * declaring class first). Values are the raw bits (ids, integers, 0/1 booleans). */
uint64_t hb_instance(hb *b, const char *class_name);
void hb_set(hb *b, uint64_t obj, const char *field, uint64_t value);

/* Object arrays (`array_class` NULL = "[Ljava/lang/Object;"; defined on first use). */
uint64_t hb_object_array(hb *b, const char *array_class, const uint64_t *elements, uint32_t count);
void hb_array_set(hb *b, uint64_t array, uint32_t index, uint64_t value);

/* A primitive array; `be_data` holds `count` big-endian elements or NULL for zeros. */
uint64_t hb_prim_array(hb *b, uint8_t type, const void *be_data, uint32_t count);
/* A PRIMITIVE_ARRAY_NODATA (0xC3) sub-record. */
uint64_t hb_prim_array_nodata(hb *b, uint8_t type, uint32_t count);

/* A java.lang.String: value = byte[] of the Latin-1 text, coder 0. */
uint64_t hb_jstring(hb *b, const char *text);

/* A GC root sub-record (a, b: the tag's extra u4 fields). */
void hb_root(hb *b, uint8_t tag, uint64_t id, uint32_t a, uint32_t bb);

/* A java.lang.Thread named `name` with a THREAD_OBJECT root of serial `serial`. */
uint64_t hb_thread(hb *b, const char *name, uint32_t serial);

typedef enum { HB_KWR_LEAKWATCH, HB_KWR_LEAKCANARY2, HB_KWR_LEAKCANARY1 } hb_kwr_kind;

/* Watches `obj` with a KeyedWeakReference (io.leakwatch layout): watched at uptime 1000,
 * retained at 5000 when `retained`, else retainedUptimeMillis = -1. Returns the KWR id. */
uint64_t hb_watch(hb *b, uint64_t obj, const char *key, const char *description, int retained);
/* Any layout; LeakCanary 1 ignores the uptimes (fields key, name). */
uint64_t hb_watch_ex(hb *b, hb_kwr_kind kind, uint64_t obj, const char *key, const char *description,
                     int64_t watch_uptime, int64_t retained_uptime);

/* Leaks several tests share. Screens: com.example.Listener and com.example.Screen (defined
 * here, so not before) and three Screens held through Listeners in an array in `registry`'s
 * static `listeners` (keys screen-0..2), then one in its static `single` (key "single"). A
 * local: a com.example.Job held by thread "worker"'s frame (serial 3; key "job"). All are
 * watched and retained. */
void hb_add_screen_leaks(hb *b, uint64_t registry);
void hb_add_local_leak(hb *b);

/* Extra top-level record (written after LOAD_CLASS records, before the heap dump). */
void hb_record(hb *b, uint8_t tag, const void *body, uint32_t len);
/* Raw heap-dump sub-record bytes (tag included), written after the objects. */
void hb_subrecord_raw(hb *b, const void *bytes, size_t len);
/* HEAP_DUMP_INFO (0xFE) sub-record, written before the roots. */
void hb_heap_dump_info(hb *b, uint32_t heap_id, const char *name);

/* Writes the dump to `path`. Aborts the test on failure. */
void hb_write(hb *b, const char *path);
/* Writes to a new temp file; returns its malloc'd path (caller unlinks and frees). */
char *hb_write_temp(hb *b);
/* The dump's bytes (malloc'd, exactly *size bytes). */
uint8_t *hb_bytes(hb *b, size_t *size);

/* After a write: the file offset and byte length of the elements of primitive array `id`. */
int hb_data_range(const hb *b, uint64_t id, uint64_t *offset, uint64_t *len);

/* What the builder holds: classes, instances, object arrays, primitive arrays (with
 * NODATA ones), roots with a non-zero id. */
typedef struct hb_counts {
    uint64_t classes, instances, object_arrays, primitive_arrays, roots;
} hb_counts;
void hb_get_counts(const hb *b, hb_counts *c);

/* Independent walk of the top-level records of an HPROF image: counts per tag (256
 * entries, may be NULL) and the offsets at which a record starts or the file ends
 * (boundaries, may be NULL; *nb set to the count, including records_start and size). */
void hb_scan_records(const uint8_t *d, size_t size, uint64_t *tag_counts, uint64_t *boundaries, size_t cap, size_t *nb);

/* ---- test conveniences ------------------------------------------------------------------ */

/* Writes the dump to a temp file, opens it with lw_heap_open (asserting LW_OK) and unlinks
 * the file (the mapping stays valid). */
lw_heap *hb_open(hb *b);
/* Analyzes with `key` (NULL = all), asserting LW_OK. */
lw_leak_report *hb_analyze(lw_heap *heap, const char *key);
/* hb_open + hb_analyze + lw_heap_free: the report outlives the heap. */
lw_leak_report *hb_analyze_dump(hb *b, const char *key);
/* Trace JSON of a report with its durations removed (compact), malloc'd. */
char *hb_report_json(lw_leak_report *r);
/* A fresh temp path (the file is created empty), malloc'd; `suffix` may be NULL. */
char *hb_temp_path(const char *suffix);
/* Reads a whole file (malloc'd). */
uint8_t *hb_read_file(const char *path, size_t *size);

#endif
