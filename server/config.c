/* config.c — defaults, LEAKD_* environment variables and flags, in that order. */
#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { T_STR, T_INT, T_U64 } kind;

typedef struct {
    const char *env;   /* LEAKD_... */
    const char *flag;  /* --... */
    kind k;
    size_t off;
    size_t cap;        /* strings */
    const char *dflt;
    int64_t min, max;
    const char *help;
} setting;

#define S(env, flag, field, dflt, help) {env, flag, T_STR, offsetof(ld_config, field), sizeof(((ld_config *)0)->field), dflt, 0, 0, help}
#define I(env, flag, field, dflt, min, help) {env, flag, T_INT, offsetof(ld_config, field), 0, dflt, min, INT_MAX, help}
/* a whole number with an upper bound: one that large would exhaust something first (memory,
 * processes, an int of milliseconds) */
#define IR(env, flag, field, dflt, min, max, help) {env, flag, T_INT, offsetof(ld_config, field), 0, dflt, min, max, help}
#define B(env, flag, field, dflt, help) {env, flag, T_INT, offsetof(ld_config, field), 0, dflt, 0, 1, help}
#define U(env, flag, field, dflt, help) {env, flag, T_U64, offsetof(ld_config, field), 0, dflt, 0, 0, help}

static const setting settings[] = {
    S("LEAKD_DATABASE_URL", "--database-url", database_url, "postgresql:///leakwatch", "PostgreSQL connection URL"),
    S("LEAKD_LISTEN", "--listen", listen, "127.0.0.1:8080", "HTTP API address host:port"),
    S("LEAKD_METRICS_LISTEN", "--metrics-listen", metrics_listen, "127.0.0.1:9090", "Prometheus /metrics address, or off"),
    S("LEAKD_DATA_DIR", "--data-dir", data_dir, "./leakd-data", "where uploaded dumps are stored"),
    S("LEAKD_MIGRATIONS_DIR", "--migrations-dir", migrations_dir, "", "the numbered SQL files (default: found beside the binary)"),
    IR("LEAKD_WORKERS", "--workers", workers, "0", 0, 1024, "analysis worker processes (0 = number of cores)"),
    U("LEAKD_MAX_UPLOAD_BYTES", "--max-upload-bytes", max_upload_bytes, "1073741824", "largest request body accepted (413 above)"),
    U("LEAKD_MAX_TRACES_BYTES", "--max-traces-bytes", max_traces_bytes, "8388608", "largest traces part"),
    I("LEAKD_QUOTA_REPORTS_PER_MIN", "--quota-reports-per-min", quota_reports_per_min, "60", 0, "uploads per key per minute (0 = no limit)"),
    U("LEAKD_QUOTA_BYTES_PER_DAY", "--quota-bytes-per-day", quota_bytes_per_day, "10737418240", "upload bytes per key per day (0 = no limit)"),
    I("LEAKD_CONNECTION_LIMIT", "--connection-limit", connection_limit, "256", 1, "simultaneous HTTP connections"),
    I("LEAKD_CONNECTIONS_PER_ADDRESS", "--connections-per-address", connections_per_address, "64", 0,
      "simultaneous HTTP connections from one client address (IPv6: one /64); more are answered 429 (0 = no limit)"),
    U("LEAKD_INGEST_MEMORY", "--ingest-memory", ingest_memory, "16777216",
      "traces report bodies read and stored at once, in bytes; more wait their turn (0 = no limit)"),
    U("LEAKD_INGEST_MEMORY_PER_KEY", "--ingest-memory-per-key", ingest_memory_per_key, "4194304",
      "of LEAKD_INGEST_MEMORY, what one key's traces bodies may hold at once; its others wait and let other keys' go on (0 = no limit)"),
    I("LEAKD_INGEST_WAIT", "--ingest-wait", ingest_wait_s, "10", 1,
      "seconds an upload may wait for room in LEAKD_INGEST_MEMORY before it is answered 503 (429 when it waited for its key's share)"),
    I("LEAKD_CONNECTION_TIMEOUT", "--connection-timeout", connection_timeout_s, "30", 1,
      "seconds a connection may stay silent while a request is under way"),
    I("LEAKD_HEADER_TIMEOUT", "--header-timeout", header_timeout_s, "10", 0,
      "seconds a connection has to send a request's headers, from its accept or its previous answer (0 = no limit)"),
    U("LEAKD_MIN_UPLOAD_RATE", "--min-upload-rate", min_upload_rate, "4096", "bytes/s an upload must keep up after its first 10 s"),
    I("LEAKD_HTTP_THREADS", "--http-threads", http_threads, "0", 0, "event threads serving HTTP (0 = number of cores; more if the connection limit needs: 120 each)"),
    I("LEAKD_DB_POOL", "--db-pool", db_pool, "16", 1, "PostgreSQL connections (and threads) for the requests' blocking steps"),
    IR("LEAKD_DB_TIMEOUT", "--db-timeout", db_timeout_s, "30", 0, 86400,
      "seconds leakd serve waits for one answer of PostgreSQL before it treats the database as down (0 = no limit)"),
    I("LEAKD_DB_WRITERS", "--db-writers", db_writers, "2", 1, "connections that store traces reports in batches"),
    I("LEAKD_DIRECT_UPLOADS", "--direct-uploads", direct_uploads, "16", 0, "heap uploads written with direct I/O at a time (0 = none)"),
    I("LEAKD_SHUTDOWN_TIMEOUT", "--shutdown-timeout", shutdown_timeout_s, "8", 0, "seconds to finish on SIGTERM"),
    I("LEAKD_RETENTION_DAYS", "--retention-days", retention_days, "90", 0, "reports older than this are deleted (0 = never)"),
    B("LEAKD_KEEP_BLOBS", "--keep-blobs", keep_blobs, "0", "1 keeps a dump after its analysis (default: deleted)"),
    I("LEAKD_FAILED_BLOB_DAYS", "--failed-blob-days", failed_blob_days, "7", 0, "days a failed report's dump is kept for inspection"),
    U("LEAKD_FAILED_BLOB_MAX_BYTES", "--failed-blob-max-bytes", failed_blob_max_bytes, "10737418240",
      "failed reports' dumps kept at most, the newest first (0 = no cap)"),
    U("LEAKD_ANALYSIS_MEMORY", "--analysis-memory", analysis_memory, "2147483648", "memory budget of one analysis (bytes; 0 = no limit)"),
    I("LEAKD_ANALYSIS_TIMEOUT", "--analysis-timeout", analysis_timeout_s, "600", 1, "wall-clock limit of one analysis (s)"),
    U("LEAKD_MAX_DECOMPRESSED_BYTES", "--max-decompressed-bytes", max_decompressed, "17179869184", "largest decompressed dump"),
    I("LEAKD_MAX_ATTEMPTS", "--max-attempts", max_attempts, "3", 1, "analysis attempts before a report fails"),
    IR("LEAKD_RETRY_DELAY", "--retry-delay", retry_delay_s, "30", 0, 3600,
      "seconds before a crashed or timed-out analysis is tried again, doubled each attempt (0 = at once)"),
    I("LEAKD_LEASE_SECONDS", "--lease-seconds", lease_seconds, "60", 3, "a worker's lease on a report"),
    S("LEAKD_CORS_ORIGINS", "--cors-origins", cors_origins, "", "origins allowed to call the API from a browser (comma-separated, or *)"),
    S("LEAKD_TLS_CERT", "--tls-cert", tls_cert, "", "PEM certificate: serve HTTPS"),
    S("LEAKD_TLS_KEY", "--tls-key", tls_key, "", "PEM private key for --tls-cert"),
    S("LEAKD_LOG_LEVEL", "--log-level", log_level, "info", "debug, info, warn or error"),
    S("LEAKD_LOG_FORMAT", "--log-format", log_format, "text", "text, or json for one JSON object a line"),
};

