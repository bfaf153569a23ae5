/* heap_index.h — pass 1: one sequential scan of a mapped HPROF builds compact tables:
 * object id -> dense index -> record offset, classes with their field layouts and statics,
 * GC roots, and the names analysis prints. Internal to libleakcore. */
#ifndef LW_HEAP_INDEX_H
#define LW_HEAP_INDEX_H

#include "common.h"
#include "hprof_reader.h"

#define LW_NONE UINT32_MAX

/* How a reference is treated by the path finder (reference_matchers.c decides). */
enum { LW_MATCH_NORMAL = 0, LW_MATCH_IGNORED = 1, LW_MATCH_LIBRARY = 2 };

/* A reference-typed field as the path finder reads it from an instance of one class. */
typedef struct lw__ref_field {
    uint32_t offset;          /* within the instance's field data */
    const char *name;
    uint32_t declaring_class; /* class index */
    uint8_t match;            /* LW_MATCH_NORMAL or LW_MATCH_LIBRARY (ignored ones are left out) */
    uint16_t pattern;         /* library pattern index when match == LW_MATCH_LIBRARY */
} lw__ref_field;

/* A static field of a class, value copied out of the CLASS_DUMP. */
typedef struct lw__static_field {
    const char *name;
    uint8_t type;
    uint8_t match;            /* for reference statics: LW_MATCH_* */
    uint16_t pattern;
    uint64_t value;           /* id or raw bits */
} lw__static_field;

/* A declared instance field. */
typedef struct lw__field {
    const char *name;
    uint8_t type;
} lw__field;

enum {
    LW_CLASS_STRING = 1 << 0,       /* java.lang.String: its value array is never followed */
    LW_CLASS_BOXED = 1 << 1,        /* java.lang.Integer etc.: no references */
    LW_CLASS_BOXED_ARRAY = 1 << 2,  /* java.lang.Integer[] etc.: elements not followed */
    LW_CLASS_THREAD = 1 << 3,       /* java.lang.Thread or a subclass */
    LW_CLASS_KWR = 1 << 4,          /* a KeyedWeakReference class */
    LW_CLASS_OBJECT_ROOT = 1 << 5,  /* java.lang.Object */
    LW_CLASS_LAYOUT_DONE = 1 << 6,
    LW_CLASS_LAYOUT_BUSY = 1 << 7,  /* guards against super-class cycles in corrupt input */
};

typedef struct lw__class {
    uint64_t id;
    uint64_t super_id;
    uint64_t loader_id;
    uint32_t super_index;     /* LW_NONE when none or unknown */
    uint32_t instance_size;   /* as the dump states it */
    uint64_t dump_offset;     /* the CLASS_DUMP sub-record (tag byte) */
    uint64_t dump_length;
    const char *name;         /* Java source form */
    uint32_t field_first, field_count;   /* declared instance fields, in heap->fields */
    uint32_t static_first, static_count; /* in heap->statics */
    uint32_t own_bytes;       /* bytes of the declared fields */
    uint32_t data_bytes;      /* bytes of all fields up the hierarchy */
    uint32_t ref_first, ref_count;       /* reference layout for instances, in heap->ref_fields */
    uint32_t flags;
    uint32_t depth;           /* hierarchy depth, java.lang.Object = 0 */
} lw__class;

typedef struct lw__root {
    uint8_t tag;
    uint64_t id;
    uint32_t a, b;            /* the tag's extra u4 fields (thread serial, frame), 0 when none */
} lw__root;

typedef struct lw__string_ref {
    uint64_t id;
    uint64_t offset;          /* of the UTF-8 bytes */
    uint32_t length;
} lw__string_ref;

/* id -> dense index for instances and arrays, sorted by id: ids are split into buckets of
 * 2^shift by (id - min_id); bucket b holds positions [bucket[b], bucket[b+1]) of `low`,
 * the id's bits below the bucket. Heap addresses fill buckets evenly, so a lookup is one
 * directory read and a search among a handful of entries. */
