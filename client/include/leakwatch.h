/* leakwatch.h — libleakwatch, the Leakwatch SDK: watch objects that should be gone, notice
 * the retained ones, dump the heap (from a forked child where the runtime allows it), trim
 * and compress it or analyze it on the device, spool the report and upload it.
 *
 * The library is runtime-agnostic: a runtime adapter (lw_runtime) tells it whether an object
 * was reclaimed, runs a GC, marks an object retained and dumps the heap. The JVM agent
 * (client/jvm/) is one such adapter.
 *
 * Threads: every function may be called from any thread. Callbacks into the adapter run on
 * the client's executor thread (or the caller's, for lw_watch), never on two threads at once.
 * Ownership: strings passed in are copied; nothing returned needs freeing unless stated.
 *
 * ABI promise: within a major version, functions and enum values are only ever added; structs
 * whose first member is `struct_size` may grow at the end (set it to sizeof). */
#ifndef LEAKWATCH_H
#define LEAKWATCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LW_SDK_BUILDING) && defined(__GNUC__)
#define LW_SDK_API __attribute__((visibility("default")))
#else
#define LW_SDK_API
#endif

#define LEAKWATCH_VERSION_MAJOR 0
#define LEAKWATCH_VERSION_MINOR 2
#define LEAKWATCH_VERSION_PATCH 0
#define LEAKWATCH_VERSION_STRING "0.2.0"

LW_SDK_API const char *lw_sdk_version(void);

/* Codes are only ever added. 0 is success. */
typedef enum lw_sdk_status {
    LW_SDK_OK = 0,
    LW_SDK_ERR_USAGE = 1,    /* a bad argument or configuration */
    LW_SDK_ERR_NOMEM = 2,
    LW_SDK_ERR_IO = 3,       /* the spool or a file could not be written */
    LW_SDK_ERR_BUSY = 4,     /* a dump is already in progress */
    LW_SDK_ERR_RUNTIME = 5,  /* the runtime adapter failed (GC, dump) */
    LW_SDK_ERR_LIMIT = 6,    /* a configured limit refuses it (dumps per day, free disk, watch set full) */
    LW_SDK_ERR_CLOSED = 7,   /* the client is shutting down */
} lw_sdk_status;

LW_SDK_API const char *lw_sdk_strerror(lw_sdk_status status);

/* ---- the runtime adapter ---------------------------------------------------------------- */

/* The adapter's reference to a watched object (for the JVM: a global JNI reference to the
 * io.leakwatch.KeyedWeakReference that watches it). Opaque to the SDK. */
typedef uintptr_t lw_handle;

/* is_reclaimed, run_gc, mark_retained and dump_heap are required; the rest are optional. */
typedef struct lw_runtime {
    size_t struct_size;
    void *ctx;
    /* 1 when the watched object was reclaimed, 0 when it is still there. */
    int (*is_reclaimed)(void *ctx, lw_handle h);
    /* Runs a full garbage collection (one per batch of checks, never per object). 0 on success. */
    int (*run_gc)(void *ctx);
    /* The object is retained: record `uptime_ms` in it (KeyedWeakReference.retainedUptimeMillis). */
    void (*mark_retained)(void *ctx, lw_handle h, int64_t uptime_ms);
    /* A heap dump is about to be taken at `uptime_ms` (KeyedWeakReference.heapDumpUptimeMillis). */
    void (*will_dump)(void *ctx, int64_t uptime_ms);
    /* Writes an HPROF heap dump to `path`. 0 on success, else a message in `err`. When
     * `forked` is set this runs in a forked child and must only do what is safe there. */
    int (*dump_heap)(void *ctx, const char *path, int forked, char *err, size_t cap);
    /* 1 when dump_heap may run in a forked child of the process (not HotSpot). */
    int can_fork;
    /* The SDK no longer needs `h` (reclaimed, or dumped). Optional. */
    void (*release)(void *ctx, lw_handle h);
    /* Heap in use and its maximum, in bytes; 0 on success. Optional. */
    int (*heap_usage)(void *ctx, uint64_t *used, uint64_t *max);
} lw_runtime;

/* ---- time and scheduling, injectable so tests drive them -------------------------------- */

typedef struct lw_clock {
    void *ctx;
    int64_t (*uptime_ms)(void *ctx); /* monotonic */
    int64_t (*wall_ms)(void *ctx);   /* milliseconds since the epoch */
} lw_clock;

typedef struct lw_executor {
    void *ctx;
    /* Runs fn(arg) on the executor's thread after `delay_ms`. */
    void (*post)(void *ctx, int64_t delay_ms, void (*fn)(void *arg), void *arg);
} lw_executor;

/* ---- configuration ----------------------------------------------------------------------- */

typedef enum lw_mode {
    LW_MODE_HEAP = 0,   /* upload the trimmed, zstd-compressed dump */
    LW_MODE_TRACES = 1, /* analyze on the device, upload only the trace JSON */
} lw_mode;

enum { LW_LOG_DEBUG = 0, LW_LOG_INFO = 1, LW_LOG_WARN = 2, LW_LOG_ERROR = 3 };

