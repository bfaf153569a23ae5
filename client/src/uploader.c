/* uploader.c — one report, one POST /v1/reports with libcurl, and the verdict: delivered,
 * refused for good, or retry later (with the server's Retry-After when it gave one). */
#define _GNU_SOURCE
#include "uploader.h"

#include "sdk_log.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define META_MAX (64u << 10)                     /* the server's limit for the meta part */
#define BODY_MAX (16u << 10)                     /* response bytes kept (the rest is read and dropped) */
#define RETRY_AFTER_CAP_MS (24LL * 3600 * 1000)  /* never trust a server to park us for longer */
#define RETRY_AFTER_429_MS (60LL * 1000)         /* a 429 without Retry-After */

struct lwc_uploader {
    pthread_mutex_t mu; /* one transfer at a time on `curl` */
    CURL *curl;
    char *url;         /* <base>/v1/reports */
    char *auth_header; /* "Authorization: Bearer <key>" — never logged */
    char *ca_file;
    int insecure;
    long connect_ms, expect_ms, low_bytes, low_secs;
    atomic_int abort;
    lwc_log log;
};

/* One transfer's state, shared with the callbacks. */
typedef struct {
    lwc_uploader *u;
    int fd;          /* the data part */
    uint64_t size;   /* its size when opened: the Content-Length promise */
    uint64_t pos;
    int read_errno;  /* why reading the data part failed, 0 = it did not */
    char body[BODY_MAX + 1];
    size_t body_len;
    int64_t retry_after_ms; /* -1 = none in the final answer */
} xfer;