const char ld_config_help[] =
    "settings (flag, or environment variable; flags win):\n"
    "  --database-url URL          LEAKD_DATABASE_URL           PostgreSQL URL (postgresql:///leakwatch)\n"
    "  --listen HOST:PORT          LEAKD_LISTEN                 API address (127.0.0.1:8080)\n"
    "  --metrics-listen HOST:PORT  LEAKD_METRICS_LISTEN         /metrics address or off (127.0.0.1:9090)\n"
    "  --data-dir DIR              LEAKD_DATA_DIR               uploaded dumps (./leakd-data)\n"
    "  --migrations-dir DIR        LEAKD_MIGRATIONS_DIR         SQL migrations (found beside the binary)\n"
    "  --workers N                 LEAKD_WORKERS                analysis processes (number of cores)\n"
    "  --max-upload-bytes N        LEAKD_MAX_UPLOAD_BYTES       413 above (1 GiB)\n"
    "  --max-traces-bytes N        LEAKD_MAX_TRACES_BYTES       largest traces part (8 MiB)\n"
    "  --quota-reports-per-min N   LEAKD_QUOTA_REPORTS_PER_MIN  per key, 429 above (60; 0 = none)\n"
    "  --quota-bytes-per-day N     LEAKD_QUOTA_BYTES_PER_DAY    per key, 429 above (10 GiB; 0 = none)\n"
    "  --connection-limit N        LEAKD_CONNECTION_LIMIT       simultaneous connections (256)\n"
    "  --connections-per-address N LEAKD_CONNECTIONS_PER_ADDRESS\n"
    "                                                           of them from one address or IPv6 /64\n"
    "                                                           (64; 0 = no limit: behind a proxy)\n"
    "  --ingest-memory N           LEAKD_INGEST_MEMORY          traces bodies handled at once (16M; 0 = no limit)\n"
    "  --ingest-memory-per-key N   LEAKD_INGEST_MEMORY_PER_KEY  of it, one key's at once (4M; 0 = no limit)\n"
    "  --ingest-wait S             LEAKD_INGEST_WAIT            wait for room in it, then 503 or 429 (10)\n"
    "  --connection-timeout S      LEAKD_CONNECTION_TIMEOUT     silence allowed within a request (30)\n"
    "  --header-timeout S          LEAKD_HEADER_TIMEOUT         seconds to send a request's headers (10; 0 = none)\n"
    "  --min-upload-rate N         LEAKD_MIN_UPLOAD_RATE        bytes/s after 10 s (4096)\n"
    "  --http-threads N            LEAKD_HTTP_THREADS           event threads serving HTTP (number of cores;\n"
    "                                                           more if the connection limit needs: 120 each)\n"
    "  --db-pool N                 LEAKD_DB_POOL                database connections for requests (16)\n"
    "  --db-writers N              LEAKD_DB_WRITERS             connections storing traces reports (2)\n"
    "  --db-timeout S              LEAKD_DB_TIMEOUT             wait for one answer of PostgreSQL (30; 0 = none)\n"
    "  --direct-uploads N          LEAKD_DIRECT_UPLOADS         uploads written with direct I/O (16; 0 = none)\n"
    "  --shutdown-timeout S        LEAKD_SHUTDOWN_TIMEOUT       grace period on SIGTERM (8)\n"
    "  --retention-days N          LEAKD_RETENTION_DAYS         delete older reports (90; 0 = never)\n"
    "  --keep-blobs 0|1            LEAKD_KEEP_BLOBS             keep dumps after analysis (0: deleted)\n"
    "  --failed-blob-days N        LEAKD_FAILED_BLOB_DAYS       keep a failed report's dump (7)\n"
    "  --failed-blob-max-bytes N   LEAKD_FAILED_BLOB_MAX_BYTES  and at most this much of them (10 GiB; 0 = no cap)\n"
    "  --analysis-memory N         LEAKD_ANALYSIS_MEMORY        bytes per analysis (2 GiB; 0 = no limit)\n"
    "  --analysis-timeout S        LEAKD_ANALYSIS_TIMEOUT       seconds per analysis (600)\n"
    "  --max-decompressed-bytes N  LEAKD_MAX_DECOMPRESSED_BYTES largest decompressed dump (16 GiB)\n"
    "  --max-attempts N            LEAKD_MAX_ATTEMPTS           analysis attempts (3)\n"
    "  --retry-delay S             LEAKD_RETRY_DELAY            before the next attempt, doubled each time (30)\n"
    "  --lease-seconds S           LEAKD_LEASE_SECONDS          worker lease (60)\n"
    "  --cors-origins LIST         LEAKD_CORS_ORIGINS           browser origins allowed (none)\n"
    "  --tls-cert FILE             LEAKD_TLS_CERT               serve HTTPS with this certificate\n"
    "  --tls-key FILE              LEAKD_TLS_KEY                and this key\n"
    "  --log-level LEVEL           LEAKD_LOG_LEVEL              debug, info, warn, error (info)\n"
    "  --log-format text|json      LEAKD_LOG_FORMAT             plain lines or JSON lines (text)\n";

