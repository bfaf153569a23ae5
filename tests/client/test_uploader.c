/* test_uploader.c — the uploader with REAL libcurl against a REAL leakd and PostgreSQL:
 * a spooled heap report (a real trimmed dump) is delivered and its meta.dropped stored; a
 * repeat answers 200; refusals judged from the headers (401 wrong key, 413 too large) cost no
 * body bytes thanks to Expect: 100-continue; a spent quota gives RETRY with Retry-After; no
 * server gives RETRY; a traces report is delivered and grouped. A small fake server checks the
 * request's headers, 503 + an HTTP-date Retry-After and a 422; a silent server checks abort.
 *
 * PostgreSQL: LEAKD_TEST_DATABASE_URL (tests/server/with_pg.sh sets it), else a throwaway
 * cluster from tests/server/pg_cluster.sh; without PostgreSQL binaries those tests are skipped.
 * Overrides: LEAKD_BIN, LEAKSCAN_BIN, DUMP_DIR, PG_CLUSTER_SH, LWC_TEST_VERBOSE. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "report.h"
#include "spool.h"
#include "uploader.h"

#ifndef LWC_TEST_BUILD_DIR
#define LWC_TEST_BUILD_DIR "build"
#endif
#ifndef LWC_TEST_SOURCE_DIR
#define LWC_TEST_SOURCE_DIR "."
#endif

#define BIG_BYTES (50ull << 20)

typedef struct {
    pid_t pid;
    int port;
    char log[300];
} server;

typedef struct {
    int pg_ok;
    char pg_why[1024];
    char tmp[64];
    char pg_dir[64]; /* our own cluster, when we started one */
    char base_url[300];
    char db_url[300];
    char db_name[64];
    char ingest[160], read[160];
    char leakd[512], leakscan[512], dump_dir[512], pg_cluster[512], psql[512];
    server main, small, quota;
    char heap[300], traces[300], big[300];
} fixture;

/* ---- helpers ---------------------------------------------------------------------------------- */

static int verbose(void) {
    return getenv("LWC_TEST_VERBOSE") != NULL;
}