typedef struct lw__idmap {
    uint64_t count;
    uint64_t min_id, max_id;
    unsigned shift;
    uint64_t nbuckets;
    uint32_t *bucket;         /* nbuckets + 1 */
    uint32_t *low32;          /* when shift <= 32 */
    uint64_t *low64;          /* otherwise: full (id - min_id) */
} lw__idmap;

typedef struct lw__name_arena lw__name_arena;

struct lw_heap {
    lw__hprof hprof;
    lw_heap_summary summary;

    lw__string_ref *strings;  /* sorted by id */
    size_t string_count;

    lw__class *classes;
    uint32_t class_count;
    uint32_t *class_slots;    /* open addressing: class index + 1, 0 = empty */
    uint64_t class_slot_mask;

    lw__field *fields;
    size_t field_count;
    lw__static_field *statics;
    size_t static_count;
    lw__ref_field *ref_fields;
    size_t ref_field_count;

    lw__name_arena *names;

    /* objects: dense indexes [0, object_count) are instances and arrays in id order,
     * [object_count, object_count + class_count) are class objects by class index. */
    lw__idmap idmap;
    uint64_t object_count;
    uint32_t *offset32;       /* record offsets when the file is < 4 GiB */
    uint64_t *offset64;

    lw__root *roots;
    size_t root_count;

    uint64_t *kwr_ids;        /* KeyedWeakReference instances seen in the scan */
    size_t kwr_count;

    /* well-known classes, LW_NONE when absent */
    uint32_t cls_object, cls_string, cls_thread, cls_reference;
    int android;              /* JAVA PROFILE 1.0.3 */
    int sdk_int;              /* android.os.Build$VERSION.SDK_INT, -1 unknown */

    lw_progress_fn progress;
    void *progress_user;

    lw__budget budget;        /* lw_heap_options.memory_budget: what this heap's calls hold */
};

/* Builds the index of an opened file. With `objects` 0 only strings, classes and roots are
 * indexed (the trimmer's light mode: memory independent of the object count). On failure
 * the heap is left for lw_heap_free. */
lw_status lw__heap_index_build(lw_heap *heap, int objects, lw_error *err);
void lw__heap_index_free(lw_heap *heap);

/* The total number of dense indexes: objects plus classes. */
static inline uint64_t lw__heap_dense_count(const lw_heap *heap) { return heap->object_count + heap->class_count; }

/* The dense index of `id`, or LW_NONE when no object has it. */
uint32_t lw__heap_lookup(const lw_heap *heap, uint64_t id);

/* The class index of class object `id`, or LW_NONE. */
uint32_t lw__heap_class_by_id(const lw_heap *heap, uint64_t id);

/* The first class with this Java source name, or LW_NONE. */
uint32_t lw__heap_class_by_name(const lw_heap *heap, const char *name);

/* Record offset (tag byte) of a dense index. */
static inline uint64_t lw__heap_offset(const lw_heap *heap, uint32_t dense) {
    if (dense >= heap->object_count) return heap->classes[dense - heap->object_count].dump_offset;
    return heap->offset32 ? heap->offset32[dense] : heap->offset64[dense];
}

/* The UTF-8 bytes of STRING record `id` (not NUL-terminated) or NULL. */
const char *lw__heap_string(const lw_heap *heap, uint64_t id, uint32_t *len);

/* Copies `s` into the heap's name arena (NUL-terminated); NULL when out of memory. */
const char *lw__heap_intern(lw_heap *heap, const char *s, size_t len);

/* 1 if class `c` is `ancestor` or one of its subclasses. */
int lw__class_is_a(const lw_heap *heap, uint32_t c, uint32_t ancestor);

/* Bytes the index holds. */
uint64_t lw__heap_index_bytes(const lw_heap *heap);

#endif