static int set_value(ld_config *c, const setting *s, const char *v, const char *from, char *err, size_t cap) {
    char *field = (char *)c + s->off;
    if (s->k == T_STR) {
        if (strlen(v) >= s->cap) {
            snprintf(err, cap, "%s: value too long (%zu bytes at most)", from, s->cap - 1);
            return -1;
        }
        strcpy(field, v);
        return 0;
    }
    char *end = (char *)v;
    unsigned long long n = 0;
    errno = 0;
    /* strtoull also takes leading blanks and a sign; a setting is digits only. */
    if (isdigit((unsigned char)v[0])) n = strtoull(v, &end, 10);
    /* sizes may say K, M, G (binary) */
    uint64_t mul = 1;
    if (s->k == T_U64 && *end && !end[1]) {
        if (*end == 'K' || *end == 'k') mul = 1ull << 10;
        else if (*end == 'M' || *end == 'm') mul = 1ull << 20;
        else if (*end == 'G' || *end == 'g') mul = 1ull << 30;
        if (mul > 1) end++;
    }
    if (errno == ERANGE || (mul > 1 && n > UINT64_MAX / mul)) {
        snprintf(err, cap, "%s: %s is too large", from, v);
        return -1;
    }
    if (errno || end == v || *end) {
        if (s->k == T_INT && s->max == 1)
            snprintf(err, cap, "%s: \"%s\" must be 0 or 1", from, v);
        else
            snprintf(err, cap, "%s: \"%s\" is not a %s", from, v,
                     s->k == T_U64 ? "size (a number, optionally with K, M or G)" : "whole number (0 or more)");
        return -1;
    }
    if (s->k == T_INT) {
        if (n > (unsigned long long)s->max || (int64_t)n < s->min) {
            if (s->max == 1)
                snprintf(err, cap, "%s: \"%s\" must be 0 or 1", from, v);
            else if (n > (unsigned long long)s->max)
                snprintf(err, cap, "%s: %s is too large (at most %lld)", from, v, (long long)s->max);
            else
                snprintf(err, cap, "%s: %s is too small (at least %lld)", from, v, (long long)s->min);
            return -1;
        }
        *(int *)field = (int)n;
    } else {
        *(uint64_t *)field = (uint64_t)n * mul;
    }
    return 0;
}

