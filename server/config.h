/* config.h — leakd's settings: defaults, then LEAKD_* environment variables, then flags.
 * docs/configuration.md lists every one. */
#ifndef LD_CONFIG_H
#define LD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct ld_config {
    char database_url[1024];      /* LEAKD_DATABASE_URL */
    char listen[256];             /* LEAKD_LISTEN, host:port, default 127.0.0.1:8080 */
    char metrics_listen[256];     /* LEAKD_METRICS_LISTEN, default 127.0.0.1:9090; "off" disables */
    char data_dir[1024];          /* LEAKD_DATA_DIR, default ./leakd-data */
    char migrations_dir[1024];    /* LEAKD_MIGRATIONS_DIR, default: beside the binary or /usr/share/leakd/migrations */
    int workers;                  /* LEAKD_WORKERS, default: number of cores */
    uint64_t max_upload_bytes;    /* LEAKD_MAX_UPLOAD_BYTES, default 1 GiB */
    uint64_t max_traces_bytes;    /* LEAKD_MAX_TRACES_BYTES, default 8 MiB */
    int quota_reports_per_min;    /* LEAKD_QUOTA_REPORTS_PER_MIN, per key, default 60; 0 = none */
    uint64_t quota_bytes_per_day; /* LEAKD_QUOTA_BYTES_PER_DAY, per key, default 10 GiB; 0 = none */
    int connection_limit;         /* LEAKD_CONNECTION_LIMIT, default 256 */
    int connections_per_address;  /* LEAKD_CONNECTIONS_PER_ADDRESS: of them from one IPv4 address or IPv6 /64, default 64; 0 = none */
    uint64_t ingest_memory;       /* LEAKD_INGEST_MEMORY: traces bodies held at once, default 16 MiB (0: no limit) */
    uint64_t ingest_memory_per_key; /* LEAKD_INGEST_MEMORY_PER_KEY: of it, one key's bodies at once, default 4 MiB (0: no limit) */
    int ingest_wait_s;            /* LEAKD_INGEST_WAIT: seconds an upload may wait for room in it (then 503), default 10 */
    int connection_timeout_s;     /* LEAKD_CONNECTION_TIMEOUT, idle seconds, default 30 */
    int header_timeout_s;         /* LEAKD_HEADER_TIMEOUT: seconds to get a request's headers in, default 10; 0 = none */
    uint64_t min_upload_rate;     /* LEAKD_MIN_UPLOAD_RATE, bytes/s after the first 10 s, default 4096 */
    int http_threads;             /* LEAKD_HTTP_THREADS, libmicrohttpd's event threads, default: cores */
    int db_pool;                  /* LEAKD_DB_POOL, connections (and task threads) for requests, default 16 */
    int db_timeout_s;             /* LEAKD_DB_TIMEOUT: seconds to wait for one answer of PostgreSQL, default 30; 0 = none */
    int db_writers;               /* LEAKD_DB_WRITERS, report writer threads (group commit), default 2 */
    int direct_uploads;           /* LEAKD_DIRECT_UPLOADS, heap uploads written with O_DIRECT at a time, default 16 */
    int shutdown_timeout_s;       /* LEAKD_SHUTDOWN_TIMEOUT, default 8 */
    int retention_days;           /* LEAKD_RETENTION_DAYS, default 90; 0 = keep forever */
    int keep_blobs;               /* LEAKD_KEEP_BLOBS: 1 keeps a dump after its analysis; default 0 */
    int failed_blob_days;         /* LEAKD_FAILED_BLOB_DAYS: a failed report's dump is kept this long, default 7 */
    uint64_t failed_blob_max_bytes; /* LEAKD_FAILED_BLOB_MAX_BYTES: and the newest up to this much, default 10 GiB; 0 = no cap */
    uint64_t analysis_memory;     /* LEAKD_ANALYSIS_MEMORY, bytes, default 2 GiB */
    int analysis_timeout_s;       /* LEAKD_ANALYSIS_TIMEOUT, default 600 */
    uint64_t max_decompressed;    /* LEAKD_MAX_DECOMPRESSED_BYTES, default 16 GiB */
    int max_attempts;             /* LEAKD_MAX_ATTEMPTS, default 3 */
    int retry_delay_s;            /* LEAKD_RETRY_DELAY: a failed attempt waits this, doubled each time, default 30 */
    int lease_seconds;            /* LEAKD_LEASE_SECONDS, default 60 (renewed every third of it) */
    char cors_origins[1024];      /* LEAKD_CORS_ORIGINS, comma-separated, or "*"; default none */
    char tls_cert[1024];          /* LEAKD_TLS_CERT */
    char tls_key[1024];           /* LEAKD_TLS_KEY */
    char log_level[16];           /* LEAKD_LOG_LEVEL: debug, info, warn, error; default info */
    char log_format[16];          /* LEAKD_LOG_FORMAT: text or json (one JSON object a line); default text */
} ld_config;

/* Fills `c` from defaults and the environment, then consumes the flags it knows from
 * argv (moving the rest to the front; *argc updated). Returns 0, or -1 with a message. */
int ld_config_load(ld_config *c, int *argc, char **argv, char *err, size_t cap);

/* Exports every setting as LEAKD_* so child processes (workers) see the same config. */
void ld_config_export(const ld_config *c);

/* The --help text for the settings. */
extern const char ld_config_help[];

#endif
