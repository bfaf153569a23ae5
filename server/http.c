/* http.c — libmicrohttpd on a few event threads (epoll, one per core by default), which
 * never wait: a step that blocks (PostgreSQL, an fsync) runs on a task thread with its
 * connection suspended (ld_req_off_loop), and a traces report waits in the report writer's
 * queue, suspended, not on a thread (ld_req_suspend). Thread per connection cost a thread,
 * its wake-ups and its cache misses for every request: the event threads spent ~25 % less
 * CPU a traces report. Decisions that need only the headers (key, type, length, quota) are
 * answered before any body byte is read, so no 100 Continue is sent and a refused upload
 * costs no bandwidth. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "blob_file.h"
#include "conn_watch.h"
#include "key_table.h"
#include "log.h"
#include "peers.h"
#include "server.h"
#include "utf8.h"

static struct MHD_Daemon *metrics_daemon;
static ld_conn_watch *watch;   /* LEAKD_HEADER_TIMEOUT, and the dups the lingerer needs */
static ld_linger *lingerer;

/* The API: one libmicrohttpd daemon per event thread, none of them listening, and a thread
 * that accepts each connection and hands it to the daemon with the fewest connections
 * (MHD_add_connection). With libmicrohttpd's own thread pool, whichever event thread woke
 * first took a new connection: the two connections of two heap uploads often both went to
 * one thread, which then copied both bodies (97 % of a core) while the other core idled, and
 * 16 uploads of 50 MB over 2 connections mostly ran at 724-871 MB/s instead of 1.0-1.2 GB/s. */
#define LD_MAX_HTTP_THREADS 64
static struct MHD_Daemon *api_daemons[LD_MAX_HTTP_THREADS];

/* libmicrohttpd 0.9.75's epoll loop takes at most 128 events from one epoll_wait, and when it
 * gets exactly 128 it calls epoll_wait again, with the same timeout (up to
 * LEAKD_CONNECTION_TIMEOUT), before it handles any of them or the connections handed to it
 * meanwhile. A daemon of 128 connections whose 128 requests arrived together then slept with
 * all of them unanswered until some other event came, or until the idle timeout closed them:
 * found 2026-12-02 with back-to-back closed loops of 256 connections over 2 event threads,
 * where in about one run of six 128 requests sat unread for 30 s and then failed (gdb: both
 * event threads in epoll_wait with a ~30 s timeout; ss: 128 sockets of leakd, each with a
 * whole request unread). A daemon holds at most this many connections, so with its wake-up
 * descriptor it never has 128 events to report, and leakd runs as many event threads as
 * LEAKD_CONNECTION_LIMIT needs (the accepting thread hands each connection to the least
 * loaded one, so none holds more than its share). */
#define LD_CONNS_PER_DAEMON 120
static int n_api_daemons;
/* The connection limit is kept here, not by libmicrohttpd: 0.9.75, at its limit, refused a
 * connection given with MHD_add_connection and left the daemon's cleanup lock taken, so its
 * event thread and every MHD_resume_connection waited forever (seen with gdb: one refusal,
 * then no answer on any connection). At the limit the accepting thread waits for a
 * connection to close, and new ones wait in the listen backlog meanwhile, as libmicrohttpd
 * does with a listening socket of its own. */
static struct {
    int fd;
    pthread_t thread;
    int started;
    atomic_int stopping;
    pthread_mutex_t mu;
    pthread_cond_t freed;                /* a connection closed, or stopping */
    unsigned open, limit;                /* connections handed to the daemons and not closed */
    unsigned per[LD_MAX_HTTP_THREADS];   /* ... by daemon */
    unsigned next;                       /* round robin among the least loaded */
    time_t warned;                       /* when it last said it is at the limit */
    /* LEAKD_CONNECTIONS_PER_ADDRESS (NULL: no limit); its refusals are answered by the
     * accepting thread itself, in plain text unless the API speaks TLS */
    ld_peers *peers;
    unsigned per_address;
    int tls;
    atomic_ullong *refused;              /* leakd_address_refusals_total */
    unsigned long long refused_unlogged; /* since its last log line, */
    time_t refused_logged;               /* written at most every 10 s */
} acceptor = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER, .freed = PTHREAD_COND_INITIALIZER};

/* The daemon with the fewest connections, the next in turn among equals (locked). */
static int least_loaded(void) {
    int best = -1;
    for (int k = 0; k < n_api_daemons; k++) {
        int d = (int)((acceptor.next + (unsigned)k) % (unsigned)n_api_daemons);
        if (best < 0 || acceptor.per[d] < acceptor.per[best]) best = d;
    }
    acceptor.next++;
    return best;
}

/* libmicrohttpd says when a connection it started has closed; cls is its daemon's index.
 * (A connection it drops after MHD_add_connection accepted it but before starting it, which
 * only running out of memory for its pool does, would stay counted: here, and in its address's
 * LEAKD_CONNECTIONS_PER_ADDRESS.) */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_ctx = ci ? ld_conn_watch_started(watch, ci->connect_fd) : NULL;
        return;
    }
    if (code != MHD_CONNECTION_NOTIFY_CLOSED) return;
    ld_conn_watch_closed(watch, *socket_ctx);
    *socket_ctx = NULL;
    if (acceptor.peers) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) ld_peers_leave(acceptor.peers, ci->client_addr);
    }
    int k = (int)(intptr_t)cls;
    pthread_mutex_lock(&acceptor.mu);
    if (acceptor.per[k] > 0) acceptor.per[k]--;
    if (acceptor.open > 0) acceptor.open--;
    pthread_cond_signal(&acceptor.freed);
    pthread_mutex_unlock(&acceptor.mu);
}

/* Requests being handled, and how many of them are suspended. Once `closing` is set no
 * connection is suspended again, so that when `suspended` is 0 MHD_stop_daemon may run (it
 * must not while a connection is suspended). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int active, suspended, closing;
} inflight = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

/* Requests whose key was not in the cache wait, suspended, for one reload (ld_req_auth). */
static struct {
    pthread_mutex_t mu;
    ld_req *head;
    int queued;   /* a reload task is queued or running */
    ld_task task;
    ld_server *srv;
} keywait = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, {NULL, NULL}, NULL};

/* The memory budget of request bodies held in memory (ld_req_admit): bytes held, and who
 * waits, oldest first. Neither holding nor waiting lasts: a holder's body must have come by
 * its deadline, and a request waits LEAKD_INGEST_WAIT seconds at most (turns_watch). One key
 * holds at most `per_key` of it (LEAKD_INGEST_MEMORY_PER_KEY): a key's request over that
 * waits for the key's own bodies, and lets others' go past it. What each key holds is kept in
 * `keys`: summing it over the holders, for each waiting request at each admission, cost
 * O(waiting x holders) under this lock once a queue formed (review of 2026-12-03). */