/* "host:port" with a port of 1-65535 (getaddrinfo would take 99999 and bind 99999 - 65536),
 * or "off" where `off_ok`. The host itself is resolved when leakd binds. */
static int check_listen(const char *name, const char *v, int off_ok, char *err, size_t cap) {
    if (off_ok && strcmp(v, "off") == 0) return 0;
    const char *colon = strrchr(v, ':');
    const char *port = colon ? colon + 1 : "";
    size_t digits = strspn(port, "0123456789");
    long p = digits && digits <= 5 && !port[digits] ? strtol(port, NULL, 10) : -1;
    if (!colon || colon == v || p < 1 || p > 65535) {
        snprintf(err, cap, "%s: \"%s\" is not host:port with a port of 1-65535%s", name, v,
                 off_ok ? " (or off)" : "");
        return -1;
    }
    return 0;
}

/* Lower-case canonical names, so that WARN or warning do not silently mean info. */
static int check_log_level(char *level, size_t cap_level, char *err, size_t cap) {
    static const char *const names[] = {"debug", "info", "warn", "error"};
    char lower[16];
    size_t i;
    for (i = 0; level[i] && i + 1 < sizeof lower; i++) lower[i] = (char)tolower((unsigned char)level[i]);
    lower[i] = 0;
    int cut = level[i] != 0; /* longer than any name */
    if (strcmp(lower, "warning") == 0) lower[4] = 0;
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!cut && strcmp(lower, names[i]) == 0) {
            snprintf(level, cap_level, "%s", names[i]);
            return 0;
        }
    snprintf(err, cap, "LEAKD_LOG_LEVEL must be debug, info, warn or error, not \"%s\"", level);
    return -1;
}

static int check_readable(const char *name, const char *path, char *err, size_t cap) {
    if (!path[0] || access(path, R_OK) == 0) return 0;
    snprintf(err, cap, "%s: %s: cannot read it: %s", name, path, strerror(errno));
    return -1;
}

