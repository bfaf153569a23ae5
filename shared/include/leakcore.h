/* leakcore.h — libleakcore: read HPROF heap dumps, find leak traces, render and trim them.
 *
 * The public surface of shared/. Client (on-device "traces" mode, trimmer) and server
 * (workers, ingest validation) use libleakcore only through this header.
 *
 * ABI promise: within a major version, functions and enum values are only ever added;
 * structs whose first member is `struct_size` may grow at the end (set it to sizeof). */
#ifndef LEAKCORE_H
#define LEAKCORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LW_CORE_BUILDING) && defined(__GNUC__)
#define LW_CORE_API __attribute__((visibility("default")))
#else
#define LW_CORE_API
#endif

#define LW_CORE_VERSION_MAJOR 0
#define LW_CORE_VERSION_MINOR 2
#define LW_CORE_VERSION_PATCH 0
#define LW_CORE_VERSION_STRING "0.2.0"

/* The version of the library loaded at run time ("0.2.0"). */
LW_CORE_API const char *lw_core_version(void);

/* ---- errors ------------------------------------------------------------------------- */

/* Codes are only ever added. 0 is success. */
typedef enum lw_status {
    LW_OK = 0,
    LW_ERR_USAGE = 1,     /* a bad argument from the caller */
    LW_ERR_IO = 2,        /* open/read/write/mmap failed */
    LW_ERR_FORMAT = 3,    /* corrupt, truncated or unsupported input */
    LW_ERR_NOMEM = 4,     /* an allocation failed */
    LW_ERR_LIMIT = 5,     /* a configured cap was exceeded (decompressed size, depth, ...) */
    LW_ERR_NOT_FOUND = 6, /* the thing asked for is not in the input */
    LW_ERR_BUDGET = 7,    /* the heap's memory budget (lw_heap_options.memory_budget) is spent:
                             the same input needs as much again, so retrying cannot help */
} lw_status;

/* A static description of a code ("corrupt or truncated input"). Never NULL. */
LW_CORE_API const char *lw_strerror(lw_status status);

/* The detail of one failure: every fallible function takes an optional `lw_error *` and
 * fills it on failure with the code and a message that names what was wrong and where
 * (for HPROF input: the byte offset and the record). */
typedef struct lw_error {
    lw_status status;
    char message[512];
} lw_error;

/* Progress of a long operation: `phase` is a static string ("index", "paths", "trim"),
 * `done` and `total` are in the phase's own unit (bytes for "index", objects for "paths";
 * total 0 when unknown). Called from the calling thread, at most a few times per second. */
typedef void (*lw_progress_fn)(void *user, const char *phase, uint64_t done, uint64_t total);

/* ---- heap: an opened and indexed dump (pass 1) --------------------------------------- */

typedef struct lw_heap lw_heap;

typedef struct lw_heap_options {
    size_t struct_size;              /* sizeof(lw_heap_options) */
    uint64_t max_decompressed_bytes; /* cap for a .zst input; 0 = 64 GiB */
    const char *tmp_dir;             /* where a .zst input is decompressed; NULL = $TMPDIR or /tmp */
    lw_progress_fn progress;         /* optional */
    void *progress_user;
    uint64_t memory_budget;          /* bytes libleakcore may hold for this heap (index + analysis); 0 = no budget */
} lw_heap_options;

/* Opens `path` (an HPROF file, or a zstd-compressed one, recognised by its magic bytes),
 * maps it and builds the index. `opts` may be NULL for defaults. On success *out owns the
 * heap; free it with lw_heap_free. Truncated or corrupt input gives LW_ERR_FORMAT with the
 * offset in err->message.
 *
 * The memory budget counts what the library allocates while lw_heap_open, lw_heap_analyze and
 * lw_heap_class_histogram run on this heap, in the bytes malloc really holds; not the mapped
 * dump (file-backed), nor what libzstd allocates itself (its decompression window). A call
 * that would pass it fails with LW_ERR_BUDGET and a message naming the budget ("the analysis
 * needs more than its memory budget of N bytes (index: ...)"); the heap stays usable after an
 * analysis that failed so. A report that lw_heap_analyze returns is the caller's and leaves
 * the count. */
LW_CORE_API lw_status lw_heap_open(lw_heap **out, const char *path, const lw_heap_options *opts,
                                   lw_error *err);