static void test_log(void *user, int level, const char *msg) {
    (void)user;
    if (verbose()) fprintf(stderr, "  [log %d] %s\n", level, msg);
}

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && v[0] ? v : dflt;
}

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Runs argv with extra "K=V" environment entries; stdout+stderr into out[cap]. Exit code, or -1. */
static int run(char *const argv[], char *const env[], char *out, size_t cap) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return -1; /* daemons started by argv must not inherit it */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        dup2(p[1], 2);
        for (size_t i = 0; env && env[i]; i++) putenv(env[i]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0;
    for (;;) {
        char buf[4096];
        ssize_t r = read(p[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        size_t take = out && len + 1 < cap ? ((size_t)r < cap - 1 - len ? (size_t)r : cap - 1 - len) : 0;
        if (take) memcpy(out + len, buf, take), len += take;
    }
    if (out && cap) out[len] = 0;
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (verbose() && out) fprintf(stderr, "  $ %s %s -> %d\n%s", argv[0], argv[1] ? argv[1] : "", WEXITSTATUS(st), out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static size_t collect(char *data, size_t size, size_t n, void *arg) {
    char *buf = arg;
    size_t len = strlen(buf), add = size * n;
    size_t take = len + add < 8191 ? add : 8191 - len;
    memcpy(buf + len, data, take);
    buf[len + take] = 0;
    return size * n;
}

/* GET url (with a bearer key when not NULL): the status, body into body[8192]. */
static long http_get(const char *url, const char *key, char body[8192]) {
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char auth[256];
    long status = 0;
    body[0] = 0;
    if (key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        h = curl_slist_append(NULL, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

static void url_with_db(const char *url, const char *db, char *out, size_t cap) {
    const char *scheme = strstr(url, "://");
    const char *slash = strchr(scheme ? scheme + 3 : url, '/');
    const char *q = strchr(url, '?');
    int host_len = slash ? (int)(slash - url) : (int)strlen(url);
    snprintf(out, cap, "%.*s/%s%s", host_len, url, db, q ? q : "");
}

static int psql(fixture *f, const char *url, const char *sql, char *out, size_t cap) {
    char u[320], s[1024];
    snprintf(u, sizeof u, "%s", url);
    snprintf(s, sizeof s, "%s", sql);
    char *argv[] = {f->psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", u, "-c", s, NULL};
    int rc = run(argv, NULL, out, cap);
    if (out) {
        size_t l = strlen(out);
        while (l && (out[l - 1] == '\n' || out[l - 1] == ' ')) out[--l] = 0;
    }
    return rc;
}

static int leakd_cli(fixture *f, char *const args[], char *out, size_t cap) {
    char *argv[8] = {f->leakd};
    for (int i = 0; args[i] && i < 6; i++) argv[i + 1] = args[i];
    char env_db[400];
    snprintf(env_db, sizeof env_db, "LEAKD_DATABASE_URL=%s", f->db_url);
    char *env[] = {env_db, NULL};
    return run(argv, env, out, cap);
}

static void take_key(const char *out, const char *prefix, char *key, size_t cap) {
    const char *p = strstr(out, prefix);
    size_t n = 0;
    key[0] = 0;
    if (!p) return;
    while (n + 1 < cap && p[n] && (p[n] == '_' || (p[n] >= '0' && p[n] <= '9') || (p[n] >= 'a' && p[n] <= 'z') ||
                                   (p[n] >= 'A' && p[n] <= 'Z'))) {
        key[n] = p[n];
        n++;
    }
    key[n] = 0;
}

/* Starts `leakd serve` with extra settings ("LEAKD_...=V"), waits for /readyz. 0 or -1. */
static int server_start(fixture *f, server *s, const char *name, char *const extra[]) {
    char data[300], listen[64], metrics[64], url[128], body[8192];
    s->port = free_port();
    int mport = free_port();
    snprintf(data, sizeof data, "%s/data-%s", f->tmp, name);
    snprintf(s->log, sizeof s->log, "%s/leakd-%s.log", f->tmp, name);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", s->port);
    snprintf(metrics, sizeof metrics, "127.0.0.1:%d", mport);
    s->pid = fork();
    if (s->pid < 0) return -1;
    if (s->pid == 0) {
        setsid();
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        setenv("LEAKD_DATABASE_URL", f->db_url, 1);
        setenv("LEAKD_LISTEN", listen, 1);
        setenv("LEAKD_METRICS_LISTEN", metrics, 1);
        setenv("LEAKD_DATA_DIR", data, 1);
        setenv("LEAKD_WORKERS", "1", 1);
        setenv("LEAKD_LOG_LEVEL", "info", 1);
        for (size_t i = 0; extra && extra[i]; i++) putenv(extra[i]);
        execl(f->leakd, "leakd", "serve", (char *)NULL);
        _exit(127);
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/readyz", s->port);
    int64_t deadline = mono_ms() + 20000;
    while (mono_ms() < deadline) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            fprintf(stderr, "leakd serve (%s) exited; see %s\n", name, s->log);
            s->pid = 0;
            return -1;
        }
        if (http_get(url, NULL, body) == 200) return 0;
        usleep(50000);
    }
    fprintf(stderr, "leakd serve (%s) not ready after 20 s; see %s\n", name, s->log);
    return -1;
}

/* SIGTERM, wait up to 10 s, then SIGKILL its process group (the group of the leakd we started). */
static void server_stop(server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    int64_t deadline = mono_ms() + 10000;
    int st;
    while (mono_ms() < deadline && waitpid(s->pid, &st, WNOHANG) == 0) usleep(20000);
    kill(-s->pid, SIGKILL); /* workers or analysis children left behind, if any */
    waitpid(s->pid, &st, WNOHANG);
    s->pid = 0;
}

static void write_meta(const char *path, const char *id, const char *mode, const char *install_id) {
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp,
            "{\"report_id\":\"%s\",\"app\":\"demo\",\"app_version\":\"1.0\",\"build\":7,\"sdk_version\":\"0.1.0\","
            "\"runtime\":\"jvm\",\"mode\":\"%s\",\"created_at\":\"2024-06-01T12:00:00Z\","
            "\"device\":{\"install_id\":\"%s\",\"manufacturer\":\"test\",\"model\":\"ci\",\"os\":\"linux\","
            "\"os_version\":\"6\",\"abi\":\"x86_64\"},\"heap\":{\"used_bytes\":1,\"max_bytes\":2},"
            "\"trigger\":\"manual\",\"retained\":[]}",
            id, mode, install_id ? install_id : "00000000-0000-4000-8000-000000000000");
    fclose(fp);
}

static void new_id(char out[37]) {
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, b, sizeof b), (ssize_t)sizeof b);
    close(fd);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static lwc_uploader *uploader(const char *url, const char *key) {
    lwc_uploader *u = NULL;
    char err[512] = "";
    lwc_uploader_config cfg = {0};
    cfg.server_url = url;
    cfg.ingest_key = key;
    cfg.log = test_log;
    lw_sdk_status rc = lwc_uploader_new(&u, &cfg, err, sizeof err);
    if (rc != LW_SDK_OK) fail_msg("lwc_uploader_new: %s", err);
    return u;
}

static void base_url(const server *s, char *out, size_t cap) {
    snprintf(out, cap, "http://127.0.0.1:%d/", s->port); /* the trailing slash is dropped */
}

#define NEED_PG(f)                                                          \
    do {                                                                    \
        if (!(f)->pg_ok) {                                                  \
            fprintf(stderr, "SKIPPED: %s\n", (f)->pg_why);                  \
            skip();                                                         \
        }                                                                   \
    } while (0)

/* ---- setup and teardown ------------------------------------------------------------------------ */

static int find_pg_bindir(char *out, size_t cap) {
    const char *env = getenv("PG_BINDIR");
    char p[600];
    if (env) {
        snprintf(p, sizeof p, "%s/initdb", env);
        if (access(p, X_OK) == 0) return snprintf(out, cap, "%s", env), 0;
    }
    glob_t g;
    int rc = -1;
    if (glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) == 0) {
        size_t l = strlen(g.gl_pathv[g.gl_pathc - 1]);
        snprintf(out, cap, "%.*s", (int)(l - strlen("/initdb")), g.gl_pathv[g.gl_pathc - 1]);
        rc = 0;
    }
    globfree(&g);
    return rc;
}

static int pg_setup(fixture *f) {
    char out[8192], bindir[400] = "";
    int have_bindir = find_pg_bindir(bindir, sizeof bindir) == 0;
    snprintf(f->psql, sizeof f->psql, "%s/psql", bindir);
    if (!have_bindir || access(f->psql, X_OK) != 0) snprintf(f->psql, sizeof f->psql, "/usr/bin/psql");
    if (access(f->leakd, X_OK) != 0 || access(f->leakscan, X_OK) != 0) {
        snprintf(f->pg_why, sizeof f->pg_why, "leakd or leakscan is not built (%s): run cmake --build build", f->leakd);
        return -1;
    }
    if (access(f->psql, X_OK) != 0) {
        snprintf(f->pg_why, sizeof f->pg_why, "PostgreSQL client binaries (psql) not found: install postgresql or set PG_BINDIR");
        return -1;
    }
    const char *url = getenv("LEAKD_TEST_DATABASE_URL");
    if (url && url[0]) {
        snprintf(f->base_url, sizeof f->base_url, "%s", url);
    } else {
        if (!have_bindir) {
            snprintf(f->pg_why, sizeof f->pg_why,
                     "PostgreSQL server binaries (initdb) not found and LEAKD_TEST_DATABASE_URL unset");
            return -1;
        }
        snprintf(f->pg_dir, sizeof f->pg_dir, "/tmp/lwc-pg.XXXXXX");
        if (!mkdtemp(f->pg_dir)) return snprintf(f->pg_why, sizeof f->pg_why, "mkdtemp failed"), -1;
        char *argv[] = {f->pg_cluster, "start", f->pg_dir, NULL};
        if (run(argv, NULL, out, sizeof out) != 0) {
            snprintf(f->pg_why, sizeof f->pg_why, "pg_cluster.sh start failed: %.200s", out);
            rmdir(f->pg_dir);
            f->pg_dir[0] = 0;
            return -1;
        }
        char *u = strstr(out, "LEAKD_DATABASE_URL=");
        if (!u) return snprintf(f->pg_why, sizeof f->pg_why, "pg_cluster.sh printed no URL"), -1;
        u += strlen("LEAKD_DATABASE_URL=");
        u[strcspn(u, "\n")] = 0;
        snprintf(f->base_url, sizeof f->base_url, "%s", u);
    }
    char admin[320], sql[128];
    snprintf(f->db_name, sizeof f->db_name, "lwc_up_%d_%lld", (int)getpid(), (long long)time(NULL) % 100000);
    url_with_db(f->base_url, "postgres", admin, sizeof admin);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", f->db_name);
    if (psql(f, admin, sql, out, sizeof out) != 0)
        return snprintf(f->pg_why, sizeof f->pg_why, "CREATE DATABASE failed: %.200s", out), -1;
    url_with_db(f->base_url, f->db_name, f->db_url, sizeof f->db_url);
    char *mig[] = {"migrate", NULL}, *app[] = {"app", "create", "demo", NULL};
    if (leakd_cli(f, mig, out, sizeof out) != 0)
        return snprintf(f->pg_why, sizeof f->pg_why, "leakd migrate failed: %.200s", out), -1;
    if (leakd_cli(f, app, out, sizeof out) != 0)
        return snprintf(f->pg_why, sizeof f->pg_why, "leakd app create failed: %.200s", out), -1;
    take_key(out, "lw_ingest_", f->ingest, sizeof f->ingest);
    take_key(out, "lw_read_", f->read, sizeof f->read);
    if (!f->ingest[0] || !f->read[0]) return snprintf(f->pg_why, sizeof f->pg_why, "no keys in: %.200s", out), -1;

    /* The inputs: a real trimmed dump and its trace JSON. */
    char dump[600];
    snprintf(dump, sizeof dump, "%s/listener_list.hprof", f->dump_dir);
    if (access(dump, R_OK) != 0)
        return snprintf(f->pg_why, sizeof f->pg_why, "%s is missing (run ctest -R java_dump first)", dump), -1;
    char *strip[] = {f->leakscan, "strip", dump, f->heap, NULL};
    if (run(strip, NULL, out, sizeof out) != 0)
        return snprintf(f->pg_why, sizeof f->pg_why, "leakscan strip failed: %.200s", out), -1;
    char *analyze[] = {f->leakscan, "analyze", dump, "--json", NULL};
    static char json[1 << 20];
    int rc = run(analyze, NULL, json, sizeof json);
    if (rc != 1) return snprintf(f->pg_why, sizeof f->pg_why, "leakscan analyze gave %d (want 1: leaks)", rc), -1;
    FILE *fp = fopen(f->traces, "w");
    if (!fp || fputs(json, fp) < 0 || fclose(fp) != 0) return snprintf(f->pg_why, sizeof f->pg_why, "cannot write traces"), -1;

    char quota[] = "LEAKD_QUOTA_REPORTS_PER_MIN=1", small[] = "LEAKD_MAX_UPLOAD_BYTES=1000000";
    char *quota_env[] = {quota, NULL}, *small_env[] = {small, NULL};
    if (server_start(f, &f->main, "main", NULL) != 0 || server_start(f, &f->small, "small", small_env) != 0 ||
        server_start(f, &f->quota, "quota", quota_env) != 0)
        return snprintf(f->pg_why, sizeof f->pg_why, "leakd serve did not start (logs in %s)", f->tmp), -1;
    return 0;
}

static int group_setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(f->tmp, sizeof f->tmp, "/tmp/lwc-up.XXXXXX");
    if (!mkdtemp(f->tmp)) return -1;
    snprintf(f->leakd, sizeof f->leakd, "%s", env_or("LEAKD_BIN", LWC_TEST_BUILD_DIR "/server/leakd"));
    snprintf(f->leakscan, sizeof f->leakscan, "%s", env_or("LEAKSCAN_BIN", LWC_TEST_BUILD_DIR "/shared/leakscan"));
    snprintf(f->dump_dir, sizeof f->dump_dir, "%s", env_or("DUMP_DIR", LWC_TEST_BUILD_DIR "/tests/dumps"));
    snprintf(f->pg_cluster, sizeof f->pg_cluster, "%s",
             env_or("PG_CLUSTER_SH", LWC_TEST_SOURCE_DIR "/tests/server/pg_cluster.sh"));
    snprintf(f->heap, sizeof f->heap, "%s/listener_list.hprof.zst", f->tmp);
    snprintf(f->traces, sizeof f->traces, "%s/listener_list.json", f->tmp);
    snprintf(f->big, sizeof f->big, "%s/big.bin", f->tmp);
    /* 50 MB that the refused uploads must not send (sparse: costs no disk). */
    int fd = open(f->big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)BIG_BYTES) != 0) return -1;
    close(fd);
    f->pg_ok = pg_setup(f) == 0;
    if (!f->pg_ok) fprintf(stderr, "NOTE: the leakd tests will be skipped: %s\n", f->pg_why);
    *state = f;
    return 0;
}

static int group_teardown(void **state) {
    fixture *f = *state;
    char out[4096], admin[320], sql[160];
    server_stop(&f->main);
    server_stop(&f->small);
    server_stop(&f->quota);
    if (f->pg_dir[0]) {
        char *argv[] = {f->pg_cluster, "stop", f->pg_dir, NULL};
        run(argv, NULL, out, sizeof out);
    } else if (f->db_name[0] && f->base_url[0]) {
        url_with_db(f->base_url, "postgres", admin, sizeof admin);
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", f->db_name);
        psql(f, admin, sql, out, sizeof out);
    }
    if (!getenv("LWC_TEST_KEEP")) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->tmp);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", f->tmp);
    }
    curl_global_cleanup();
    free(f);
    return 0;
}