__attribute__((format(printf, 3, 4))) static void seterr(char *err, size_t cap, const char *fmt, ...) {
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

const char *lwc_upload_kind_name(lwc_upload_kind kind) {
    switch (kind) {
    case LWC_UPLOAD_DONE: return "done";
    case LWC_UPLOAD_REJECTED: return "rejected";
    case LWC_UPLOAD_RETRY: return "retry";
    }
    return "?";
}

int64_t lwc_backoff_ms(unsigned attempts, int64_t min_ms, int64_t max_ms, int64_t retry_after_ms, uint64_t random) {
    if (min_ms <= 0) min_ms = 1000;
    if (max_ms < min_ms) max_ms = min_ms;
    int64_t ceiling = min_ms;
    for (unsigned i = 0; i < attempts && ceiling < max_ms; i++) ceiling = ceiling > max_ms / 2 ? max_ms : ceiling * 2;
    if (ceiling > max_ms) ceiling = max_ms;
    int64_t delay = min_ms + (int64_t)(random % (uint64_t)(ceiling - min_ms + 1));
    if (retry_after_ms > RETRY_AFTER_CAP_MS) retry_after_ms = RETRY_AFTER_CAP_MS;
    return retry_after_ms > delay ? retry_after_ms : delay;
}

/* ---- create, free, abort ------------------------------------------------------------------------ */

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

lw_sdk_status lwc_uploader_new(lwc_uploader **out, const lwc_uploader_config *cfg, char *err, size_t cap) {
    if (!out || !cfg) {
        seterr(err, cap, "lwc_uploader_new: a NULL argument");
        return LW_SDK_ERR_USAGE;
    }
    *out = NULL;
    if (!cfg->server_url || !cfg->server_url[0]) {
        seterr(err, cap, "no server URL");
        return LW_SDK_ERR_USAGE;
    }
    if (!cfg->ingest_key || !cfg->ingest_key[0] || strpbrk(cfg->ingest_key, "\r\n")) {
        seterr(err, cap, "no usable ingest key");
        return LW_SDK_ERR_USAGE;
    }
    if (strncmp(cfg->server_url, "http://", 7) != 0 && strncmp(cfg->server_url, "https://", 8) != 0) {
        seterr(err, cap, "server URL \"%.200s\" must start with http:// or https://", cfg->server_url);
        return LW_SDK_ERR_USAGE;
    }
    lw_sdk_status rc = LW_SDK_ERR_NOMEM;
    int global = 0, mutex = 0;
    CURLU *parsed = NULL;
    lwc_uploader *u = calloc(1, sizeof *u);
    if (!u) {
        seterr(err, cap, "out of memory");
        return LW_SDK_ERR_NOMEM;
    }
    size_t base_len = strlen(cfg->server_url);
    while (base_len > 0 && cfg->server_url[base_len - 1] == '/') base_len--;
    size_t url_cap = base_len + sizeof "/v1/reports";
    size_t auth_cap = strlen(cfg->ingest_key) + sizeof "Authorization: Bearer ";
    u->url = malloc(url_cap);
    u->auth_header = malloc(auth_cap);
    u->ca_file = dup_or_null(cfg->ca_file);
    if (!u->url || !u->auth_header || (cfg->ca_file && !u->ca_file)) {
        seterr(err, cap, "out of memory");
        goto out;
    }
    snprintf(u->url, url_cap, "%.*s/v1/reports", (int)base_len, cfg->server_url);
    snprintf(u->auth_header, auth_cap, "Authorization: Bearer %s", cfg->ingest_key);
    u->insecure = cfg->insecure_skip_verify != 0;
    u->connect_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 15000;
    u->expect_ms = cfg->expect_timeout_ms > 0 ? cfg->expect_timeout_ms : 10000;
    u->low_bytes = cfg->low_speed_bytes > 0 ? cfg->low_speed_bytes : 1024;
    u->low_secs = cfg->low_speed_seconds > 0 ? cfg->low_speed_seconds : 60;
    u->log = (lwc_log){cfg->log, cfg->log_user};
    atomic_init(&u->abort, 0);

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        seterr(err, cap, "curl_global_init failed");
        rc = LW_SDK_ERR_RUNTIME;
        goto out;
    }
    global = 1;
    parsed = curl_url();
    if (!parsed) {
        seterr(err, cap, "out of memory");
        goto out;
    }
    if (curl_url_set(parsed, CURLUPART_URL, u->url, 0) != CURLUE_OK) {
        seterr(err, cap, "server URL \"%.200s\" is not a valid URL", cfg->server_url);
        rc = LW_SDK_ERR_USAGE;
        goto out;
    }
    if (pthread_mutex_init(&u->mu, NULL) != 0) {
        seterr(err, cap, "cannot create a mutex");
        goto out;
    }
    mutex = 1;
    u->curl = curl_easy_init();
    if (!u->curl) {
        seterr(err, cap, "curl_easy_init failed");
        rc = LW_SDK_ERR_RUNTIME;
        goto out;
    }
    rc = LW_SDK_OK;
out:
    curl_url_cleanup(parsed);
    if (rc != LW_SDK_OK) {
        if (mutex) pthread_mutex_destroy(&u->mu);
        if (global) curl_global_cleanup();
        free(u->url);
        free(u->auth_header);
        free(u->ca_file);
        free(u);
        return rc;
    }
    *out = u;
    return LW_SDK_OK;
}

void lwc_uploader_free(lwc_uploader *u) {
    if (!u) return;
    curl_easy_cleanup(u->curl);
    pthread_mutex_destroy(&u->mu);
    curl_global_cleanup();
    free(u->url);
    if (u->auth_header) {
        /* The key leaves no copy behind in freed memory. */
        volatile char *p = u->auth_header;
        while (*p) *p++ = 0;
        free(u->auth_header);
    }
    free(u->ca_file);
    free(u);
}

void lwc_uploader_abort(lwc_uploader *u, int abort) {
    if (u) atomic_store(&u->abort, abort ? 1 : 0);
}

/* ---- libcurl callbacks --------------------------------------------------------------------------- */

static size_t read_cb(char *buf, size_t size, size_t nitems, void *arg) {
    xfer *x = arg;
    size_t want = size * nitems;
    if (x->pos >= x->size) return 0;
    if (want > x->size - x->pos) want = (size_t)(x->size - x->pos);
    for (;;) {
        ssize_t r = pread(x->fd, buf, want, (off_t)x->pos);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            x->read_errno = r < 0 ? errno : EIO; /* the file shrank: the Content-Length would lie */
            return CURL_READFUNC_ABORT;
        }
        x->pos += (uint64_t)r;
        return (size_t)r;
    }
}