LW_CORE_API void lw_heap_free(lw_heap *heap); /* NULL is a no-op */

typedef struct lw_heap_summary {
    char hprof_version[32]; /* "JAVA PROFILE 1.0.2" */
    unsigned id_size;       /* 4 or 8 */
    uint64_t timestamp_ms;
    uint64_t file_bytes;
    uint64_t records;       /* top-level records */
    uint64_t strings, load_classes, stack_frames, stack_traces, heap_dump_segments;
    uint64_t classes, instances, object_arrays, primitive_arrays;
    uint64_t gc_roots;
    uint64_t index_bytes;   /* memory held by the index */
    double index_seconds;   /* time pass 1 took */
} lw_heap_summary;

LW_CORE_API void lw_heap_get_summary(const lw_heap *heap, lw_heap_summary *out);

/* The most bytes this heap's calls held at once since lw_heap_open (its index included): what
 * lw_heap_options.memory_budget is compared with. A run without a budget measures what one
 * needs. (Not a field of lw_heap_summary: that struct has no struct_size, so it cannot grow.) */
LW_CORE_API uint64_t lw_heap_memory_peak(const lw_heap *heap);

typedef struct lw_class_stat {
    const char *class_name; /* borrowed from the heap; Java source form */
    uint64_t instances;     /* instances, or arrays of that array class */
    uint64_t shallow_bytes;
} lw_class_stat;

/* Fills up to `capacity` entries of `out` with the classes that have the most instances
 * (by_bytes = 0) or the largest shallow size (by_bytes = 1), largest first. Returns the
 * number written; 0 with `err` filled when memory ran out (LW_ERR_NOMEM) or the heap's
 * memory budget was spent (LW_ERR_BUDGET). Names are borrowed from the heap. */
LW_CORE_API size_t lw_heap_class_histogram(lw_heap *heap, int by_bytes, lw_class_stat *out,
                                           size_t capacity, lw_error *err);

/* ---- the leak report model (analysis result, trace JSON, what the API returns) -------- */

typedef enum lw_object_kind { LW_OBJECT_INSTANCE = 0, LW_OBJECT_CLASS = 1, LW_OBJECT_ARRAY = 2 } lw_object_kind;
typedef enum lw_leaking { LW_LEAKING_UNKNOWN = 0, LW_LEAKING_NO = 1, LW_LEAKING_YES = 2 } lw_leaking;
typedef enum lw_ref_kind {
    LW_REF_INSTANCE_FIELD = 0,
    LW_REF_STATIC_FIELD = 1,
    LW_REF_ARRAY_ELEMENT = 2,
    LW_REF_LOCAL = 3,
} lw_ref_kind;

/* One object on a path. All strings are owned by the report (malloc'd, NUL-terminated). */
typedef struct lw_trace_element {
    char *class_name;      /* Java source form: "java.lang.Object[]" */
    lw_object_kind object_kind;
    lw_leaking leaking;
    char *reason;          /* "" when none */
    char **labels;         /* extra facts shown under the object */
    size_t label_count;
    /* the reference to the next element; absent on the last element */
    int has_reference;
    lw_ref_kind ref_kind;
    char *ref_name;        /* field name; thread name for a local; NULL for an array element */
    uint64_t ref_index;    /* array slot for LW_REF_ARRAY_ELEMENT */
    int suspect;
    /* leaking object only (the last element); NULL / -1 when unknown */
    char *key;
    char *description;
    int64_t watch_ms;
    int64_t retained_ms;
    int64_t retained_bytes;
    int64_t retained_objects;
} lw_trace_element;

typedef struct lw_trace {
    char *gc_root;         /* "STICKY_CLASS", "JNI_GLOBAL", ... */
    lw_trace_element *elements;
    size_t element_count;
    /* private (zero it): a trace read from JSON keeps its strings in its report's block, and
     * frees only the ones outside [lw__pool, lw__pool + lw__pool_len) */
    const char *lw__pool;
    size_t lw__pool_len;
} lw_trace;

typedef struct lw_leak {
    char signature[41];    /* lower-case hex SHA-1 */
    int library;           /* 1 = library leak (a library-leak pattern matched) */
    char *short_description;
    char *library_pattern; /* NULL for application leaks */
    char *library_description;
    uint64_t count;        /* leaking objects with this signature */
    lw_trace *traces;      /* at least one; the first is the representative */
    size_t trace_count;
} lw_leak;