typedef struct {
    uint64_t held; /* by the key's holders that were counted in it (turn_key_counted) */
    uint64_t walk; /* the last walk of the queue that passed a waiting request of the key */
} key_share;
static struct {
    pthread_mutex_t mu;
    uint64_t held, budget; /* budget 0: none */
    uint64_t per_key;      /* 0: none */
    ld_key_table *keys;    /* key_share of each key, when per_key */
    uint64_t walk;         /* walks of the queue so far */
    unsigned holders;
    ld_req *head, *tail;
    int stopped;           /* no more waiting: new ones go on at once */
    atomic_ullong waited;  /* requests that waited, for /metrics */
    atomic_uint waiting;
    ld_req *holding;       /* the holders, newest first */
    double wait_limit;     /* LEAKD_INGEST_WAIT */
    pthread_t watch;       /* turns_watch, while `watching` */
    pthread_cond_t tick;
    int watching, quit;
} turns = {.mu = PTHREAD_MUTEX_INITIALIZER, .tick = PTHREAD_COND_INITIALIZER};

/* The deadline of a body that holds a share of the budget, from when it may be read: 10 s,
 * plus its length at 128 KiB/s (1 Mbit/s). A device's traces report is ~10 KB (its 10 s are
 * 1 KB/s), and at the largest (8 MiB + 128 KiB: 75 s) it asks for the uplink of a poor 3G
 * connection; without it, a client that kept up LEAKD_MIN_UPLOAD_RATE (4 KiB/s) held 8 MiB
 * of the budget for ~35 minutes, and everyone waited behind it (abuse audit 2026-12-03). */
#define LD_TURN_GRACE_S 10.0
#define LD_TURN_RATE (128.0 * 1024)

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