/* ---- pure ---------------------------------------------------------------------------------------- */

/* leakd refuses a meta without app_version (400): an app that set none says "unknown". */
static void test_meta_always_has_an_app_version(void **state) {
    (void)state;
    static const struct { const char *set, *sent; } cases[] = {{NULL, "unknown"}, {"", "unknown"}, {"2.3.0", "2.3.0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lw_config cfg = {.struct_size = sizeof cfg, .app = "demo", .app_version = cases[i].set, .build = 7};
        lwc_meta_in in = {.report_id = "2b1f5c0e-8d4a-4f3b-9a6e-1c2d3e4f5a6b", .install_id = "i", .trigger = "manual"};
        char *meta = lwc_meta_json(&cfg, &in);
        assert_non_null(meta);
        json_t *j = json_loads(meta, 0, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "app_version")), cases[i].sent);
        json_decref(j);
        free(meta);
    }
}

static void test_backoff(void **state) {
    (void)state;
    /* Exponential ceiling, floor at min, cap at max. */
    assert_int_equal(lwc_backoff_ms(1, 1000, 3600000, 0, 0), 1000);
    assert_int_equal(lwc_backoff_ms(1, 1000, 3600000, 0, UINT64_MAX), 1000 + UINT64_MAX % 1001);
    for (uint64_t r = 0; r < 5000; r += 7) {
        int64_t d1 = lwc_backoff_ms(1, 1000, 3600000, 0, r * 2654435761u);
        int64_t d3 = lwc_backoff_ms(3, 1000, 3600000, 0, r * 2654435761u);
        int64_t d30 = lwc_backoff_ms(30, 1000, 3600000, 0, r * 2654435761u);
        assert_true(d1 >= 1000 && d1 <= 2000);
        assert_true(d3 >= 1000 && d3 <= 8000);
        assert_true(d30 >= 1000 && d30 <= 3600000);
    }
    assert_int_equal(lwc_backoff_ms(100, 1000, 3600000, 0, 3600000 - 1000), 3600000); /* no overflow */
    /* Retry-After wins when longer; capped at 24 h. */
    assert_int_equal(lwc_backoff_ms(1, 1000, 5000, 120000, 0), 120000);
    assert_int_equal(lwc_backoff_ms(1, 1000, 5000, 10, 0), 1000);
    assert_int_equal(lwc_backoff_ms(1, 1000, 5000, INT64_MAX, 0), 24LL * 3600 * 1000);
    assert_int_equal(lwc_backoff_ms(0, 0, 0, 0, 12345), 1000);
}