typedef struct lw_leak_report {
    int format;            /* 1 */
    char *analyzer_name;
    char *analyzer_version;
    char *hprof_version;   /* NULL when not from a dump */
    unsigned id_size;
    uint64_t objects;
    uint64_t bytes;
    int64_t index_ms, paths_ms, retained_ms; /* -1 = not measured */
    lw_leak *leaks;
    size_t leak_count;
    /* private: the one block that a report read from JSON (lw_leak_report_from_json) keeps
     * its strings in, its traces' too; lw_leak_report_free frees it */
    char *lw__pool;
    size_t lw__pool_len;
} lw_leak_report;

LW_CORE_API void lw_leak_report_free(lw_leak_report *report); /* NULL is a no-op */

/* ---- analysis (pass 2) ---------------------------------------------------------------- */

typedef struct lw_analysis_options {
    size_t struct_size;      /* sizeof(lw_analysis_options) */
    const char *key;         /* only the object watched with this KeyedWeakReference key; NULL = all retained */
    int compute_retained;    /* retained bytes/objects per leaking object (slower: full traversal) */
    lw_progress_fn progress; /* optional */
    void *progress_user;
} lw_analysis_options;

/* Finds the leaking objects of `heap` and the shortest strong path from a GC root to each,
 * builds their traces, statuses and signatures, groups them by signature. `opts` may be
 * NULL. *out is a new report (free with lw_leak_report_free); it has no leaks when none was
 * found. With a `key` that no KeyedWeakReference carries: LW_ERR_NOT_FOUND. */
LW_CORE_API lw_status lw_heap_analyze(lw_heap *heap, const lw_analysis_options *opts,
                                      lw_leak_report **out, lw_error *err);

/* ---- traces: statuses, suspects, signatures -------------------------------------------- */

/* Applies LeakCanary's status propagation to a trace whose elements carry their own
 * statuses (the last one is forced to YES) and sets every reference's `suspect` flag. */
LW_CORE_API void lw_trace_propagate(lw_trace *trace);

/* Recomputes the `suspect` flags from the elements' statuses alone; returns 1 if any flag
 * changed (what a server uses to refuse a trace whose flags disagree), else 0. */
LW_CORE_API int lw_trace_update_suspects(lw_trace *trace);

/* The signature of an application-leak trace (suspect references only), as 40 lower-case
 * hex digits and a NUL into `out`. */
LW_CORE_API void lw_trace_signature(const lw_trace *trace, char out[41]);

/* The signature of a library leak: SHA-1 of its pattern text. */
LW_CORE_API void lw_pattern_signature(const char *pattern, char out[41]);

/* SHA-1 of `len` bytes as lower-case hex. */
LW_CORE_API void lw_sha1_hex(const void *data, size_t len, char out[41]);

/* ---- rendering and the trace JSON ------------------------------------------------------ */

/* LeakCanary-style text of the whole report (every leak's first trace). Returns a malloc'd
 * string the caller frees, or NULL when out of memory. */
LW_CORE_API char *lw_leak_report_to_text(const lw_leak_report *report);

/* The text of one trace ("┬───" ... "╰→ ..."). malloc'd; NULL when out of memory. */
LW_CORE_API char *lw_trace_to_text(const lw_trace *trace);

/* The trace JSON (format 1, docs/trace-json.md). `pretty` indents it. malloc'd. */
LW_CORE_API char *lw_leak_report_to_json(const lw_leak_report *report, int pretty);

/* One trace as it stands in the trace JSON's "traces" array, unindented: the same bytes
 * lw_leak_report_to_json(report, 0) writes for it. malloc'd; NULL when out of memory. */
LW_CORE_API char *lw_trace_to_json(const lw_trace *trace);

typedef struct lw_json_limits {
    size_t max_bytes;        /* whole document; 0 = 16 MiB */
    size_t max_leaks;        /* 0 = 1000 */
    size_t max_traces;       /* per leak; 0 = 100 */
    size_t max_elements;     /* per trace; 0 = 10000 */
    size_t max_string;       /* any string's bytes; 0 = 64 KiB */
} lw_json_limits;