int ld_config_load(ld_config *c, int *argc, char **argv, char *err, size_t cap) {
    memset(c, 0, sizeof *c);
    size_t n = sizeof settings / sizeof settings[0];
    for (size_t i = 0; i < n; i++)
        if (set_value(c, &settings[i], settings[i].dflt, "default", err, cap)) return -1;
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(settings[i].env);
        if (v && set_value(c, &settings[i], v, settings[i].env, err, cap)) return -1;
    }
    int out = 1;
    for (int a = 1; a < *argc; a++) {
        const char *arg = argv[a];
        const setting *hit = NULL;
        const char *value = NULL;
        for (size_t i = 0; i < n && !hit; i++) {
            size_t fl = strlen(settings[i].flag);
            if (strncmp(arg, settings[i].flag, fl) == 0 && (arg[fl] == 0 || arg[fl] == '=')) {
                hit = &settings[i];
                value = arg[fl] == '=' ? arg + fl + 1 : NULL;
            }
        }
        if (!hit) {
            argv[out++] = argv[a];
            continue;
        }
        if (!value) {
            if (a + 1 >= *argc) {
                snprintf(err, cap, "%s needs a value", hit->flag);
                return -1;
            }
            value = argv[++a];
        }
        if (set_value(c, hit, value, hit->flag, err, cap)) return -1;
    }
    *argc = out;
    argv[out] = NULL;
    if (c->http_threads == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        c->http_threads = cpus > 0 ? (int)(cpus < 64 ? cpus : 64) : 1;
    }
    if (c->workers == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        c->workers = cpus > 0 ? (int)cpus : 1;
    }
    if (!c->migrations_dir[0]) {
        /* Beside the binary in a build or install tree, else the packaged location. */
        char exe[1024];
        ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
        const char *candidates[] = {"/../migrations", "/../../migrations", "/../share/leakd/migrations"};
        if (l > 0) {
            exe[l] = 0;
            char *slash = strrchr(exe, '/');
            if (slash) *slash = 0;
            for (size_t i = 0; i < 3; i++) {
                char path[2048];
                snprintf(path, sizeof path, "%s%s/0001_init.sql", exe, candidates[i]);
                if (access(path, R_OK) == 0) {
                    snprintf(c->migrations_dir, sizeof c->migrations_dir, "%s%s", exe, candidates[i]);
                    break;
                }
            }
        }
        if (!c->migrations_dir[0]) snprintf(c->migrations_dir, sizeof c->migrations_dir, "/usr/share/leakd/migrations");
    }
    if (strcmp(c->log_format, "text") != 0 && strcmp(c->log_format, "json") != 0) {
        snprintf(err, cap, "LEAKD_LOG_FORMAT must be text or json, not \"%s\"", c->log_format);
        return -1;
    }
    if (!!c->tls_cert[0] != !!c->tls_key[0]) {
        snprintf(err, cap, "LEAKD_TLS_CERT and LEAKD_TLS_KEY go together");
        return -1;
    }
    if (!c->database_url[0]) {
        snprintf(err, cap, "LEAKD_DATABASE_URL is empty: give a PostgreSQL URL, or unset it for the default "
                           "postgresql:///leakwatch");
        return -1;
    }
    if (check_listen("LEAKD_LISTEN", c->listen, 0, err, cap) ||
        check_listen("LEAKD_METRICS_LISTEN", c->metrics_listen, 1, err, cap) ||
        check_log_level(c->log_level, sizeof c->log_level, err, cap) ||
        check_readable("LEAKD_TLS_CERT", c->tls_cert, err, cap) || check_readable("LEAKD_TLS_KEY", c->tls_key, err, cap))
        return -1;
    return 0;
}

void ld_config_export(const ld_config *c) {
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        const setting *s = &settings[i];
        const char *field = (const char *)c + s->off;
        char buf[64];
        if (s->k == T_STR) {
            setenv(s->env, field, 1);
            continue;
        }
        if (s->k == T_INT) snprintf(buf, sizeof buf, "%d", *(const int *)field);
        else snprintf(buf, sizeof buf, "%llu", (unsigned long long)*(const uint64_t *)field);
        setenv(s->env, buf, 1);
    }
}