static void test_new_rejects_bad_config(void **state) {
    (void)state;
    lwc_uploader *u = (lwc_uploader *)1;
    char err[256];
    lwc_uploader_config cfg = {0};
    assert_int_equal(lwc_uploader_new(&u, &cfg, err, sizeof err), LW_SDK_ERR_USAGE);
    assert_null(u);
    cfg.server_url = "ftp://example.com";
    cfg.ingest_key = "lw_ingest_1_x";
    assert_int_equal(lwc_uploader_new(&u, &cfg, err, sizeof err), LW_SDK_ERR_USAGE);
    assert_non_null(strstr(err, "http"));
    cfg.server_url = "http://example.com";
    cfg.ingest_key = "lw_ingest_1_x\r\nX-Evil: 1";
    assert_int_equal(lwc_uploader_new(&u, &cfg, err, sizeof err), LW_SDK_ERR_USAGE);
    lwc_uploader_free(NULL);
}

/* ---- against a real leakd --------------------------------------------------------------------- */

/* A spooled heap report: the spool evicts one, so the next carries meta.dropped = 1; delivered
 * (202), stored with that meta; sent again: 200, still one report. */
static void test_heap_report_done_and_repeat(void **state) {
    fixture *f = *state;
    NEED_PG(f);
    char dir[128], err[512] = "", path[LWC_SPOOL_PATH_MAX], meta[LWC_SPOOL_PATH_MAX], id0[37], id1[37], inst[37];
    snprintf(dir, sizeof dir, "%s/spool-heap", f->tmp);
    lwc_spool *s = NULL;
    assert_int_equal(lwc_spool_open(&s, dir, 0, 1, test_log, NULL, err, sizeof err), LW_SDK_OK);
    lwc_spool_install_id(s, inst);
    new_id(id0);
    new_id(id1);
    /* id0: any data; it is evicted by id1 (max_reports = 1). */
    assert_int_equal(lwc_spool_work_path(s, "old.zst", path, sizeof path, err, sizeof err), LW_SDK_OK);
    FILE *fp = fopen(path, "w");
    fputs("never sent", fp);
    fclose(fp);
    assert_int_equal(lwc_spool_add(s, id0, "{\"mode\":\"heap\"}", path, "heap", err, sizeof err), LW_SDK_OK);
    /* id1: the real trimmed dump. */
    char cmd[1400];
    assert_int_equal(lwc_spool_work_path(s, "dump.hprof.zst", path, sizeof path, err, sizeof err), LW_SDK_OK);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", f->heap, path);
    assert_int_equal(system(cmd), 0);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id1);
    write_meta(meta, id1, "heap", inst);
    char meta_text[4096];
    fp = fopen(meta, "r");
    meta_text[fread(meta_text, 1, sizeof meta_text - 1, fp)] = 0;
    fclose(fp);
    assert_int_equal(lwc_spool_add(s, id1, meta_text, path, "heap", err, sizeof err), LW_SDK_OK);

    lwc_spooled r;
    int found = 0;
    assert_int_equal(lwc_spool_next(s, 0, &r, &found, NULL, err, sizeof err), LW_SDK_OK);
    assert_true(found);
    assert_string_equal(r.id, id1);
    int64_t dropped = -1;
    assert_int_equal(lwc_spool_claim_dropped(s, r.id, &dropped, err, sizeof err), LW_SDK_OK);
    assert_int_equal(dropped, 1);

    char base[64];
    base_url(&f->main, base, sizeof base);
    lwc_uploader *u = uploader(base, f->ingest);
    lwc_upload_result res;
    assert_int_equal(lwc_upload(u, r.meta_path, r.data_path, r.kind, dropped, &res), LW_SDK_OK);
    if (res.kind != LWC_UPLOAD_DONE) fail_msg("%s", res.message);
    assert_int_equal(res.http_status, 202);
    struct stat st;
    assert_int_equal(stat(r.data_path, &st), 0);
    assert_true(res.bytes_sent > (uint64_t)st.st_size);

    /* The same report again (a retry after a lost answer): 200, the same report. */
    assert_int_equal(lwc_upload(u, r.meta_path, r.data_path, r.kind, dropped, &res), LW_SDK_OK);
    assert_int_equal(res.kind, LWC_UPLOAD_DONE);
    assert_int_equal(res.http_status, 200);
    assert_int_equal(lwc_spool_remove(s, r.id, LWC_SPOOL_DELIVERED, err, sizeof err), LW_SDK_OK);

    char url[256], body[8192];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/reports/%s", f->main.port, id1);
    assert_int_equal(http_get(url, f->read, body), 200);
    assert_true(strstr(body, "\"status\":\"queued\"") || strstr(body, "\"status\":\"analyzing\"") ||
                strstr(body, "\"status\":\"done\""));
    assert_non_null(strstr(body, id1));

    char sql[256], out[512];
    snprintf(sql, sizeof sql,
             "SELECT meta->>'dropped', meta->'device'->>'install_id', count(*) OVER () FROM reports WHERE id = '%s'", id1);
    assert_int_equal(psql(f, f->db_url, sql, out, sizeof out), 0);
    char want[128];
    snprintf(want, sizeof want, "1|%s|1", inst);
    assert_string_equal(out, want);
    lwc_uploader_free(u);
    lwc_spool_close(s);
}