const char *ld_req_header(ld_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

/* A repeat of a stored report (200) or an upload the server failed (5xx) gives its take of the
 * key's quota back, before its answer goes out (a client's next upload may follow the answer
 * at once). One refused for its content (4xx) keeps its count and the bytes it sent: it took
 * the bandwidth the quota guards. But the quota was taken by its Content-Length, before any
 * body byte: the part of it never sent goes back when the request ends (on_completed: a 4xx
 * after the take is answered at the end of its body, which is drained, so nothing is owed
 * back before its answer; bytes drained after it was decided count too). Before, ten
 * requests declaring 1 GiB that sent 54 bytes each locked a key out for a day (abuse audit
 * 2026-12-03). */
static void quota_settle(ld_req *r, unsigned status) {
    if (!r->quota_taken || (status != 200 && status < 500)) return;
    ld_quota_give_back(r->srv->quota, r->who.key_id, r->quota_bytes);
    r->quota_taken = 0;
}

static void set_response(ld_req *r, unsigned status, struct MHD_Response *resp) {
    if (r->resp) MHD_destroy_response(r->resp);
    r->resp = resp;
    r->status = status;
    quota_settle(r, status);
}

void ld_respond_json_text(ld_req *r, unsigned status, char *text) {
    static const char nomem[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}\n";
    struct MHD_Response *resp =
        text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(sizeof nomem - 1, (void *)nomem, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    set_response(r, text ? status : 500, resp);
}

void ld_respond_json(ld_req *r, unsigned status, json_t *body) {
    char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    size_t len = text ? strlen(text) : 0;
    char *with_nl = text ? realloc(text, len + 2) : NULL;
    if (with_nl) {
        with_nl[len] = '\n';
        with_nl[len + 1] = 0;
    } else {
        free(text);
    }
    ld_respond_json_text(r, status, with_nl);
}

void ld_respond_error(ld_req *r, unsigned status, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A JSON string is UTF-8, else json_pack fails and the answer would be a 500: a message
     * cut at its byte count, or one quoting what a client sent, ends before a broken character
     * (a 404 for a long path of accented letters was a 500, audit 2026-12-03). */
    msg[ld_utf8_prefix(msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1)] = 0;
    ld_respond_json(r, status, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
    if (status == 503) atomic_fetch_add(&r->srv->metrics.unavailable, 1);
    /* Said once, in the request's log line. */
    snprintf(r->error_code, sizeof r->error_code, "%.31s", code);
    size_t len = strlen(msg) < sizeof r->error_msg ? strlen(msg) : sizeof r->error_msg - 1;
    len = ld_utf8_prefix(msg, len);
    memcpy(r->error_msg, msg, len);
    r->error_msg[len] = 0;
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

static int suspend_begin(void) {
    pthread_mutex_lock(&inflight.mu);
    int ok = !inflight.closing;
    if (ok) inflight.suspended++;
    pthread_mutex_unlock(&inflight.mu);
    return ok ? 0 : -1;
}

static void suspend_end(void) {
    pthread_mutex_lock(&inflight.mu);
    if (--inflight.suspended == 0) pthread_cond_broadcast(&inflight.idle);
    pthread_mutex_unlock(&inflight.mu);
}

static void respond_stopping(ld_req *r) {
    ld_respond_error(r, 503, "unavailable", "the server is shutting down; retry later");
    ld_respond_retry_after(r, 5);
}

int ld_req_suspend(ld_req *r, void (*then)(ld_req *r)) {
    if (suspend_begin() != 0) {
        respond_stopping(r);
        return -1;
    }
    r->then = then;
    r->suspended = 1;
    MHD_suspend_connection(r->conn);
    return 0;
}

void ld_req_resume(ld_req *r) {
    MHD_resume_connection(r->conn);
    suspend_end();
}

int ld_req_off_loop(ld_req *r, void (*fn)(ld_req *r)) {
    if (r->on_task) return 0;
    r->off_loop = fn;
    return 1;
}

/* Takes `bytes` of the budget for r, whose body may be read from `now` on (locked). */
static void hold(ld_req *r, uint64_t bytes, double now) {
    turns.held += bytes;
    turns.holders++;
    /* no record for the key (out of memory): its bodies are not counted against its share */
    key_share *ks = turns.keys ? ld_key_table_get(turns.keys, r->who.key_id) : NULL;
    if (ks) ks->held += bytes;
    r->turn_key_counted = ks != NULL;
    r->turn_bytes = bytes;
    r->reading_since = now;
    r->turn_deadline = now + LD_TURN_GRACE_S + (double)bytes / LD_TURN_RATE;
    r->turn_prev = NULL;
    r->turn_next = turns.holding;
    if (turns.holding) turns.holding->turn_prev = r;
    turns.holding = r;
}

/* Whether r may take `bytes` now (locked): FITS; SHORT, the budget has not that much left; or
 * KEY_FULL, its key's other requests hold their share. A request goes on when it is alone, and
 * one of a key that holds nothing may take more than the key's share. */
enum { FITS, SHORT, KEY_FULL };
static int fits(const ld_req *r, uint64_t bytes) {
    if (!turns.holders) return FITS;
    if (turns.per_key) {
        const key_share *ks = ld_key_table_find(turns.keys, r->who.key_id);
        if (ks && ks->held && ks->held + bytes > turns.per_key) return KEY_FULL;
    }
    return turns.held + bytes <= turns.budget ? FITS : SHORT;
}

/* A walk of the queue, oldest first, marks the key of each request it passes that stays
 * waiting (locked): a later one of the same key waits for its key, whatever room there is
 * (key_behind). A waiting request's key has its record (made when it queued), and a walk makes
 * none, so none moves during a walk. */
static void walk_start(void) { turns.walk++; }
static int key_behind(const ld_req *w) {
    const key_share *ks = turns.keys ? ld_key_table_find(turns.keys, w->who.key_id) : NULL;
    return ks && ks->walk == turns.walk;
}
static void key_mark(const ld_req *w) {
    key_share *ks = turns.keys ? ld_key_table_find(turns.keys, w->who.key_id) : NULL;
    if (ks) ks->walk = turns.walk;
}

/* The waiting take their shares, oldest first, while the budget has room (locked): the list of
 * them (through next_waiting), to resume once unlocked. Nobody overtakes one the budget is short
 * for; one that waits for its key (its key holds its share, or an older one of its key waits)
 * is passed over. */
static ld_req *admit_waiting(double now) {
    ld_req *go = NULL, **link = &go, **at = &turns.head, *prev = NULL;
    walk_start();
    while (*at) {
        ld_req *w = *at;
        int f = key_behind(w) ? KEY_FULL : fits(w, w->turn_want);
        if (f == SHORT) break;
        if (f == KEY_FULL) {
            key_mark(w);
            prev = w;
            at = &w->next_waiting;
            continue;
        }
        *at = w->next_waiting;
        if (turns.tail == w) turns.tail = prev;
        w->turn_queued = 0;
        hold(w, w->turn_want, now);
        w->next_waiting = NULL;
        *link = w;
        link = &w->next_waiting;
        atomic_fetch_sub(&turns.waiting, 1);
    }
    return go;
}

static void resume_list(ld_req *list) {
    while (list) {
        ld_req *w = list;
        list = w->next_waiting; /* read first: once resumed, w may end at any time */
        ld_req_resume(w);
    }
}

int ld_req_admit(ld_req *r, uint64_t bytes, void (*then)(ld_req *r)) {
    double now = mono();
    r->reading_since = now;
    if (r->turn_bytes || !turns.budget || !bytes) return 0;
    /* for turns_watch, which must not call libmicrohttpd on a connection it does not run */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->turn_fd = ci ? ci->connect_fd : -1;
    pthread_mutex_lock(&turns.mu);
    /* First come, first served: nobody overtakes a waiting request, except one whose key
     * holds its share (nor one of its own key), and one always goes on (a body over the whole
     * budget waits until it is alone). */
    int f = fits(r, bytes);
    walk_start();
    for (ld_req *w = turns.head; w && f == FITS; w = w->next_waiting) {
        if (w->who.key_id == r->who.key_id || (!key_behind(w) && fits(w, w->turn_want) != KEY_FULL)) f = SHORT;
        key_mark(w);
    }
    if (turns.stopped || f == FITS) {
        hold(r, bytes, now);
        pthread_mutex_unlock(&turns.mu);
        return 0;
    }
    if (ld_req_suspend(r, then) != 0) {
        pthread_mutex_unlock(&turns.mu);
        return -1;
    }
    /* its key's record, for the walks (a key that has none and gets none for want of memory is
     * only not known to wait) */
    if (turns.keys) ld_key_table_get(turns.keys, r->who.key_id);
    r->turn_want = bytes;
    r->turn_queued = 1;
    r->next_waiting = NULL;
    if (turns.tail) turns.tail->next_waiting = r;
    else turns.head = r;
    turns.tail = r;
    atomic_fetch_add(&turns.waited, 1);
    atomic_fetch_add(&turns.waiting, 1);
    pthread_mutex_unlock(&turns.mu);
    return 1;
}

/* The request's bytes go back to the budget: the oldest waiting go on while they fit. */
static void turn_end(ld_req *r) {
    /* (a request still waiting cannot end: it is suspended, and suspended ones are resumed
     * before the daemons stop; turn_queued is looked at all the same) */
    if (!r->turn_bytes && !r->turn_queued) return;
    pthread_mutex_lock(&turns.mu);
    if (r->turn_queued) {
        ld_req **p = &turns.head, *prev = NULL;
        while (*p && *p != r) prev = *p, p = &(*p)->next_waiting;
        if (*p) {
            *p = r->next_waiting;
            if (turns.tail == r) turns.tail = prev;
            atomic_fetch_sub(&turns.waiting, 1);
        }
        r->turn_queued = 0;
    }
    if (r->turn_bytes) {
        turns.held -= r->turn_bytes;
        turns.holders--;
        if (r->turn_key_counted) {
            key_share *ks = ld_key_table_find(turns.keys, r->who.key_id);
            ks->held -= r->turn_bytes;
            r->turn_key_counted = 0;
        }
        r->turn_bytes = 0;
        if (r->turn_prev) r->turn_prev->turn_next = r->turn_next;
        else turns.holding = r->turn_next;
        if (r->turn_next) r->turn_next->turn_prev = r->turn_prev;
        r->turn_prev = r->turn_next = NULL;
    }
    ld_req *go = turns.head ? admit_waiting(mono()) : NULL;
    pthread_mutex_unlock(&turns.mu);
    resume_list(go);
}

/* Stopping: whoever still waits for memory is answered 503 once resumed (turn_refused), and
 * nobody waits any more. */
static void turns_stop(void) {
    pthread_mutex_lock(&turns.mu);
    ld_req *list = turns.head;
    turns.head = turns.tail = NULL;
    turns.stopped = 1;
    for (ld_req *r = list; r; r = r->next_waiting) {
        r->turn_queued = 0;
        r->turn_refused = 1;
        atomic_fetch_sub(&turns.waiting, 1);
    }
    pthread_mutex_unlock(&turns.mu);
    resume_list(list);
}

/* An upload that waited LEAKD_INGEST_WAIT seconds for its share, instead of reading its body:
 * the server's load (503), or its own key's, which the key may slow down for (429). */
static void turn_wait_over(ld_req *r) {
    if (r->turn_key_full) {
        ld_respond_error(r, 429, "rate_limited",
                         "this key's other uploads hold all the server's memory one key may use; retry later");
        /* nothing of it was read or judged: not one of the key's reports this minute */
        if (r->quota_taken) ld_quota_give_back(r->srv->quota, r->who.key_id, r->quota_bytes);
        r->quota_taken = 0;
    } else
        ld_respond_error(r, 503, "unavailable", "the server is busy with other uploads; retry later");
    ld_respond_retry_after(r, (int)turns.wait_limit);
}

/* Four times a second, under the budget's lock: a request that has waited LEAKD_INGEST_WAIT
 * seconds leaves the queue and is resumed to be answered 503 (turn_wait_over), which may let
 * those behind it go on; a holder whose body has not all come by its deadline has its socket
 * shut down, which libmicrohttpd sees as the client going away: the request ends, and its
 * share goes back (turn_end). Either is in its list only until it leaves it under this lock,
 * and a holder's request, hence its socket, outlives its place in the list (turn_end runs
 * in on_completed, before libmicrohttpd closes the socket): nothing here reaches a request
 * that has gone, or a descriptor reused. Only the event threads touch a request's
 * connection (libmicrohttpd's calls on it are not thread-safe), so the socket is the one
 * ld_req_admit took. Not the path of LEAKD_MIN_UPLOAD_RATE's drop (on_request returns
 * MHD_NO with a chunk): a holder that sends nothing gets no call to return it from. */
static void *turns_watch(void *arg) {
    (void)arg;
    pthread_mutex_lock(&turns.mu);
    while (!turns.quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&turns.tick, &turns.mu, &ts);
        if (turns.quit) break;
        double now = mono();
        ld_req *over = NULL, **link = &over, *last = NULL;
        while (turns.head && now - turns.head->reading_since >= turns.wait_limit) {
            ld_req *w = turns.head;
            /* Waited for its key's share, or for the budget: judged now, not when it queued
             * (its key's bodies may have ended since, or another key's taken the room). One
             * that would fit but waited behind its key's older request, answered just before
             * it, counts as the key's too. */
            int f = fits(w, w->turn_want);
            w->turn_key_full = f == KEY_FULL || (f == FITS && last && last->who.key_id == w->who.key_id &&
                                                 last->turn_key_full);
            last = w;
            turns.head = w->next_waiting;
            if (!turns.head) turns.tail = NULL;
            w->turn_queued = 0;
            w->then = turn_wait_over; /* it is suspended: read once resumed */
            w->next_waiting = NULL;
            *link = w;
            link = &w->next_waiting;
            atomic_fetch_sub(&turns.waiting, 1);
        }
        ld_req *go = over && turns.head ? admit_waiting(now) : NULL;
        for (ld_req *h = turns.holding; h; h = h->turn_next) {
            if (!h->turn_deadline || now < h->turn_deadline) continue;
            h->turn_deadline = 0;
            if (atomic_load_explicit(&h->body_read, memory_order_relaxed) || h->turn_fd < 0) continue;
            ld_warn("req=%s %s %s: dropping an upload past its deadline: it holds %llu bytes of LEAKD_INGEST_MEMORY "
                    "and its body did not all come in %.0f s (10 s + its length at 128 KiB/s)",
                    h->id, h->method, h->url, (unsigned long long)h->turn_bytes, now - h->reading_since);
            atomic_store_explicit(&h->turn_dropped, 1, memory_order_relaxed);
            atomic_fetch_add(&h->srv->metrics.reports_refused, 1);
            shutdown(h->turn_fd, SHUT_RDWR);
        }
        pthread_mutex_unlock(&turns.mu);
        resume_list(over);
        resume_list(go);
        pthread_mutex_lock(&turns.mu);
    }
    pthread_mutex_unlock(&turns.mu);
    return NULL;
}

static int turns_watch_start(char *err, size_t cap) {
    turns.quit = 0;
    int rc = pthread_create(&turns.watch, NULL, turns_watch, NULL);
    if (rc != 0) {
        snprintf(err, cap, "cannot start the ingest memory's watch: %s", strerror(rc));
        return -1;
    }
    turns.watching = 1;
    return 0;
}

static void turns_watch_stop(void) {
    if (turns.watching) {
        pthread_mutex_lock(&turns.mu);
        turns.quit = 1;
        pthread_cond_signal(&turns.tick);
        pthread_mutex_unlock(&turns.mu);
        pthread_join(turns.watch, NULL);
        turns.watching = 0;
    }
    ld_key_table_free(turns.keys); /* no request holds or waits any more, and the watch is gone */
    turns.keys = NULL;
}

void ld_http_gauges_read(ld_http_gauges *g) {
    g->waited = atomic_load(&turns.waited);
    g->waiting = atomic_load(&turns.waiting);
    pthread_mutex_lock(&turns.mu);
    g->ingest_held = turns.held;
    g->ingest_budget = turns.budget;
    pthread_mutex_unlock(&turns.mu);
    pthread_mutex_lock(&acceptor.mu);
    g->connections_open = acceptor.open;
    g->connection_limit = acceptor.limit;
    pthread_mutex_unlock(&acceptor.mu);
}

/* One key reload for every request that missed before it began; each then checks again. */
static void keywait_run(ld_task *t) {
    (void)t;
    pthread_mutex_lock(&keywait.mu);
    ld_req *list = keywait.head;
    keywait.head = NULL;
    keywait.queued = 0;
    pthread_mutex_unlock(&keywait.mu);
    int failed = ld_auth_reload_after_miss(keywait.srv->auth);
    while (list) {
        ld_req *r = list, *next = r->next_waiting;
        r->key_checked = failed ? 2 : 1;
        ld_req_resume(r);
        list = next;
    }
}

int ld_req_auth(ld_req *r, void (*again)(ld_req *r)) {
    ld_auth_result res = ld_auth_check(r->srv->auth, ld_req_header(r, "Authorization"), r->on_task, &r->who);
    if (res == LD_AUTH_WOULD_WAIT && r->key_checked) res = r->key_checked == 2 ? LD_AUTH_UNAVAILABLE : LD_AUTH_UNKNOWN;
    if (res == LD_AUTH_WOULD_WAIT) {
        /* Suspended, not holding a thread: a flood of unknown keys costs one reload a second. */
        if (ld_req_suspend(r, again) != 0) return -1;
        pthread_mutex_lock(&keywait.mu);
        r->next_waiting = keywait.head;
        keywait.head = r;
        int start = !keywait.queued;
        keywait.queued = 1;
        keywait.srv = r->srv;
        keywait.task.fn = keywait_run;
        pthread_mutex_unlock(&keywait.mu);
        if (start && ld_task_pool_run(r->srv->tasks, &keywait.task) != 0) keywait_run(&keywait.task);
        return 1;
    }
    /* RFC 6750 §3: a 401 challenges for a Bearer token, and says when the one given is bad. */
    switch (res) {
    case LD_AUTH_OK: return 0;
    case LD_AUTH_MISSING:
        ld_respond_error(r, 401, "unauthorized", "an Authorization: Bearer <key> header is required");
        MHD_add_response_header(r->resp, "WWW-Authenticate", "Bearer realm=\"leakd\"");
        break;
    case LD_AUTH_MALFORMED:
        ld_respond_error(r, 401, "unauthorized", "the key is not valid: a Leakwatch key is lw_<kind>_<id>_<secret>");
        MHD_add_response_header(r->resp, "WWW-Authenticate", "Bearer realm=\"leakd\", error=\"invalid_token\"");
        break;
    case LD_AUTH_UNKNOWN:
        ld_respond_error(r, 401, "unauthorized", "the key is not valid: unknown or revoked key");
        MHD_add_response_header(r->resp, "WWW-Authenticate", "Bearer realm=\"leakd\", error=\"invalid_token\"");
        break;
    case LD_AUTH_UNAVAILABLE:
    case LD_AUTH_WOULD_WAIT:
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
        /* not CORS-safelisted, so a browser hides them from the page unless named */
        MHD_add_response_header(r->resp, "Access-Control-Expose-Headers", "Retry-After, X-Request-Id");
    }
    /* With CORS on, every answer depends on the Origin (echoed back, "*" included, or left out):
     * a shared cache must key on it, or it would give one origin's answer to another. */
    if (r->srv->cfg.cors_origins[0]) MHD_add_response_header(r->resp, "Vary", "Origin");
    MHD_add_response_header(r->resp, "X-Request-Id", r->id);
    ld_metrics_request(&r->srv->metrics, r->route, r->status, mono() - r->started);
    /* an upload refused: not another method on its path (a 405 is no report) */
    if (r->status / 100 == 4 && r->route == LD_ROUTE_UPLOAD && strcmp(r->method, "POST") == 0)
        atomic_fetch_add(&r->srv->metrics.reports_refused, 1);
    enum MHD_Result ok = MHD_queue_response(r->conn, r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return ok;
}

/* api.c resolves the path, then the method (a CORS preflight among them), and hands an upload
 * to ingest.c. */
static void route(ld_req *r) {
    r->route = LD_ROUTE_OTHER;
    ld_api_dispatch(r);
}

/* libmicrohttpd decodes the path's %XX before leakd sees it, so a "%2F" inside a segment (a
 * version "2.0/rc1") became a '/' that split it. The path is kept as sent, and api.c decodes
 * each segment once split. libmicrohttpd calls this for the query's names and values too (after
 * turning '+' into ' '): api.c decodes those as it reads them. The request's log line shows the
 * path as sent. */
static size_t keep_escaped(void *cls, struct MHD_Connection *conn, char *s) {
    (void)cls;
    (void)conn;
    return strlen(s);
}

/* libmicrohttpd's own messages, such as a request it refuses before leakd sees it (a malformed
 * Content-Length: it answers 400 itself), go through leakd's log: with its time and role, and,
 * with LEAKD_LOG_FORMAT=json, as one JSON object a line like every other. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    /* What a client did to its own connection (went away, reset it, was closed by the header
     * timeout): one line a connection, which a slow-headers attack turns into a flood of
     * warnings that are not the server's. leakd logs such requests itself (on_completed,
     * conn_watch's header timeout line); these stay for LEAKD_LOG_LEVEL=debug. */
    static const char *const peer_doings[] = {
        "Connection socket is closed when reading request", "The connection was forcibly closed by remote peer",
        "Connection was closed by remote side", "Failed to send data", "Failed to send the response"};
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) msg[--n] = '\0';
    for (size_t i = 0; i < sizeof peer_doings / sizeof peer_doings[0]; i++)
        if (strncmp(msg, peer_doings[i], strlen(peer_doings[i])) == 0) {
            ld_debug("libmicrohttpd: %s", msg);
            return;
        }
    ld_warn("libmicrohttpd: %s", msg);
}

/* Runs a request's blocking step on a task thread, then hands the connection back. */
static void run_off_loop(ld_task *t) {
    ld_req *r = (ld_req *)((char *)t - offsetof(ld_req, task));
    void (*fn)(ld_req *) = r->off_loop;
    r->off_loop = NULL;
    r->on_task = 1;
    fn(r);
    r->on_task = 0;
    ld_req_resume(r);
}

/* Whether the request says a body follows. */
static int has_body(struct MHD_Connection *conn) {
    const char *len = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return (len && strcmp(len, "0") != 0) ||
           MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
}

/* After a handler step on an event thread: suspends the connection for a step off the loop
 * or for another thread's answer, or queues the prepared response, or reads on. `at_end`:
 * the body has been read (the final call). */
static enum MHD_Result step_done(ld_req *r, int at_end) {
    /* its body has all come: no deadline for its share of the memory budget (turns_watch) */
    if (at_end && r->turn_bytes) atomic_store_explicit(&r->body_read, 1, memory_order_relaxed);
    if (r->off_loop) {
        if (ld_req_suspend(r, NULL) != 0) {
            r->off_loop = NULL;
        } else {
            r->suspended_at_end = at_end;
            r->task.fn = run_off_loop;
            /* The pool refuses only once it is stopping, after MHD_stop_daemon: never here. */
            if (ld_task_pool_run(r->srv->tasks, &r->task) != 0) run_off_loop(&r->task);
            return MHD_YES;
        }
    }
    if (r->suspended) {
        r->suspended_at_end = at_end;
        return MHD_YES;
    }
    if (at_end) return queue(r);
    /* Answered from the headers alone. libmicrohttpd closes the connection after an answer
     * queued before its final call, as it cannot tell whether a body was left unread: a
     * request without a body is answered at that final call instead, which follows at once,
     * and its connection stays open for the next request. A refused upload is answered now,
     * its body unread, and closing is then what it needs. */
    if (r->resp && !r->body) return has_body(r->conn) ? queue(r) : MHD_YES;
    if (!r->body && !r->resp) {
        ld_respond_error(r, 500, "internal", "unhandled request");
        return queue(r);
    }
    return MHD_YES;
}

/* Whether the client closed before the rest of the body, having sent everything it will: the
 * body is short of its Content-Length, libmicrohttpd has handed over all it read, and the
 * socket holds only the end of the stream. libmicrohttpd 0.9.75 with epoll takes a read shorter
 * than its buffer to mean the socket is drained; when the client's FIN had already arrived
 * behind that data, no new event comes, and it saw the close only at the connection timeout
 * (30 s), holding the connection and the upload's temp file until then. One peek per chunk of
 * an unfinished body; not under TLS, whose library may hold data the socket no longer has. */
static int body_cut_short(ld_req *r) {
    if (r->srv->cfg.tls_cert[0] || r->body_bytes >= r->content_length) return 0;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    char c;
    return ci && recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* on_request's look at every Content-Length header: the first value, and whether another
 * differs from it. */
typedef struct {
    const char *first;
    int differ;
} clen_scan;

static enum MHD_Result scan_content_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    clen_scan *c = cls;
    if (!key || strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0) return MHD_YES;
    if (!value) value = "";
    if (!c->first) c->first = value;
    else if (strcmp(c->first, value) != 0) c->differ = 1;
    return c->differ ? MHD_NO : MHD_YES;
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
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (ci) ld_conn_mark_busy(ci->socket_context, 1); /* its headers are in */
        /* A request id in the log line and the X-Request-Id answer: instance + counter. */
        static atomic_ullong counter;
        static unsigned instance;
        if (!instance) instance = (unsigned)(getpid() ^ (unsigned)time(NULL) * 2654435761u) | 1u;
        snprintf(r->id, sizeof r->id, "%08x%08llx", instance, (unsigned long long)atomic_fetch_add(&counter, 1));
        /* Two Content-Length headers that differ (RFC 9112 §6.3): where the body ends is
         * unknown. libmicrohttpd takes the first; a proxy in front that took the last would
         * frame the stream differently (request smuggling). Refused before anything reads the
         * length, and the connection closed after the answer: what follows on it cannot be
         * told apart. Repeats of one value are accepted. */
        clen_scan cs = {NULL, 0};
        MHD_get_connection_values(conn, MHD_HEADER_KIND, scan_content_length, &cs);
        const char *clen = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        r->content_length = clen ? strtoull(clen, NULL, 10) : 0;
        *req_cls = r;
        pthread_mutex_lock(&inflight.mu);
        inflight.active++;
        pthread_mutex_unlock(&inflight.mu);
        cors_origin(r);
        if (cs.differ) {
            r->route = LD_ROUTE_OTHER;
            ld_respond_error(r, 400, "bad_request", "conflicting Content-Length headers");
            MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONNECTION, "close");
            /* answered with the body unread, whichever length it has: the client still gets
             * to read the answer (a lingering close, as for a refusal on the headers) */
            if (ci) ld_conn_mark_linger(ci->socket_context);
            return queue(r);
        }
        route(r);
        return step_done(r, 0);
    }
    if (r->suspended) {
        /* Resumed: libmicrohttpd calls again in the phase the connection was suspended in. */
        r->suspended = 0;
        void (*then)(ld_req *) = r->then;
        r->then = NULL;
        if (r->turn_refused) respond_stopping(r); /* it waited for memory until the server stopped */
        else if (then) then(r);
        /* Resumed in the middle of the body (its file had caught up): on with what came since,
         * or with the final call if the body had all come. */
        if (!r->body_bytes || r->suspended_at_end || r->off_loop || r->suspended) return step_done(r, r->suspended_at_end);
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        r->body_bytes += n;
        /* Slow-drip uploads hold a connection: past 10 s, keep up a minimum rate or go. */
        double elapsed = mono() - (r->reading_since > 0 ? r->reading_since : r->started);
        if (elapsed > 10 && s->cfg.min_upload_rate && (double)r->body_bytes / elapsed < (double)s->cfg.min_upload_rate) {
            ld_warn("%s %s: dropping a slow upload (%llu bytes in %.0f s, minimum %llu bytes/s)", method, url,
                    (unsigned long long)r->body_bytes, elapsed, (unsigned long long)s->cfg.min_upload_rate);
            return MHD_NO;
        }
        if (r->body && r->body->chunk(r, upload_data, n) != 0) return MHD_NO;
        if (!r->suspended && body_cut_short(r)) {
            ld_warn("req=%s %s %s: the client closed after %llu of %llu body bytes", r->id, method, url,
                    (unsigned long long)r->body_bytes, (unsigned long long)r->content_length);
            return MHD_NO;
        }
        return MHD_YES;
    }
    if (r->body && !r->resp) r->body->end(r);
    return step_done(r, 1);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    ld_req *r = *req_cls;
    if (!r) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci) ld_conn_mark_busy(ci->socket_context, 0); /* the next request is owed from now */
    /* Answered with its body still coming (a refusal on the headers, to a client that did not
     * wait for 100 Continue): libmicrohttpd closes the connection, and the client must still
     * read the answer (linger.h). */
    if (ci && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && has_body(conn) &&
        (!r->content_length || r->body_bytes < r->content_length))
        ld_conn_mark_linger(ci->socket_context);
    /* One line per request. */
    double ms = (mono() - r->started) * 1e3;
    char who[96] = "-";
    if (r->who.key_id) snprintf(who, sizeof who, "key=%lld app=%s", (long long)r->who.key_id, r->who.app_slug[0] ? r->who.app_slug : "*");
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        /* libmicrohttpd's reason in words: its enum's numbers mean nothing to an operator. A
         * handler's MHD_NO (a dropped slow upload, a body cut short) is WITH_ERROR, logged
         * just before by leakd. */
        char code[32];
        const char *why = toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN  ? "closed by shutdown"
                          : toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out (LEAKD_CONNECTION_TIMEOUT)"
                          : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT    ? "the client closed the connection"
                          : toe == MHD_REQUEST_TERMINATED_READ_ERROR      ? "read error: the client went away"
                          : toe == MHD_REQUEST_TERMINATED_WITH_ERROR      ? "connection error, or ended by leakd"
                                                                          : NULL;
        if (!why) {
            snprintf(code, sizeof code, "code %d", (int)toe);
            why = code;
        }
        ld_warn("req=%s %s %s %u %.1fms in=%llu %s: connection ended before the answer was sent (%s)", r->id, r->method,
                r->url, r->status, ms, (unsigned long long)r->body_bytes, who, why);
    } else if (r->error_code[0])
        ld_log(r->status >= 500 ? LD_WARN : LD_INFO, "req=%s %s %s %u %.1fms in=%llu %s%s%s %s: %s", r->id, r->method,
               r->url, r->status, ms, (unsigned long long)r->body_bytes, who, r->note[0] ? " " : "", r->note,
               r->error_code, r->error_msg);
    else
        ld_info("req=%s %s %s %u %.1fms in=%llu %s%s%s", r->id, r->method, r->url, r->status, ms,
                (unsigned long long)r->body_bytes, who, r->note[0] ? " " : "", r->note);
    /* The bytes read are spent, whatever the outcome (a 200 or a 5xx gave everything back in
     * quota_settle): what the upload did not send goes back. An upload that ended before it
     * had an answer (the client went away) stored nothing, so it does not count as a report
     * either, unless leakd dropped it at its deadline in LEAKD_INGEST_MEMORY: a refusal, which
     * keeps its count like a 4xx. */
    if (r->quota_taken) {
        uint64_t unread = r->body_bytes < r->quota_bytes ? r->quota_bytes - r->body_bytes : 0;
        if (!r->status && !atomic_load_explicit(&r->turn_dropped, memory_order_relaxed))
            ld_quota_give_back(r->srv->quota, r->who.key_id, unread);
        else if (unread)
            ld_quota_give_back_bytes(r->srv->quota, r->who.key_id, unread);
    }
    if (r->body && r->body->cleanup) r->body->cleanup(r);
    if (r->resp) MHD_destroy_response(r->resp);
    turn_end(r);
    free(r);
    *req_cls = NULL;
    pthread_mutex_lock(&inflight.mu);
    if (--inflight.active == 0) pthread_cond_broadcast(&inflight.idle);
    pthread_mutex_unlock(&inflight.mu);
}

