/* server.h — what the HTTP handlers share: config, the database pool, the key cache,
 * quotas and counters; and the request they handle. */
#ifndef LD_SERVER_H
#define LD_SERVER_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "auth.h"
#include "blob_store.h"
#include "config.h"
#include "metrics.h"
#include "pool.h"
#include "quota.h"
#include "task_pool.h"


typedef struct ld_server {
    ld_config cfg;
    ld_pool *pool;
    ld_auth *auth;
    ld_quota *quota;
    struct ld_report_writer *writer; /* stores traces reports by group commit */
    ld_task_pool *tasks;             /* the blocking steps of requests (http.c) */
    struct ld_blob_files *blobs;     /* heap uploads' temp files and their writers (http.c) */
    ld_metrics metrics;
    char blob_dir[1100];
    char tmp_dir[1100];
    char store_id[LD_STORE_ID_LEN + 1]; /* data_dir's (blob_store.h): heap reports name it */
    int schema_version;
} ld_server;

typedef struct ld_req ld_req;

/* A handler's hooks for a request with a body: each chunk, then the end. */
typedef struct ld_body_handler {
    int (*chunk)(ld_req *r, const char *data, size_t len); /* nonzero: drop the connection */
    void (*end)(ld_req *r);                                /* must prepare a response */
    void (*cleanup)(ld_req *r);                            /* always called once */
} ld_body_handler;

struct ld_req {
    ld_server *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *url;
    ld_principal who;
    unsigned status;
    struct MHD_Response *resp;      /* prepared, queued by http.c when MHD allows */
    const ld_body_handler *body;    /* set by a handler that reads the body */
    void *state;
    uint64_t body_bytes;
    uint64_t content_length;        /* 0 when none was given */
    double started;                 /* monotonic seconds */
    char origin[256];               /* CORS: an allowed Origin, or "" */
    ld_route route;                 /* for metrics and the request's log line */
    char id[24];                    /* request id, sent back as X-Request-Id */
    char note[160];                 /* more for the log line: the report, where a traces report waited */
    char error_code[32];            /* the error answered, for the log line */
    char error_msg[300];
    /* http.c: off the event loop and back */
    ld_task task;
    void (*off_loop)(ld_req *r);    /* to run on a task thread (ld_req_off_loop) */
    void (*then)(ld_req *r);        /* to run on the event thread once resumed (ld_req_suspend) */
    int on_task;                    /* running on a task thread: blocking is allowed */
    int suspended;
    int suspended_at_end;           /* in the final call (else right after the headers) */
    int key_checked;                /* waited for a key reload: 1, or 2 if it failed */
    ld_req *next_waiting;           /* in the list of requests waiting for that reload, or for memory */
    uint64_t quota_bytes;           /* an upload's take of its key's quota (ld_ingest_begin), given
                                       back when its answer is a 200 or a 5xx (set_response); else
                                       what it did not send goes back when it ends (on_completed) */
    int quota_taken;
    uint64_t turn_bytes;            /* its share of the in-memory bodies' budget (ld_req_admit) */
    uint64_t turn_want;             /* waiting for that much */
    int turn_refused;               /* waited for its share until the server stopped: answered 503 */
    double reading_since;           /* monotonic: when its body began to be read (after any wait) */
    /* http.c, under its budget's lock: a request holding a share is in the list of holders
     * until its body must have come (turn_deadline, 0 once past); one waiting is in the queue */
    ld_req *turn_prev, *turn_next;
    double turn_deadline;
    int turn_fd;                    /* its socket, shut down at the deadline */
    int turn_queued;
    int turn_key_full;              /* its wait ended for want of its own key's share (else of the budget) */
    int turn_key_counted;           /* turn_bytes are counted in its key's share (http.c's key_share) */
    atomic_int body_read;           /* its body has all come (the final call): no deadline now */
    atomic_int turn_dropped;        /* dropped at the deadline: counts as a refused upload */
};

/* Prepares the response (replacing one prepared before). The JSON body is stolen. */
void ld_respond_json(ld_req *r, unsigned status, json_t *body);
/* The same for a JSON text already written, ending in a newline (taken: freed by the
 * response); NULL (out of memory) answers 500. */
