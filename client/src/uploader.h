/* uploader.h — sends one spooled report to leakd with libcurl and says what to do with it:
 * delete it (delivered, or refused for good) or keep it and retry later.
 *
 * The request: POST <server_url>/v1/reports, Authorization: Bearer <ingest key>,
 * multipart/form-data with `meta` (application/json: the stored meta with "dropped" set now)
 * then `heap` (application/zstd) or `traces` (application/json) streamed from the file;
 * Content-Length always set; Expect: 100-continue (10 s), so a refusal judged from the headers
 * (401, 403, 413, 429, ...) costs no body bytes. TLS is verified unless the insecure flag is
 * set; proxies come from libcurl's usual environment variables.
 *
 * Threads: one upload at a time per uploader (a mutex serializes lwc_upload); lwc_uploader_abort
 * may be called from any thread at any time. */
#ifndef LWC_UPLOADER_H
#define LWC_UPLOADER_H

#include <stddef.h>
#include <stdint.h>

#include "leakwatch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lwc_uploader_config {
    const char *server_url;     /* required: base URL (http or https); "/v1/reports" is appended */
    const char *ingest_key;     /* required: lw_ingest_... */
    const char *ca_file;        /* PEM bundle to verify the server; NULL = the system's */
    int insecure_skip_verify;   /* tests only: do not verify the server's certificate */
    long connect_timeout_ms;    /* [15000] */
    long expect_timeout_ms;     /* [10000] wait for "100 Continue" before sending the body anyway */
    long low_speed_bytes;       /* [1024] a transfer slower than this ... */
    long low_speed_seconds;     /* [60] ... for this long is aborted (retried later) */
    void (*log)(void *user, int level, const char *msg); /* optional; LW_LOG_* levels */
    void *log_user;
} lwc_uploader_config;

typedef enum lwc_upload_kind {
    LWC_UPLOAD_DONE = 0,     /* 2xx: the server has it; remove it from the spool */
    LWC_UPLOAD_REJECTED = 1, /* a permanent refusal (400, 401, 403, 404, 409, 411, 413, 415, 422, other 4xx)
                                or a report that cannot be sent at all: remove it */
    LWC_UPLOAD_RETRY = 2,    /* network error, 5xx, 408, 429, aborted, ...: keep it, retry later */
} lwc_upload_kind;

typedef struct lwc_upload_result {
    lwc_upload_kind kind;
    long http_status;        /* 0 when no HTTP answer came */
    int64_t retry_after_ms;  /* from Retry-After (seconds or an HTTP date), capped at 24 h; 60 s for a
                                429 without it; 0 = none */
    uint64_t bytes_sent;     /* request body bytes sent (CURLINFO_SIZE_UPLOAD_T) */
    char message[512];       /* what happened, with the server's error message when it sent one */
} lwc_upload_result;

typedef struct lwc_uploader lwc_uploader;

/* Creates an uploader (strings are copied; a trailing '/' of server_url is dropped). Calls
 * curl_global_init (reference-counted by libcurl). On failure *out is NULL and err says why. */
lw_sdk_status lwc_uploader_new(lwc_uploader **out, const lwc_uploader_config *cfg, char *err, size_t cap);

/* Frees it (and its connection). NULL is a no-op. Not while lwc_upload runs. */
void lwc_uploader_free(lwc_uploader *u);

/* Sets (1) or clears (0) the abort flag. While set, a transfer in progress stops within about a
 * second and lwc_upload returns LWC_UPLOAD_RETRY at once: the report stays in the spool. */
void lwc_uploader_abort(lwc_uploader *u, int abort);

/* Uploads one report: meta from `meta_path` (a JSON object of at most 64 KiB, borrowed), with
 * "dropped" set to `dropped` (when >= 0), and the data part `kind` ("heap" or "traces") streamed
 * from `data_path`, which is opened before the transfer starts (so a concurrent removal of the
 * report does not disturb it). Fills *res and returns LW_SDK_OK whenever it could classify the
 * outcome (including network failures: res->kind says what to do); LW_SDK_ERR_USAGE for bad
 * arguments. Never retries by itself: the same report_id is sent again by the next call. */
lw_sdk_status lwc_upload(lwc_uploader *u, const char *meta_path, const char *data_path, const char *kind,
                         int64_t dropped, lwc_upload_result *res);

/* The delay before the next attempt after `attempts` failed ones: uniform in
 * [min_ms, min(max_ms, min_ms * 2^attempts)] ("full jitter" above a floor, so devices that
 * failed together do not come back together), drawn from `random` (any 64 random bits), and
 * never less than `retry_after_ms` (the server's word wins when it asks for longer; capped at
 * 24 h). min_ms <= 0 is taken as 1000, max_ms < min_ms as min_ms. */
int64_t lwc_backoff_ms(unsigned attempts, int64_t min_ms, int64_t max_ms, int64_t retry_after_ms, uint64_t random);

/* "done", "rejected", "retry". */
const char *lwc_upload_kind_name(lwc_upload_kind kind);

#ifdef __cplusplus
}
#endif
#endif