static int seek_cb(void *arg, curl_off_t offset, int origin) {
    xfer *x = arg;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->size) return CURL_SEEKFUNC_FAIL;
    x->pos = (uint64_t)offset;
    return CURL_SEEKFUNC_OK;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *arg) {
    xfer *x = arg;
    size_t len = size * nmemb, room = BODY_MAX - x->body_len;
    size_t take = len < room ? len : room;
    memcpy(x->body + x->body_len, data, take);
    x->body_len += take;
    x->body[x->body_len] = 0;
    return len;
}

/* Retry-After: delay-seconds or an HTTP date. -1 when unusable. */
static int64_t parse_retry_after(const char *v) {
    while (*v == ' ' || *v == '\t') v++;
    if (*v >= '0' && *v <= '9') {
        int64_t secs = 0;
        for (; *v >= '0' && *v <= '9'; v++) {
            secs = secs * 10 + (*v - '0');
            if (secs > RETRY_AFTER_CAP_MS / 1000) return RETRY_AFTER_CAP_MS;
        }
        while (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n') v++;
        return *v ? -1 : secs * 1000;
    }
    time_t t = curl_getdate(v, NULL);
    if (t == (time_t)-1) return -1;
    time_t now = time(NULL);
    if (t <= now) return 0;
    int64_t ms = ((int64_t)t - (int64_t)now) * 1000;
    return ms > RETRY_AFTER_CAP_MS ? RETRY_AFTER_CAP_MS : ms;
}

static size_t header_cb(char *data, size_t size, size_t nitems, void *arg) {
    xfer *x = arg;
    size_t len = size * nitems;
    if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        x->retry_after_ms = -1; /* a new response (after "100 Continue", say): forget the last one's */
    } else if (len > 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
        char v[128];
        size_t n = len - 12 < sizeof v - 1 ? len - 12 : sizeof v - 1;
        memcpy(v, data + 12, n);
        v[n] = 0;
        x->retry_after_ms = parse_retry_after(v);
    }
    return len;
}

static int progress_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    lwc_uploader *u = arg;
    return atomic_load(&u->abort) ? 1 : 0;
}

/* ---- one upload ----------------------------------------------------------------------------------- */

/* Reads meta and sets "dropped": a malloc'ed compact JSON text or NULL (why[cap], *permanent
 * when the stored meta itself is unusable). */
static char *build_meta(const char *path, int64_t dropped, char *report_id, size_t id_cap, int *permanent, char *why,
                        size_t cap) {
    char *text = NULL, *out = NULL;
    json_t *meta = NULL;
    size_t len = 0;
    *permanent = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        seterr(why, cap, "cannot read the stored meta %s: %s", path, strerror(errno));
        goto out;
    }
    if (st.st_size > (off_t)META_MAX) {
        seterr(why, cap, "the stored meta is %lld bytes; the server accepts at most %u", (long long)st.st_size, META_MAX);
        *permanent = 1;
        goto out;
    }
    text = malloc((size_t)st.st_size + 1);
    if (!text) {
        seterr(why, cap, "out of memory");
        goto out;
    }
    while (len < (size_t)st.st_size) {
        ssize_t r = read(fd, text + len, (size_t)st.st_size - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            seterr(why, cap, "cannot read the stored meta %s: %s", path, r < 0 ? strerror(errno) : "it shrank");
            goto out;
        }
        len += (size_t)r;
    }
    json_error_t je;
    meta = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!meta || !json_is_object(meta)) {
        seterr(why, cap, "the stored meta is not a JSON object (%s)", meta ? "another JSON type" : je.text);
        *permanent = 1;
        goto out;
    }
    const char *id = json_string_value(json_object_get(meta, "report_id"));
    snprintf(report_id, id_cap, "%s", id ? id : "?");
    if (dropped >= 0 && json_object_set_new(meta, "dropped", json_integer(dropped)) != 0) {
        seterr(why, cap, "out of memory");
        goto out;
    }
    out = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!out) {
        seterr(why, cap, "out of memory");
    } else if (strlen(out) > META_MAX) {
        seterr(why, cap, "the meta is over %u bytes", META_MAX);
        *permanent = 1;
        free(out);
        out = NULL;
    }