static enum MHD_Result on_metrics(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls) {
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    ld_server *s = cls;
    if (!*req_cls && !has_body(conn)) {
        *req_cls = conn; /* answered at the final call, so the connection stays open (step_done) */
        return MHD_YES;
    }
    struct MHD_Response *resp;
    unsigned status = 200;
    if (strcmp(url, "/metrics") != 0) {
        status = 404;
        resp = MHD_create_response_from_buffer(10, (void *)"not found\n", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(resp, "Content-Type", "text/plain");
    } else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        /* as the API answers a method a path does not take (HEAD: as GET, without the body) */
        status = 405;
        resp = MHD_create_response_from_buffer(19, (void *)"method not allowed\n", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(resp, "Content-Type", "text/plain");
        MHD_add_response_header(resp, "Allow", "GET, HEAD");
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

/* Waits (locked) until a connection may be taken; 0 once stopping. */
static int wait_for_slot(void) {
    while (acceptor.open >= acceptor.limit && !atomic_load(&acceptor.stopping)) {
        if (time(NULL) - acceptor.warned >= 10) {
            ld_warn("%u connections open, the limit (LEAKD_CONNECTION_LIMIT): new ones wait until one closes",
                    acceptor.open);
            acceptor.warned = time(NULL);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&acceptor.freed, &acceptor.mu, &ts);
    }
    return !atomic_load(&acceptor.stopping);
}

/* A connection over its address's LEAKD_CONNECTIONS_PER_ADDRESS, just accepted: answered 429
 * and closed, never handed to libmicrohttpd, so it holds no place under LEAKD_CONNECTION_LIMIT.
 * The answer is written before the request is read (a new socket's buffer takes it whole), and
 * the lingerer reads and drops the request while the client reads the answer. Over TLS there
 * is nothing to write it with before a handshake: the socket is closed. */
static void refuse_address(int fd, const struct sockaddr *sa) {
    static const char body[] = "{\"error\":{\"code\":\"rate_limited\",\"message\":\"too many connections from your "
                               "address are open; close some, or retry later\"}}\n";
    char name[64], head[256];
    ld_peers_name(sa, name, sizeof name);
    atomic_fetch_add(acceptor.refused, 1);
    acceptor.refused_unlogged++;
    if (time(NULL) - acceptor.refused_logged >= 10) {
        ld_warn("refused %llu connection(s) over LEAKD_CONNECTIONS_PER_ADDRESS (%u open from one address) "
                "since the last such line; the latest from %s",
                acceptor.refused_unlogged, acceptor.per_address, name);
        acceptor.refused_unlogged = 0;
        acceptor.refused_logged = time(NULL);
    }
    if (acceptor.tls) {
        close(fd);
        return;
    }
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Retry-After: 5\r\nConnection: close\r\n\r\n%s",
                     sizeof body - 1, body);
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
        close(fd);
        return;
    }
    /* one address can open refused connections at will: half the lingerer stays for others */
    ld_linger_close_sparing(lingerer, fd, LD_LINGER_SOCKETS / 2);
}

static void *accept_main(void *arg) {
    (void)arg;
    time_t warned = 0;
    for (;;) {
        pthread_mutex_lock(&acceptor.mu);
        int go = wait_for_slot();
        pthread_mutex_unlock(&acceptor.mu);
        if (!go) break;
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd = accept4(acceptor.fd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0 && !ld_peers_enter(acceptor.peers, (struct sockaddr *)&sa)) {
            refuse_address(fd, (struct sockaddr *)&sa);
            continue;
        }
        if (fd >= 0) {
            /* only this thread adds: the slot waited for above is still free */
            pthread_mutex_lock(&acceptor.mu);
            int k = least_loaded();
            acceptor.per[k]++;
            acceptor.open++;
            pthread_mutex_unlock(&acceptor.mu);
            if (watch) ld_conn_watch_accepted(watch, fd);
            if (MHD_add_connection(api_daemons[k], fd, (struct sockaddr *)&sa, len) != MHD_YES) {
                ld_conn_watch_refused(watch, fd);
                /* libmicrohttpd closed it without starting it, so it will not say it closed */
                ld_peers_leave(acceptor.peers, (struct sockaddr *)&sa);
                pthread_mutex_lock(&acceptor.mu);
                acceptor.per[k]--;
                acceptor.open--;
                pthread_mutex_unlock(&acceptor.mu);
            }
            continue;
        }
        if (atomic_load(&acceptor.stopping)) break;
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        /* Out of descriptors or memory: the connections wait in the backlog meanwhile. */
        if (time(NULL) != warned) {
            ld_warn("cannot accept a connection: %s", strerror(errno));
            warned = time(NULL);
        }
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* The listening socket for `addr`, or -1 with the reason in err. */
static int listen_on(const struct sockaddr_storage *addr, const char *spec, char *err, size_t cap) {
    socklen_t len = addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        (addr->ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0) ||
        bind(fd, (const struct sockaddr *)addr, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        snprintf(err, cap, "cannot listen on %s (in use, or not allowed): %s", spec, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Stops accepting: new connections are refused at once rather than left in the backlog. */
static void acceptor_stop(void) {
    if (acceptor.fd < 0) return;
    atomic_store(&acceptor.stopping, 1);
    shutdown(acceptor.fd, SHUT_RDWR); /* wakes accept() */
    pthread_mutex_lock(&acceptor.mu);
    pthread_cond_broadcast(&acceptor.freed); /* wakes a wait at the connection limit */
    pthread_mutex_unlock(&acceptor.mu);
    if (acceptor.started) pthread_join(acceptor.thread, NULL);
    close(acceptor.fd);
    acceptor.fd = -1;
    acceptor.started = 0;
}

/* What ld_http_start started before it failed (no request has come in yet). */
static void undo_start(ld_server *s) {
    for (int k = 0; k < n_api_daemons; k++) MHD_stop_daemon(api_daemons[k]);
    n_api_daemons = 0;
    turns_watch_stop();
    ld_conn_watch_stop(watch);
    watch = NULL;
    ld_linger_stop(lingerer);
    lingerer = NULL;
    ld_task_pool_stop(s->tasks);
    s->tasks = NULL;
    ld_blob_files_stop(s->blobs);
    s->blobs = NULL;
    acceptor_stop();
    ld_peers_free(acceptor.peers);
    acceptor.peers = NULL;
}

int ld_http_start(ld_server *s, char *err, size_t cap) {
    struct sockaddr_storage addr;
    if (parse_listen(s->cfg.listen, &addr, err, cap)) return -1;
    /* epoll: poll() over every idle keep-alive connection on each wake-up was ~10 % of
     * leakd's CPU at a steady rate, where each wake-up finds one request. libmicrohttpd's
     * epoll mode misses a client that closed in the middle of a body: see body_cut_short. */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
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
    acceptor.fd = listen_on(&addr, s->cfg.listen, err, cap);
    if (acceptor.fd < 0) {
        free(cert);
        free(key);
        return -1;
    }
    s->tasks = ld_task_pool_start(s->cfg.db_pool, err, cap);
    if (s->tasks) s->blobs = ld_blob_files_start(s->tmp_dir, s->cfg.direct_uploads, err, cap);
    if (!s->blobs) {
        free(cert);
        free(key);
        undo_start(s);
        return -1;
    }
    inflight.closing = 0;
    turns.budget = s->cfg.ingest_memory;
    /* a share as large as the budget would only let others overtake: it means no share */
    turns.per_key = s->cfg.ingest_memory_per_key < s->cfg.ingest_memory ? s->cfg.ingest_memory_per_key : 0;
    turns.held = 0;
    turns.holders = 0;
    turns.stopped = 0;
    turns.holding = NULL;
    turns.wait_limit = s->cfg.ingest_wait_s > 0 ? s->cfg.ingest_wait_s : 10;
    turns.keys = turns.per_key ? ld_key_table_new(sizeof(key_share)) : NULL;
    if (turns.per_key && !turns.keys) snprintf(err, cap, "out of memory");
    if ((turns.per_key && !turns.keys) || (turns.budget && turns_watch_start(err, cap) != 0)) {
        free(cert);
        free(key);
        undo_start(s);
        return -1;
    }
    int threads = s->cfg.http_threads < 1 ? 1 : s->cfg.http_threads;
    if (threads > LD_MAX_HTTP_THREADS) {
        ld_warn("LEAKD_HTTP_THREADS=%d: using %d event threads, the most leakd runs", threads, LD_MAX_HTTP_THREADS);
        threads = LD_MAX_HTTP_THREADS;
    }
    acceptor.limit = (unsigned)s->cfg.connection_limit;
    if (acceptor.limit > LD_MAX_HTTP_THREADS * LD_CONNS_PER_DAEMON) {
        ld_warn("LEAKD_CONNECTION_LIMIT=%d: using %d, what %d event threads of at most %d connections hold",
                s->cfg.connection_limit, LD_MAX_HTTP_THREADS * LD_CONNS_PER_DAEMON, LD_MAX_HTTP_THREADS,
                LD_CONNS_PER_DAEMON);
        acceptor.limit = (unsigned)(LD_MAX_HTTP_THREADS * LD_CONNS_PER_DAEMON);
    }
    int needed = (int)((acceptor.limit + LD_CONNS_PER_DAEMON - 1) / LD_CONNS_PER_DAEMON);
    if (needed > threads) {
        ld_info("%d event threads rather than %d (LEAKD_HTTP_THREADS): each holds at most %d of the %u "
                "connections (LEAKD_CONNECTION_LIMIT)",
                needed, threads, LD_CONNS_PER_DAEMON, acceptor.limit);
        threads = needed;
    }
    acceptor.open = 0;
    memset(acceptor.per, 0, sizeof acceptor.per);
    acceptor.per_address = (unsigned)s->cfg.connections_per_address;
    acceptor.tls = cert != NULL;
    acceptor.refused = &s->metrics.address_refusals;
    acceptor.refused_unlogged = 0;
    acceptor.refused_logged = 0;
    if (acceptor.per_address && !(acceptor.peers = ld_peers_new(acceptor.per_address, acceptor.limit, err, cap))) {
        free(cert);
        free(key);
        undo_start(s);
        return -1;
    }
    if (!(lingerer = ld_linger_start(&s->metrics.lingering_closes, err, cap)) ||
        !(watch = ld_conn_watch_start(s->cfg.header_timeout_s, &s->metrics.header_timeouts, lingerer, err, cap))) {
        free(cert);
        free(key);
        undo_start(s);
        return -1;
    }
    for (n_api_daemons = 0; n_api_daemons < threads; n_api_daemons++) {
        /* libmicrohttpd's own limit is above ours: it must never refuse (see acceptor) */
        struct MHD_Daemon *d = MHD_start_daemon(
            /* the logger first: libmicrohttpd's messages about the options after it are its */
            flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
            MHD_OPTION_CONNECTION_LIMIT, acceptor.limit + 16,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.connection_timeout_s,
            /* libmicrohttpd's default size. It zeroes the whole pool at the end of every request
             * on a kept-alive connection: at 128 KiB that was ~6 % of leakd's CPU a traces
             * report, and heap uploads, bounded by the disk, were no faster for the larger reads. */
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
            MHD_OPTION_NOTIFY_CONNECTION, on_connection, (void *)(intptr_t)n_api_daemons,
            MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, (void *)NULL,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert,
            MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
        if (!d) break;
        api_daemons[n_api_daemons] = d;
    }
    free(cert);
    free(key);
    if (n_api_daemons < threads) {
        snprintf(err, cap, "cannot start libmicrohttpd on %s (see the message above)", s->cfg.listen);
        undo_start(s);
        return -1;
    }
    atomic_store(&acceptor.stopping, 0);
    int rc = pthread_create(&acceptor.thread, NULL, accept_main, NULL);
    if (rc != 0) {
        snprintf(err, cap, "cannot start the accepting thread: %s", strerror(rc));
        undo_start(s);
        return -1;
    }
    acceptor.started = 1;
    if (strcmp(s->cfg.metrics_listen, "off") != 0) {
        struct sockaddr_storage maddr;
        if (parse_listen(s->cfg.metrics_listen, &maddr, err, cap)) return -1;
        unsigned mflags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | (maddr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        metrics_daemon = MHD_start_daemon(mflags, 0, NULL, NULL, on_metrics, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                                          MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&maddr,
                                          MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
        if (!metrics_daemon) {
            snprintf(err, cap, "cannot listen on %s for metrics (in use, or not allowed)", s->cfg.metrics_listen);
            return -1;
        }
    }
    return 0;
}

static double remaining(double deadline) {
    double left = deadline - mono();
    return left > 0 ? left : 0;
}

/* Waits (locked) on inflight.idle until `*count` is 0 or the deadline passes (deadline < 0:
 * no limit). */
static void wait_for_zero(int *count, double deadline) {
    while (*count > 0 && (deadline < 0 || remaining(deadline) > 0)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double step = deadline < 0 ? 1.0 : remaining(deadline) < 1.0 ? remaining(deadline) : 1.0;
        ts.tv_sec += (time_t)step;
        ts.tv_nsec += (long)((step - (double)(time_t)step) * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&inflight.idle, &inflight.mu, &ts);
    }
}

void ld_http_stop(ld_server *s, double deadline) {
    if (n_api_daemons) {
        /* No new connections; requests under way may finish until the deadline, but those
         * still waiting to be read are answered 503 at once, like a connection not accepted. */
        acceptor_stop();
        turns_stop();
        pthread_mutex_lock(&inflight.mu);
        wait_for_zero(&inflight.active, deadline);
        if (inflight.active) ld_warn("shutdown: %d request(s) still under way; closing them", inflight.active);
        /* A suspended connection must be resumed before MHD_stop_daemon; its task or batch
         * ends by itself (each has its own timeouts), and none is suspended anew. */
        inflight.closing = 1;
        wait_for_zero(&inflight.suspended, -1);
        pthread_mutex_unlock(&inflight.mu);
        for (int k = 0; k < n_api_daemons; k++) MHD_stop_daemon(api_daemons[k]);
        n_api_daemons = 0;
    }
    turns_watch_stop(); /* after the daemons: no request holds or waits any more */
    ld_conn_watch_stop(watch); /* after the daemons, which said every connection closed */
    watch = NULL;
    ld_linger_stop(lingerer); /* after the watch, which may hand it the last sockets */
    lingerer = NULL;
    acceptor_stop();
    ld_peers_free(acceptor.peers); /* after the daemons, which say when connections close */
    acceptor.peers = NULL;
    ld_task_pool_stop(s->tasks);
    s->tasks = NULL;
    ld_blob_files_stop(s->blobs); /* after the connections, which may still have freed files writing */
    s->blobs = NULL;
    if (metrics_daemon) MHD_stop_daemon(metrics_daemon);
    metrics_daemon = NULL;
}