static void test_traces_report_done(void **state) {
    fixture *f = *state;
    NEED_PG(f);
    char id[37], meta[400], base[64], url[256], body[8192];
    new_id(id);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id);
    write_meta(meta, id, "traces", NULL);
    base_url(&f->main, base, sizeof base);
    lwc_uploader *u = uploader(base, f->ingest);
    lwc_upload_result res;
    assert_int_equal(lwc_upload(u, meta, f->traces, "traces", 0, &res), LW_SDK_OK);
    if (res.kind != LWC_UPLOAD_DONE) fail_msg("%s", res.message);
    assert_int_equal(res.http_status, 202);
    assert_non_null(strstr(res.message, "done"));
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/reports/%s", f->main.port, id);
    assert_int_equal(http_get(url, f->read, body), 200);
    assert_non_null(strstr(body, "\"status\":\"done\""));
    assert_null(strstr(body, "\"leaks_found\":0"));
    lwc_uploader_free(u);
}

/* The data part must match meta.mode: a permanent 400. */
static void test_mode_mismatch_rejected(void **state) {
    fixture *f = *state;
    NEED_PG(f);
    char id[37], meta[400], base[64];
    new_id(id);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id);
    write_meta(meta, id, "heap", NULL);
    base_url(&f->main, base, sizeof base);
    lwc_uploader *u = uploader(base, f->ingest);
    lwc_upload_result res;
    assert_int_equal(lwc_upload(u, meta, f->traces, "traces", 0, &res), LW_SDK_OK);
    assert_int_equal(res.kind, LWC_UPLOAD_REJECTED);
    assert_int_equal(res.http_status, 400);
    assert_non_null(strstr(res.message, "mode_mismatch"));
    lwc_uploader_free(u);
}