void ld_respond_json_text(ld_req *r, unsigned status, char *text);
void ld_respond_error(ld_req *r, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void ld_respond_retry_after(ld_req *r, int seconds);
void ld_respond_empty(ld_req *r, unsigned status);

/* A pooled database connection (waiting up to `wait_ms` for one), or NULL with a 503 and
 * Retry-After: `retry_s` prepared. Give it back with ld_pool_put (NULL is fine). */
ld_db *ld_req_db(ld_req *r, int wait_ms, int retry_s);

/* libmicrohttpd's event threads must never wait: not on PostgreSQL, nor an fsync, nor a lock
 * held across either. A handler step that would calls this first. On an event thread it
 * arranges for fn(r) to run on a task thread, the connection suspended until fn returns, and
 * returns 1: return at once. On a task thread it returns 0: go on. fn prepares the response
 * (or, right after the headers, may set a body handler). */
int ld_req_off_loop(ld_req *r, void (*fn)(ld_req *r));

/* For work that another thread finishes (the report writer): suspends the connection; once
 * that thread calls ld_req_resume, then(r) runs on an event thread and prepares the response.
 * -1, with a 503 prepared and nothing suspended, when the server is shutting down. Event
 * threads only. */
int ld_req_suspend(ld_req *r, void (*then)(ld_req *r));
void ld_req_resume(ld_req *r);

/* Bodies a handler holds in memory (traces reports) share one budget,
 * `LEAKD_INGEST_MEMORY`: a request that would take more than is left waits, suspended, first
 * come first served, its body unread in the kernel's socket buffers (a request is let through
 * alone whatever its size). 0: go on, `bytes` reserved until the request ends (or nothing to
 * reserve). 1: it waits; then(r) runs on an event thread once it may go on (if the server
 * stops first, or it waited LEAKD_INGEST_WAIT seconds, it is answered 503 instead and then(r)
 * does not run). -1: a 503 is prepared (the server is stopping). A request holding a share
 * whose body has not all come 10 s + `bytes` at 128 KiB/s after it may be read is dropped
 * (http.c, turns_watch). Event threads only. */
int ld_req_admit(ld_req *r, uint64_t bytes, void (*then)(ld_req *r));

/* Authenticates the request: 0, or -1 with the 401/503 prepared. On an event thread a key not
 * in the cache returns 1: the request is suspended until the next reload of the keys, then
 * again(r) runs (and calls this again). */
int ld_req_auth(ld_req *r, void (*again)(ld_req *r));

/* A header value or NULL. */
const char *ld_req_header(ld_req *r, const char *name);

/* Handlers (ingest.c, api.c). */
void ld_ingest_begin(ld_req *r);
void ld_api_dispatch(ld_req *r);

/* Runs the HTTP API (and the metrics endpoint) until ld_http_stop. */
int ld_http_start(ld_server *s, char *err, size_t cap);
/* Stops accepting, lets requests under way finish until `deadline` (CLOCK_MONOTONIC seconds),
 * then closes every connection. */
void ld_http_stop(ld_server *s, double deadline);

/* The HTTP side's gauges, for /metrics. */
typedef struct {
    unsigned long long waited;  /* requests that waited for the memory budget (ld_req_admit) since start */
    unsigned waiting;           /* ... and those waiting now */
    uint64_t ingest_held;       /* bytes of LEAKD_INGEST_MEMORY held now */
    uint64_t ingest_budget;     /* LEAKD_INGEST_MEMORY (0: no limit) */
    unsigned connections_open;  /* API connections handed to libmicrohttpd and not closed */
    unsigned connection_limit;  /* LEAKD_CONNECTION_LIMIT as applied */
} ld_http_gauges;
void ld_http_gauges_read(ld_http_gauges *g);

/* Prometheus text of the counters plus database gauges. */
char *ld_metrics_render(ld_server *s);
void ld_metrics_write(FILE *f, ld_metrics *m);

#endif
