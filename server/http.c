/* http.c — libmicrohttpd in thread-per-connection mode: a handler may wait on PostgreSQL
 * without stalling other connections. Decisions that need only the headers (key, type,
 * length, quota) are answered before any body byte is read, so no 100 Continue is sent
 * and a refused upload costs no bandwidth. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

static struct MHD_Daemon *api_daemon, *metrics_daemon;

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

const char *ld_req_header(ld_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static void set_response(ld_req *r, unsigned status, struct MHD_Response *resp) {
    if (r->resp) MHD_destroy_response(r->resp);
    r->resp = resp;
    r->status = status;
}

void ld_respond_json(ld_req *r, unsigned status, json_t *body) {
    char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    if (!text) text = strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}"), status = 500;
    size_t len = strlen(text);
    char *with_nl = realloc(text, len + 2);
    if (with_nl) {
        text = with_nl;
        text[len++] = '\n';
        text[len] = 0;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    set_response(r, status, resp);
}

void ld_respond_error(ld_req *r, unsigned status, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ld_respond_json(r, status, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
    if (status == 503) atomic_fetch_add(&r->srv->metrics.unavailable, 1);
    /* Said once, in the request's log line. */
    snprintf(r->error_code, sizeof r->error_code, "%.31s", code);
    snprintf(r->error_msg, sizeof r->error_msg, "%.299s", msg);
}

void ld_respond_retry_after(ld_req *r, int seconds) {
    char v[32];
    snprintf(v, sizeof v, "%d", seconds > 0 ? seconds : 1);
    if (r->resp) MHD_add_response_header(r->resp, "Retry-After", v);
}

ld_db *ld_req_db(ld_req *r, int wait_ms, int retry_s) {
    ld_db *db = ld_pool_get(r->srv->pool, wait_ms);
    if (!db) {
        ld_respond_error(r, 503, "unavailable", "the database is unreachable; retry later");
        ld_respond_retry_after(r, retry_s);
    }
    return db;
}