out:
    if (fd >= 0) close(fd);
    json_decref(meta);
    free(text);
    return out;
}

static int retry_status(long s) {
    return s == 407 || s == 408 || s == 421 || s == 425 || s == 429 || s >= 500 || s < 400;
}

/* The server's {"error": {"code", "message"}} into msg, or its status from a report object. */
static void describe(const xfer *x, long status, const char *report_id, char *msg, size_t cap) {
    json_error_t je;
    json_t *body = x->body_len ? json_loadb(x->body, x->body_len, 0, &je) : NULL;
    json_t *e = json_object_get(body, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *text = json_string_value(json_object_get(e, "message"));
    const char *st = json_string_value(json_object_get(body, "status"));
    if (status >= 200 && status < 300)
        snprintf(msg, cap, "report %s %s (HTTP %ld, status %s)", report_id,
                 status == 200 ? "was already on the server" : "accepted", status, st ? st : "?");
    else if (code || text)
        snprintf(msg, cap, "report %s: HTTP %ld %s: %s", report_id, status, code ? code : "", text ? text : "");
    else
        snprintf(msg, cap, "report %s: HTTP %ld (%.200s)", report_id, status, x->body_len ? x->body : "no body");
    json_decref(body);
}

lw_sdk_status lwc_upload(lwc_uploader *u, const char *meta_path, const char *data_path, const char *kind,
                         int64_t dropped, lwc_upload_result *res) {
    if (!res) return LW_SDK_ERR_USAGE;
    memset(res, 0, sizeof *res);
    res->kind = LWC_UPLOAD_RETRY;
    if (!u || !meta_path || !data_path || !kind) {
        snprintf(res->message, sizeof res->message, "lwc_upload: a NULL argument");
        return LW_SDK_ERR_USAGE;
    }
    int heap = strcmp(kind, "heap") == 0;
    if (!heap && strcmp(kind, "traces") != 0) {
        snprintf(res->message, sizeof res->message, "lwc_upload: kind \"%.16s\" is neither heap nor traces", kind);
        return LW_SDK_ERR_USAGE;
    }
    char report_id[64] = "?", why[400];
    int permanent = 0;
    char *meta = NULL;
    curl_mime *mime = NULL;
    struct curl_slist *headers = NULL, *h;
    xfer *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(res->message, sizeof res->message, "out of memory");
        return LW_SDK_OK;
    }
    x->fd = -1;
    x->retry_after_ms = -1;
    x->u = u;
    pthread_mutex_lock(&u->mu);
    if (atomic_load(&u->abort)) {
        snprintf(res->message, sizeof res->message, "not sent: the uploader is stopping");
        goto out;
    }
    meta = build_meta(meta_path, dropped, report_id, sizeof report_id, &permanent, why, sizeof why);
    if (!meta) {
        res->kind = permanent ? LWC_UPLOAD_REJECTED : LWC_UPLOAD_RETRY;
        snprintf(res->message, sizeof res->message, "report %s not sent: %s", report_id, why);
        goto out;
    }
    struct stat st;
    x->fd = open(data_path, O_RDONLY | O_CLOEXEC);
    if (x->fd < 0 || fstat(x->fd, &st) != 0) {
        snprintf(res->message, sizeof res->message, "report %s not sent: cannot open %s: %s", report_id, data_path,
                 strerror(errno));
        goto out;
    }
    x->size = (uint64_t)st.st_size;

    char errbuf[CURL_ERROR_SIZE] = "";
    CURL *c = u->curl;
    curl_easy_reset(c); /* keeps the connection cache */
    mime = curl_mime_init(c);
    curl_mimepart *part = mime ? curl_mime_addpart(mime) : NULL;
    if (!part || curl_mime_name(part, "meta") != CURLE_OK || curl_mime_type(part, "application/json") != CURLE_OK ||
        curl_mime_data(part, meta, CURL_ZERO_TERMINATED) != CURLE_OK || !(part = curl_mime_addpart(mime)) ||
        curl_mime_name(part, heap ? "heap" : "traces") != CURLE_OK ||
        curl_mime_type(part, heap ? "application/zstd" : "application/json") != CURLE_OK ||
        curl_mime_data_cb(part, (curl_off_t)x->size, read_cb, seek_cb, NULL, x) != CURLE_OK) {
        snprintf(res->message, sizeof res->message, "report %s not sent: out of memory building the request", report_id);
        goto out;
    }
    char expect_hdr[] = "Expect: 100-continue", accept_hdr[] = "Accept: application/json";
    const char *hdrs[] = {u->auth_header, expect_hdr, accept_hdr};
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        h = curl_slist_append(headers, hdrs[i]);
        if (!h) {
            snprintf(res->message, sizeof res->message, "report %s not sent: out of memory", report_id);
            goto out;
        }
        headers = h;
    }
    curl_easy_setopt(c, CURLOPT_URL, u->url);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "leakwatch-sdk/" LEAKWATCH_VERSION_STRING);
    curl_easy_setopt(c, CURLOPT_EXPECT_100_TIMEOUT_MS, u->expect_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, u->connect_ms);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, u->low_bytes);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, u->low_secs);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, u->insecure ? 0L : 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, u->insecure ? 0L : 2L);
    if (u->ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, u->ca_file);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, u);

    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_off_t sent = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &sent);
    res->http_status = status;
    res->bytes_sent = sent > 0 ? (uint64_t)sent : 0;
    if (cc != CURLE_OK && status < 400) {
        res->http_status = status >= 200 ? status : 0;
        res->kind = LWC_UPLOAD_RETRY;
        if (cc == CURLE_ABORTED_BY_CALLBACK)
            snprintf(res->message, sizeof res->message, "report %s: upload aborted (the uploader is stopping)", report_id);
        else if (x->read_errno)
            snprintf(res->message, sizeof res->message, "report %s: reading %s failed: %s", report_id, data_path,
                     strerror(x->read_errno));
        else
            snprintf(res->message, sizeof res->message, "report %s: network: %s%s%s", report_id, curl_easy_strerror(cc),
                     errbuf[0] ? ": " : "", errbuf);
        goto out;
    }
    /* A final answer (if the connection then broke, e.g. a refusal mid-body, the answer still counts). */
    describe(x, status, report_id, res->message, sizeof res->message);
    if (status >= 200 && status < 300) {
        res->kind = LWC_UPLOAD_DONE;
    } else if (retry_status(status)) {
        res->kind = LWC_UPLOAD_RETRY;
        if (x->retry_after_ms >= 0) res->retry_after_ms = x->retry_after_ms;
        else if (status == 429) res->retry_after_ms = RETRY_AFTER_429_MS;
    } else {
        res->kind = LWC_UPLOAD_REJECTED;
    }

out:
    if (mime || headers) {
        /* The handle must not point at what is freed here. */
        curl_easy_setopt(u->curl, CURLOPT_MIMEPOST, (curl_mime *)NULL);
        curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
        curl_easy_setopt(u->curl, CURLOPT_ERRORBUFFER, (char *)NULL);
    }
    curl_mime_free(mime);
    curl_slist_free_all(headers);
    pthread_mutex_unlock(&u->mu);
    lwc_logf(&u->log, res->kind == LWC_UPLOAD_DONE ? LW_LOG_INFO : res->kind == LWC_UPLOAD_REJECTED ? LW_LOG_ERROR : LW_LOG_WARN,
         "upload %s: %s%s", lwc_upload_kind_name(res->kind), res->message,
         res->kind == LWC_UPLOAD_REJECTED ? " (the report is dropped)" : "");
    if (x->fd >= 0) close(x->fd);
    free(meta);
    free(x);
    return LW_SDK_OK;
}