typedef struct lw_config {
    size_t struct_size;              /* sizeof(lw_config) */
    /* where and who */
    const char *server_url;          /* base URL; the SDK posts to <server_url>/v1/reports; NULL = spool only */
    const char *ingest_key;          /* lw_ingest_... */
    const char *app;                 /* the app's name on the server */
    const char *app_version;         /* NULL or "" = "unknown" */
    int64_t build;
    const char *runtime_name;        /* meta.runtime: "jvm", "art", ... */
    lw_mode mode;
    const char *spool_dir;           /* required: reports are written here before any upload */
    uint64_t spool_max_bytes;        /* 0 = 512 MiB; the oldest reports are dropped beyond it */
    unsigned spool_max_reports;      /* 0 = 20 */
    /* watching and triggering (0 = the default in brackets) */
    int64_t retained_delay_ms;       /* [5000] from watch to the retained check */
    unsigned gc_rounds;              /* [3] GC + re-check rounds per batch */
    int64_t gc_round_interval_ms;    /* [100] between rounds */
    unsigned threshold_visible;      /* [5] retained objects that trigger a dump while visible */
    unsigned threshold_background;   /* [1] ... while in the background */
    int64_t dump_interval_ms;        /* [60000] between two dumps */
    unsigned max_dumps_per_day;      /* [5] */
    unsigned max_watched;            /* [10000] objects watched at once; more are refused */
    int64_t fork_dump_timeout_ms;    /* [120000] a forked dump that takes longer is killed */
    double sample_rate;              /* [1.0] fraction of devices (by install id) that upload; 0 = 1.0 */
    /* uploading */
    const char *ca_file;             /* PEM bundle to verify the server; NULL = the system's */
    int insecure_skip_verify;        /* 0: TLS is verified (the default; for tests only) */
    const char *analyzer_path;       /* traces mode: the leakscan executable; NULL = "leakscan" on PATH */
    int64_t upload_retry_min_ms;     /* [1000] first backoff, doubled each failure, with jitter */
    int64_t upload_retry_max_ms;     /* [3600000] */
    int (*may_upload)(void *user);   /* optional: 0 = not now (e.g. metered network) */
    void *may_upload_user;
    /* events */
    void (*on_report)(void *user, const char *report_id, const char *spool_path); /* a report entered the spool */
    void *on_report_user;
    void (*log)(void *user, int level, const char *message);   /* optional; the SDK never prints */
    void *log_user;
    /* device facts for meta.device; NULL = read from the system where possible */
    const char *device_manufacturer, *device_model, *os_name, *os_version, *abi;
    /* injectable time and scheduling; NULL = the real clock and an internal thread */
    const lw_clock *clock;
    const lw_executor *executor;
} lw_config;

typedef struct lw_client lw_client;

/* Creates a client. `config` and `runtime` are copied. Adopts the reports of dead processes
 * left in the spool and starts uploading them. On failure *out is NULL and `err` says why. */
LW_SDK_API lw_sdk_status lw_client_new(lw_client **out, const lw_config *config, const lw_runtime *runtime,
                                       char *err, size_t err_cap);

/* Stops the executor and the uploader (waiting up to `timeout_ms` for an upload in flight;
 * unsent reports stay in the spool) and frees the client. NULL is a no-op. */
LW_SDK_API void lw_client_free(lw_client *client, int timeout_ms);

/* Watches `handle` (the adapter's reference to an object that should now be gone), described
 * by `description` ("NewsScreen destroyed"). Writes the watch's random UUID key into
 * `key_out` (37 bytes) when not NULL. The retained check runs `retained_delay_ms` later. */
LW_SDK_API lw_sdk_status lw_watch(lw_client *client, lw_handle handle, const char *description, char key_out[37]);

/* The app came to the foreground (1) or went to the background (0). */
LW_SDK_API void lw_set_visible(lw_client *client, int visible);

/* Dumps now if any object is retained, bypassing the retained-count threshold (not a dump
 * in progress: LW_SDK_ERR_BUSY; not the daily limit: LW_SDK_ERR_LIMIT). With nothing retained
 * it returns LW_SDK_OK and does nothing. `started` (may be NULL) says whether a dump began. */
LW_SDK_API lw_sdk_status lw_dump_now(lw_client *client, int *started);

/* Tries to upload what the spool holds now, waiting up to `timeout_ms`. Returns the number
 * of reports still in the spool, or -1 on error. */
LW_SDK_API int lw_flush(lw_client *client, int timeout_ms);

/* What the trigger is doing: "idle", "waiting_for_retained_count", "waiting_for_dump_interval",
 * "dumping", "analyzing", "uploading". For diagnostics and tests. */
LW_SDK_API const char *lw_client_state(lw_client *client);

/* Counts for diagnostics and tests. */
typedef struct lw_client_stats {
    uint64_t watched;        /* watched now */
    uint64_t retained;       /* retained now */
    uint64_t reclaimed;      /* reclaimed since start */
    uint64_t dumps;          /* heap dumps taken */
    uint64_t reports;        /* reports put in the spool */
    uint64_t uploaded;       /* left the spool after a 2xx */
    uint64_t rejected;       /* left the spool after a permanent 4xx */
    uint64_t dropped;        /* evicted by the spool quota */
    int64_t last_dump_pause_ms; /* how long the app was paused by the last dump */
} lw_client_stats;

LW_SDK_API void lw_client_get_stats(lw_client *client, lw_client_stats *out);

#ifdef __cplusplus
}
#endif
#endif