void ld_respond_empty(ld_req *r, unsigned status) {
    set_response(r, status, MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

int ld_req_auth(ld_req *r) {
    switch (ld_auth_check(r->srv->auth, ld_req_header(r, "Authorization"), &r->who)) {
    case LD_AUTH_OK: return 0;
    case LD_AUTH_MISSING:
        ld_respond_error(r, 401, "unauthorized", "an Authorization: Bearer <key> header with a Leakwatch key is required");
        break;
    case LD_AUTH_UNKNOWN:
        ld_respond_error(r, 401, "unauthorized", "unknown or revoked key");
        break;
    case LD_AUTH_UNAVAILABLE:
        ld_respond_error(r, 503, "unavailable", "the database is unreachable, so the key cannot be checked; retry later");
        ld_respond_retry_after(r, 10);
        break;
    }
    return -1;
}

/* CORS: an allowed Origin is echoed back. */
static void cors_origin(ld_req *r) {
    const char *origin = ld_req_header(r, "Origin");
    const char *list = r->srv->cfg.cors_origins;
    if (!origin || !list[0] || strlen(origin) >= sizeof r->origin) return;
    if (strcmp(list, "*") == 0) {
        snprintf(r->origin, sizeof r->origin, "%s", origin);
        return;
    }
    size_t ol = strlen(origin);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t l = comma ? (size_t)(comma - p) : strlen(p);
        while (l && *p == ' ') p++, l--;
        while (l && p[l - 1] == ' ') l--;
        if (l == ol && strncmp(p, origin, l) == 0) {
            snprintf(r->origin, sizeof r->origin, "%s", origin);
            return;
        }
        p = comma ? comma + 1 : p + strlen(p);
    }
}

static enum MHD_Result queue(ld_req *r) {
    if (!r->resp) ld_respond_error(r, 500, "internal", "no response was prepared");
    if (r->origin[0]) {
        MHD_add_response_header(r->resp, "Access-Control-Allow-Origin", r->origin);
        MHD_add_response_header(r->resp, "Vary", "Origin");
    }
    MHD_add_response_header(r->resp, "X-Request-Id", r->id);
    ld_metrics_request(&r->srv->metrics, r->route, r->status, mono() - r->started);
    if (r->status / 100 == 4 && r->route == LD_ROUTE_UPLOAD) atomic_fetch_add(&r->srv->metrics.reports_refused, 1);
    enum MHD_Result ok = MHD_queue_response(r->conn, r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return ok;
}

static void route(ld_req *r) {
    r->route = LD_ROUTE_OTHER;
    if (strcmp(r->method, "OPTIONS") == 0) {
        r->route = LD_ROUTE_OPTIONS;
        ld_respond_empty(r, r->origin[0] ? 204 : 403);
        if (r->origin[0]) {
            MHD_add_response_header(r->resp, "Access-Control-Allow-Methods", "GET, PATCH, POST, OPTIONS");
            MHD_add_response_header(r->resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
            MHD_add_response_header(r->resp, "Access-Control-Max-Age", "600");
        }
        return;
    }
    if (strcmp(r->url, "/v1/reports") == 0) {
        r->route = LD_ROUTE_UPLOAD;
        if (strcmp(r->method, "POST") != 0) {
            ld_respond_error(r, 405, "method_not_allowed", "use POST to upload a report");
            MHD_add_response_header(r->resp, "Allow", "POST");
            return;
        }
        ld_ingest_begin(r);
        return;
    }
    ld_api_dispatch(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls) {
    (void)version;
    ld_server *s = cls;
    ld_req *r = *req_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->srv = s;
        r->conn = conn;
        r->method = method;
        r->url = url;
        r->started = mono();
        /* A request id in the log line and the X-Request-Id answer: instance + counter. */
        static atomic_ullong counter;
        static unsigned instance;
        if (!instance) instance = (unsigned)(getpid() ^ (unsigned)time(NULL) * 2654435761u) | 1u;
        snprintf(r->id, sizeof r->id, "%08x%08llx", instance, (unsigned long long)atomic_fetch_add(&counter, 1));
        *req_cls = r;
        cors_origin(r);
        route(r);
        /* Answered from the headers alone (or a request without a body). */
        if (r->resp && !r->body) return queue(r);
        if (!r->body) {
            ld_respond_error(r, 500, "internal", "unhandled request");
            return queue(r);
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        r->body_bytes += n;
        /* Slow-drip uploads hold a thread: past 10 s, keep up a minimum rate or go. */
        double elapsed = mono() - r->started;
        if (elapsed > 10 && s->cfg.min_upload_rate && (double)r->body_bytes / elapsed < (double)s->cfg.min_upload_rate) {
            ld_warn("%s %s: dropping a slow upload (%llu bytes in %.0f s, minimum %llu bytes/s)", method, url,
                    (unsigned long long)r->body_bytes, elapsed, (unsigned long long)s->cfg.min_upload_rate);
            return MHD_NO;
        }
        if (r->body && r->body->chunk(r, upload_data, n) != 0) return MHD_NO;
        return MHD_YES;
    }
    if (r->body) r->body->end(r);
    return queue(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    ld_req *r = *req_cls;
    if (!r) return;
    /* One line per request. */
    double ms = (mono() - r->started) * 1e3;
    char who[96] = "-";
    if (r->who.key_id) snprintf(who, sizeof who, "key=%lld app=%s", (long long)r->who.key_id, r->who.app_slug[0] ? r->who.app_slug : "*");
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        ld_warn("req=%s %s %s %u %.1fms in=%llu %s: connection ended before the answer was sent (code %d)", r->id, r->method,
                r->url, r->status, ms, (unsigned long long)r->body_bytes, who, (int)toe);
    else if (r->error_code[0])
        ld_log(r->status >= 500 ? LD_WARN : LD_INFO, "req=%s %s %s %u %.1fms in=%llu %s %s: %s", r->id, r->method, r->url,
               r->status, ms, (unsigned long long)r->body_bytes, who, r->error_code, r->error_msg);
    else
        ld_info("req=%s %s %s %u %.1fms in=%llu %s", r->id, r->method, r->url, r->status, ms, (unsigned long long)r->body_bytes, who);
    if (r->body && r->body->cleanup) r->body->cleanup(r);
    if (r->resp) MHD_destroy_response(r->resp);
    free(r);
    *req_cls = NULL;
}

static enum MHD_Result on_metrics(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls) {
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)req_cls;
    ld_server *s = cls;
    struct MHD_Response *resp;
    unsigned status = 200;
    if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
        status = 404;
        resp = MHD_create_response_from_buffer(10, (void *)"not found\n", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(resp, "Content-Type", "text/plain");
    } else {
        char *text = ld_metrics_render(s);
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
    }
    enum MHD_Result ok = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* "host:port" -> sockaddr; host may be a name, an IPv4 or a bracketed IPv6 address. */
static int parse_listen(const char *spec, struct sockaddr_storage *ss, char *err, size_t cap) {
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1]) {
        snprintf(err, cap, "listen address \"%s\" must be host:port", spec);
        return -1;
    }
    size_t hl = (size_t)(colon - spec);
    if (hl >= sizeof host) hl = sizeof host - 1;
    memcpy(host, spec, hl);
    host[hl] = 0;
    if (host[0] == '[' && hl > 1 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, cap, "listen address \"%s\": %s", spec, gai_strerror(rc));
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

static char *read_file(const char *path, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: cannot open", path);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

int ld_http_start(ld_server *s, char *err, size_t cap) {
    struct sockaddr_storage addr;
    if (parse_listen(s->cfg.listen, &addr, err, cap)) return -1;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    char *cert = NULL, *key = NULL;
    if (s->cfg.tls_cert[0]) {
        cert = read_file(s->cfg.tls_cert, err, cap);
        key = cert ? read_file(s->cfg.tls_key, err, cap) : NULL;
        if (!cert || !key) {
            free(cert);
            return -1;
        }
        flags |= MHD_USE_TLS;
    }
    api_daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                                  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.connection_limit,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.connection_timeout_s,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024), /* bigger upload chunks; zeroed per request */
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                  cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert,
                                  MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
    free(cert);
    free(key);
    if (!api_daemon) {
        snprintf(err, cap, "cannot listen on %s (in use, or not allowed)", s->cfg.listen);
        return -1;
    }
    if (strcmp(s->cfg.metrics_listen, "off") != 0) {
        struct sockaddr_storage maddr;
        if (parse_listen(s->cfg.metrics_listen, &maddr, err, cap)) return -1;
        unsigned mflags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | (maddr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        metrics_daemon = MHD_start_daemon(mflags, 0, NULL, NULL, on_metrics, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&maddr,
                                          MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
        if (!metrics_daemon) {
            snprintf(err, cap, "cannot listen on %s for metrics (in use, or not allowed)", s->cfg.metrics_listen);
            return -1;
        }
    }
    return 0;
}

void ld_http_stop(ld_server *s) {
    (void)s;
    if (api_daemon) MHD_stop_daemon(api_daemon);
    if (metrics_daemon) MHD_stop_daemon(metrics_daemon);
    api_daemon = metrics_daemon = NULL;
}