/* Refusals from the headers: the 50 MB body is never sent. */
static void check_refused_without_body(fixture *f, const server *s, const char *key, long want_status,
                                       const char *want_text) {
    char id[37], meta[400], base[64];
    new_id(id);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id);
    write_meta(meta, id, "heap", NULL);
    base_url(s, base, sizeof base);
    lwc_uploader *u = uploader(base, key);
    lwc_upload_result res;
    int64_t t0 = mono_ms();
    assert_int_equal(lwc_upload(u, meta, f->big, "heap", 0, &res), LW_SDK_OK);
    int64_t took = mono_ms() - t0;
    if (verbose()) fprintf(stderr, "  %s: %" PRIu64 " body bytes sent in %" PRId64 " ms\n", res.message, res.bytes_sent, took);
    assert_int_equal(res.kind, LWC_UPLOAD_REJECTED);
    assert_int_equal(res.http_status, want_status);
    assert_non_null(strstr(res.message, want_text));
    assert_true(res.bytes_sent < (1u << 20)); /* far below the 50 MB */
    assert_true(took < 5000);                 /* no wait for the 10 s Expect timeout either */
    lwc_uploader_free(u);
}

static void test_wrong_key_401_sends_no_body(void **state) {
    fixture *f = *state;
    NEED_PG(f);
    /* A well-formed key whose secret is wrong: "unknown or revoked key". */
    char key[160];
    snprintf(key, sizeof key, "%s", f->ingest);
    size_t l = strlen(key);
    key[l - 1] = key[l - 1] == 'A' ? 'B' : 'A';
    check_refused_without_body(f, &f->main, key, 401, "unknown or revoked key");
}

static void test_too_large_413_sends_no_body(void **state) {
    fixture *f = *state;
    NEED_PG(f);
    check_refused_without_body(f, &f->small, f->ingest, 413, "too_large");
}