/* Parses a trace JSON document of `len` bytes (untrusted input: every size is capped by
 * `limits`, which may be NULL for the defaults). On success *out is a new report. Its strings
 * share one block instead of an allocation each (malloc and free were ~15 % of leakd's CPU for
 * a traces report): never free one of them; to replace one, assign a malloc'd string, which
 * lw_leak_report_free then frees. */
LW_CORE_API lw_status lw_leak_report_from_json(const char *text, size_t len, const lw_json_limits *limits,
                                               lw_leak_report **out, lw_error *err);

/* ---- report meta: the first part of an upload (ARCHITECTURE.md, wire protocol) -------- */

/* What a server reads from an upload's meta object, checked for JSON type only: the values'
 * rules (a UUID, a known mode, lengths) are the server's. A string member that is absent or
 * not a string is NULL; `app_version_bad` / `build_bad` say that member is present with
 * another type. `install_id` is `device.install_id` when `device` is an object and it is a
 * string; `install_id_bad` says `device` is not an object, or its `install_id` not a string
 * (null, for either, is taken for absent). The strings are NUL-terminated and live until
 * lw_report_meta_free. */
typedef struct lw_report_meta {
    const char *report_id;
    const char *app;
    const char *mode;
    const char *app_version;
    size_t app_version_len;
    int app_version_bad;
    int has_build;     /* build is present and an integer */
    int build_bad;     /* build is present and not an integer */
    int64_t build;
    const char *install_id;
    size_t install_id_len;
    int install_id_bad;
    void *doc_;        /* the parsed document the strings point into */
} lw_report_meta;

/* Parses a meta object of `len` bytes with the strictness of the trace JSON (RFC 8259, valid
 * UTF-8, no duplicate keys). LW_ERR_FORMAT when it is not JSON or not an object. Free *out with
 * lw_report_meta_free, also after a failure. */
LW_CORE_API lw_status lw_report_meta_parse(const char *text, size_t len, lw_report_meta *out, lw_error *err);
LW_CORE_API void lw_report_meta_free(lw_report_meta *meta);

/* ---- trimming and compression ----------------------------------------------------------- */

typedef struct lw_trim_options {
    size_t struct_size;      /* sizeof(lw_trim_options) */
    int compression_level;   /* zstd level when the output is compressed; 0 = 3 */
    int compress;            /* 1 = write zstd; -1 = plain; 0 = decide by a ".zst" suffix on `out_path` */
    lw_progress_fn progress;
    void *progress_user;
} lw_trim_options;

typedef struct lw_trim_stats {
    uint64_t in_bytes;
    uint64_t out_bytes;             /* bytes written (compressed when compressing) */
    uint64_t primitive_arrays;      /* PRIMITIVE_ARRAY_DUMP records seen (NODATA ones have nothing to zero) */
    uint64_t primitive_arrays_kept; /* left as they were: what analysis reads */
    uint64_t bytes_zeroed;
} lw_trim_stats;

/* Writes a copy of the HPROF `in_path` to `out_path` in which every primitive array that
 * analysis does not read keeps its length but has its contents zeroed; the result is a
 * valid HPROF that analyzes to exactly the traces of the input. Reads the input from disk;
 * memory is bounded by the few arrays kept. `opts` and `stats` may be NULL. */
LW_CORE_API lw_status lw_trim_file(const char *in_path, const char *out_path, const lw_trim_options *opts,
                                   lw_trim_stats *stats, lw_error *err);

/* 1 if the `n` bytes at `p` begin with the magic of a zstd frame or of a skippable frame
 * (0x184D2A50-5F, which the zstd tool and the decompressor pass over), else 0. */
LW_CORE_API int lw_zstd_magic(const void *p, size_t n);

/* 1 if the file starts as lw_zstd_magic says, 0 if not, -1 on I/O error. */
LW_CORE_API int lw_is_zstd_file(const char *path);

/* Decompresses the zstd file `in_path` into `out_path` (created, fsynced), failing with
 * LW_ERR_LIMIT as soon as more than `max_bytes` would be written (the partial output is
 * removed). */
LW_CORE_API lw_status lw_zstd_decompress_file(const char *in_path, const char *out_path, uint64_t max_bytes,
                                              lw_error *err);

/* Compresses `in_path` into `out_path` with zstd at `level` (0 = 3). */
LW_CORE_API lw_status lw_zstd_compress_file(const char *in_path, const char *out_path, int level,
                                            lw_error *err);

#ifdef __cplusplus
}
#endif
#endif