static void test_quota_429_retry_after(void **state) {
    fixture *f = *state;
    NEED_PG(f);
    char id[37], meta[400], base[64];
    base_url(&f->quota, base, sizeof base);
    lwc_uploader *u = uploader(base, f->ingest);
    lwc_upload_result res;
    new_id(id);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id);
    write_meta(meta, id, "traces", NULL);
    assert_int_equal(lwc_upload(u, meta, f->traces, "traces", 0, &res), LW_SDK_OK);
    if (res.kind != LWC_UPLOAD_DONE) fail_msg("%s", res.message);
    new_id(id);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id);
    write_meta(meta, id, "heap", NULL);
    assert_int_equal(lwc_upload(u, meta, f->big, "heap", 0, &res), LW_SDK_OK);
    assert_int_equal(res.kind, LWC_UPLOAD_RETRY);
    assert_int_equal(res.http_status, 429);
    assert_true(res.retry_after_ms >= 1000 && res.retry_after_ms <= 60000);
    assert_true(res.bytes_sent < (1u << 20));
    /* The backoff honours it. */
    assert_true(lwc_backoff_ms(1, 1000, 3600000, res.retry_after_ms, 0) >= res.retry_after_ms);
    lwc_uploader_free(u);
}

static void test_no_server_retry(void **state) {
    fixture *f = *state;
    char id[37], meta[400], base[64];
    new_id(id);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id);
    write_meta(meta, id, "traces", NULL);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", free_port()); /* nobody listens */
    lwc_uploader *u = uploader(base, "lw_ingest_1_x");
    lwc_upload_result res;
    assert_int_equal(lwc_upload(u, meta, f->big, "heap", 0, &res), LW_SDK_OK);
    assert_int_equal(res.kind, LWC_UPLOAD_RETRY);
    assert_int_equal(res.http_status, 0);
    assert_non_null(strstr(res.message, "network"));
    /* Damaged stored meta: can never be sent: rejected locally. */
    FILE *fp = fopen(meta, "w");
    fputs("{not json", fp);
    fclose(fp);
    assert_int_equal(lwc_upload(u, meta, f->big, "heap", 0, &res), LW_SDK_OK);
    assert_int_equal(res.kind, LWC_UPLOAD_REJECTED);
    assert_int_equal(res.http_status, 0);
    lwc_uploader_free(u);
}

/* ---- a fake server: one connection, a canned answer; it records the request headers ------------- */

typedef struct {
    int lfd;
    int port;
    const char *answer; /* the whole response */
    int silent;         /* accept nothing, answer nothing */
    char request[8192];
} fake;

static void fake_open(fake *fk) {
    fk->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fk->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    assert_int_equal(bind(fk->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fk->lfd, 4), 0);
    assert_int_equal(getsockname(fk->lfd, (struct sockaddr *)&a, &l), 0);
    fk->port = ntohs(a.sin_port);
}

static void *fake_main(void *arg) {
    fake *fk = arg;
    int c = accept(fk->lfd, NULL, NULL);
    if (c < 0) return NULL;
    size_t len = 0;
    while (len + 1 < sizeof fk->request) {
        ssize_t r = read(c, fk->request + len, sizeof fk->request - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        fk->request[len] = 0;
        if (strstr(fk->request, "\r\n\r\n")) break;
    }
    if (write(c, fk->answer, strlen(fk->answer)) < 0) {}
    shutdown(c, SHUT_WR);
    usleep(100000);
    close(c);
    return NULL;
}

/* "HTTP/1.1 <status>\r\n<headers>Content-Length: <n>\r\nConnection: close\r\n\r\n<body>" */
static const char *answer_of(char *buf, size_t cap, const char *status, const char *headers, const char *body) {
    snprintf(buf, cap, "HTTP/1.1 %s\r\n%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s", status, headers,
             strlen(body), body);
    return buf;
}

static lwc_upload_result fake_upload(fake *fk, const char *answer, const char *data, fixture *f) {
    char id[37], meta[400], base[64];
    new_id(id);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id);
    write_meta(meta, id, "heap", NULL);
    memset(fk, 0, sizeof *fk);
    fk->answer = answer;
    fake_open(fk);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fake_main, fk), 0);
    snprintf(base, sizeof base, "http://127.0.0.1:%d///", fk->port);
    lwc_uploader *u = uploader(base, "lw_ingest_1_secret");
    lwc_upload_result res;
    assert_int_equal(lwc_upload(u, meta, data, "heap", 5, &res), LW_SDK_OK);
    pthread_join(th, NULL);
    close(fk->lfd);
    lwc_uploader_free(u);
    return res;
}

static void test_fake_server_answers(void **state) {
    fixture *f = *state;
    fake fk;
    char answer[1024], hdr[256], date[64];
    time_t later = time(NULL) + 120;
    struct tm tm;
    gmtime_r(&later, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);

    /* 503 + Retry-After as an HTTP date → RETRY in ~120 s. */
    snprintf(hdr, sizeof hdr, "Retry-After: %s\r\nContent-Type: application/json\r\n", date);
    lwc_upload_result res =
        fake_upload(&fk,
                    answer_of(answer, sizeof answer, "503 Service Unavailable", hdr,
                              "{\"error\":{\"code\":\"unavailable\",\"message\":\"disk full\"}}"),
                    f->big, f);
    assert_int_equal(res.kind, LWC_UPLOAD_RETRY);
    assert_int_equal(res.http_status, 503);
    assert_true(res.retry_after_ms >= 115000 && res.retry_after_ms <= 121000);
    assert_non_null(strstr(res.message, "unavailable: disk full"));
    assert_true(res.bytes_sent < (1u << 20));
    /* What the request looked like (the base URL's trailing slashes are dropped). */
    assert_non_null(strstr(fk.request, "POST /v1/reports HTTP/1.1\r\n"));
    assert_non_null(strstr(fk.request, "Authorization: Bearer lw_ingest_1_secret\r\n"));
    assert_non_null(strstr(fk.request, "Expect: 100-continue\r\n"));
    assert_non_null(strstr(fk.request, "Content-Type: multipart/form-data; boundary="));
    assert_non_null(strstr(fk.request, "Content-Length: "));
    assert_null(strstr(fk.request, "Transfer-Encoding"));
    long long clen = atoll(strstr(fk.request, "Content-Length: ") + 16);
    assert_true(clen > (long long)BIG_BYTES && clen < (long long)BIG_BYTES + 4096);

    /* 429 without Retry-After: 60 s. 500: retry, no hint. 408: retry. */
    res = fake_upload(&fk, answer_of(answer, sizeof answer, "429 Too Many Requests", "", ""), f->big, f);
    assert_int_equal(res.kind, LWC_UPLOAD_RETRY);
    assert_int_equal(res.retry_after_ms, 60000);
    res = fake_upload(&fk, answer_of(answer, sizeof answer, "500 Oops", "", ""), f->big, f);
    assert_int_equal(res.kind, LWC_UPLOAD_RETRY);
    assert_int_equal(res.retry_after_ms, 0);
    res = fake_upload(&fk, answer_of(answer, sizeof answer, "408 Timeout", "", ""), f->big, f);
    assert_int_equal(res.kind, LWC_UPLOAD_RETRY);
    /* 422 with the error JSON: rejected, the server's message kept. */
    res = fake_upload(&fk,
                      answer_of(answer, sizeof answer, "422 Unprocessable", "Content-Type: application/json\r\n",
                                "{\"error\":{\"code\":\"bad_meta\",\"message\":\"meta is odd!\"}}"),
                      f->big, f);
    assert_int_equal(res.kind, LWC_UPLOAD_REJECTED);
    assert_int_equal(res.http_status, 422);
    assert_non_null(strstr(res.message, "bad_meta: meta is odd!"));
    /* A huge Retry-After is capped at 24 h. */
    res = fake_upload(&fk, answer_of(answer, sizeof answer, "503 No", "Retry-After: 99999999999\r\n", ""), f->big, f);
    assert_int_equal(res.retry_after_ms, 24LL * 3600 * 1000);
    /* A 2xx is done. */
    res = fake_upload(&fk, answer_of(answer, sizeof answer, "202 Accepted", "", "{\"status\":\"queued\"}"), f->big, f);
    assert_int_equal(res.kind, LWC_UPLOAD_DONE);
}

/* A server that never answers: the abort flag stops the transfer within about a second. */
typedef struct {
    lwc_uploader *u;
    int delay_ms;
} aborter;

static void *abort_later(void *arg) {
    aborter *a = arg;
    usleep((useconds_t)a->delay_ms * 1000);
    lwc_uploader_abort(a->u, 1);
    return NULL;
}

static void test_abort_stops_transfer(void **state) {
    fixture *f = *state;
    fake fk;
    memset(&fk, 0, sizeof fk);
    fake_open(&fk); /* listens, never accepts: the handshake completes, no answer ever comes */
    char id[37], meta[400], base[64];
    new_id(id);
    snprintf(meta, sizeof meta, "%s/meta-%s.json", f->tmp, id);
    write_meta(meta, id, "heap", NULL);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", fk.port);
    lwc_uploader *u = uploader(base, "lw_ingest_1_x");
    aborter a = {u, 300};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, abort_later, &a), 0);
    lwc_upload_result res;
    int64_t t0 = mono_ms();
    assert_int_equal(lwc_upload(u, meta, f->big, "heap", 0, &res), LW_SDK_OK);
    int64_t took = mono_ms() - t0;
    pthread_join(th, NULL);
    assert_int_equal(res.kind, LWC_UPLOAD_RETRY);
    assert_non_null(strstr(res.message, "aborted"));
    assert_true(took < 2500);
    /* While the flag is set nothing is sent; cleared, uploads work again (here: still no answer). */
    assert_int_equal(lwc_upload(u, meta, f->big, "heap", 0, &res), LW_SDK_OK);
    assert_non_null(strstr(res.message, "stopping"));
    lwc_uploader_free(u);
    close(fk.lfd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_meta_always_has_an_app_version),
        cmocka_unit_test(test_new_rejects_bad_config),
        cmocka_unit_test(test_fake_server_answers),
        cmocka_unit_test(test_abort_stops_transfer),
        cmocka_unit_test(test_no_server_retry),
        cmocka_unit_test(test_heap_report_done_and_repeat),
        cmocka_unit_test(test_traces_report_done),
        cmocka_unit_test(test_mode_mismatch_rejected),
        cmocka_unit_test(test_wrong_key_401_sends_no_body),
        cmocka_unit_test(test_too_large_413_sends_no_body),
        cmocka_unit_test(test_quota_429_retry_after),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
