/* conn_watch.c — see conn_watch.h. */
#define _GNU_SOURCE

#include "conn_watch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

struct ld_conn_mark {
    ld_conn_mark *prev, *next;
    int fd;                  /* libmicrohttpd's descriptor: finds the mark when it starts */
    int own;                 /* our dup of it: the one shut down, closed in ld_conn_watch_closed */
    int shut;                /* shut down once already */
    atomic_int linger;       /* answered with its body unread: closed through the lingerer */
    atomic_int busy;         /* a request's headers are in; its answer is not done */
    atomic_llong since_ms;   /* when the connection last began to owe a request */
    atomic_int answered;     /* had a request answered: it owes its next one (kept alive) */
};

struct ld_conn_watch {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    ld_conn_mark *pending;   /* accepted, not yet started by libmicrohttpd */
    ld_conn_mark *live;      /* started */
    long long timeout_ms;    /* 0: none times out */
    atomic_ullong *closed;
    ld_linger *linger;
    int stopping;
    pthread_t thread;
    /* The log of the connections it ends, at most a line a second (slowloris: thousands). */
    long long logged_ms;          /* when the last line was written; 0: never */
    unsigned long long unlogged;  /* ended since then, and not named in a line */
};

/* What the sweep ended, for the log. */
typedef struct {
    unsigned n;                  /* that never sent a whole request */
    unsigned idle;               /* kept alive after an answer, and sent no next request */
    char peer[INET6_ADDRSTRLEN]; /* the first of the n's address; "" when unknown */
} swept;

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void link_in(ld_conn_mark **head, ld_conn_mark *m) {
    m->prev = NULL;
    m->next = *head;
    if (*head) (*head)->prev = m;
    *head = m;
}

static void unlink_from(ld_conn_mark **head, ld_conn_mark *m) {
    if (m->prev) m->prev->next = m->next;
    else *head = m->next;
    if (m->next) m->next->prev = m->prev;
    m->prev = m->next = NULL;
}

static ld_conn_mark *find_pending(ld_conn_watch *w, int fd) {
    for (ld_conn_mark *m = w->pending; m; m = m->next)
        if (m->fd == fd) return m;
    return NULL;
}

static void free_mark(ld_conn_watch *w, ld_conn_mark *m) {
    if (atomic_load(&m->linger) && !m->shut) ld_linger_close(w->linger, m->own);
    else close(m->own);
    free(m);
}

static void free_all(ld_conn_watch *w, ld_conn_mark **head) {
    while (*head) {
        ld_conn_mark *m = *head;
        unlink_from(head, m);
        free_mark(w, m);
    }
}

/* The numeric address of the peer of `fd` into buf ("" when it is not known). */
static void peer_address(int fd, char *buf, size_t cap) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    buf[0] = '\0';
    if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0) return;
    const void *a = sa.ss_family == AF_INET    ? (const void *)&((struct sockaddr_in *)&sa)->sin_addr
                    : sa.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&sa)->sin6_addr
                                               : NULL;
    if (!a || !inet_ntop(sa.ss_family, a, buf, (socklen_t)cap)) buf[0] = '\0';
}

/* Shuts down what owes a request past the timeout (locked), adding to *out. */
static void sweep(ld_conn_watch *w, ld_conn_mark *head, long long now, swept *out) {
    for (ld_conn_mark *m = head; m; m = m->next) {
        if (m->shut || atomic_load(&m->busy) || now - atomic_load(&m->since_ms) < w->timeout_ms) continue;
        if (atomic_load(&m->answered)) {
            /* Its next request has come and waits unread, its event thread busy (a stall
             * holds them all): a shutdown now would fail a request sent while the connection
             * was open. It now owes that request's headers, with the whole timeout. */
            int unread = 0;
            if (ioctl(m->own, FIONREAD, &unread) == 0 && unread > 0) {
                atomic_store(&m->since_ms, now);
                atomic_store(&m->answered, 0);
                continue;
            }
            out->idle++; /* an idle keep-alive connection: routine, not worth an info line */
        } else {
            if (out->n == 0) peer_address(m->own, out->peer, sizeof out->peer); /* before: a shut one has none */
            out->n++;
        }
        /* Counted before the shutdown: a client that sees its connection end and then reads
         * /metrics must find it there (the count once came after the whole sweep, and a test
         * on a busy machine read 1 of 4). */
        if (w->closed) atomic_fetch_add(w->closed, 1);
        shutdown(m->own, SHUT_RDWR);
        m->shut = 1;
    }
}

/* Logs how many were ended and not yet logged (the watch's thread, or once it stopped). */
static void log_unlogged(ld_conn_watch *w) {
    if (!w->unlogged) return;
    ld_info("closed %llu more connection(s) whose request headers were not complete within LEAKD_HEADER_TIMEOUT (%g s); "
            "not logged one by one",
            w->unlogged, (double)w->timeout_ms / 1e3);
    w->unlogged = 0;
}

/* Logs what a sweep ended: libmicrohttpd's own line about it ("detected connection closure")
 * reads as if the client closed. A line names one connection; the others ended within the same
 * second are counted in the next line, so a slowloris attack cannot flood the log. */
static void log_swept(ld_conn_watch *w, const swept *s, long long now) {
    w->unlogged += s->n;
    if (!w->unlogged || (w->logged_ms && now - w->logged_ms < 1000)) return;
    if (s->n) {
        unsigned long long more = w->unlogged - 1;
        char also[96] = "";
        if (more)
            snprintf(also, sizeof also, "; and %llu more for the same reason, not logged one by one", more);
        ld_info("closed a connection from %s: its request headers were not complete within LEAKD_HEADER_TIMEOUT (%g s) "
                "of its accept%s",
                s->peer[0] ? s->peer : "an unknown address", (double)w->timeout_ms / 1e3, also);
        w->unlogged = 0;
    } else {
        log_unlogged(w);
    }
    w->logged_ms = now;
}

static void *watch_main(void *arg) {
    ld_conn_watch *w = arg;
    /* a quarter of the timeout, between 50 ms and 1 s: a connection ends at most that late */
    long long step = w->timeout_ms ? w->timeout_ms / 4 : 1000;
    if (step < 50) step = 50;
    if (step > 1000) step = 1000;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(step % 1000) * 1000000L;
        ts.tv_sec += (time_t)(step / 1000) + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&w->wake, &w->mu, &ts);
        if (w->stopping) break;
        if (!w->timeout_ms) continue;
        long long now = now_ms();
        swept s = {0, 0, ""};
        sweep(w, w->live, now, &s);
        sweep(w, w->pending, now, &s);
        /* unlocked: a log that is slow to write must not hold up the accepting thread */
        pthread_mutex_unlock(&w->mu);
        log_swept(w, &s, now);
        if (s.idle)
            ld_debug("closed %u idle kept-alive connection(s) after LEAKD_HEADER_TIMEOUT (%g s)", s.idle,
                     (double)w->timeout_ms / 1e3);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

ld_conn_watch *ld_conn_watch_start(double timeout_s, atomic_ullong *closed, ld_linger *linger, char *err,
                                   size_t cap) {
    ld_conn_watch *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, NULL);
    w->timeout_ms = timeout_s > 0 ? (long long)(timeout_s * 1000) : 0;
    if (timeout_s > 0 && w->timeout_ms < 1) w->timeout_ms = 1;
    w->closed = closed;
    w->linger = linger;
    int rc = pthread_create(&w->thread, NULL, watch_main, w);
    if (rc != 0) {
        snprintf(err, cap, "cannot start the connection watch: %s", strerror(rc));
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

void ld_conn_watch_stop(ld_conn_watch *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    log_unlogged(w);
    free_all(w, &w->pending);
    free_all(w, &w->live);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

int ld_conn_watch_accepted(ld_conn_watch *w, int fd) {
    if (!w) return -1;
    ld_conn_mark *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->fd = fd;
    m->own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (m->own < 0) {
        free(m);
        return -1;
    }
    atomic_store(&m->since_ms, now_ms());
    pthread_mutex_lock(&w->mu);
    /* one libmicrohttpd dropped before starting it (out of memory) had this number */
    ld_conn_mark *stale = find_pending(w, fd);
    if (stale) unlink_from(&w->pending, stale);
    link_in(&w->pending, m);
    pthread_mutex_unlock(&w->mu);
    if (stale) free_mark(w, stale);
    return 0;
}

void ld_conn_watch_refused(ld_conn_watch *w, int fd) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    ld_conn_mark *m = find_pending(w, fd);
    if (m) unlink_from(&w->pending, m);
    pthread_mutex_unlock(&w->mu);
    if (m) free_mark(w, m);
}

ld_conn_mark *ld_conn_watch_started(ld_conn_watch *w, int fd) {
    if (!w) return NULL;
    pthread_mutex_lock(&w->mu);
    ld_conn_mark *m = find_pending(w, fd);
    if (m) {
        unlink_from(&w->pending, m);
        link_in(&w->live, m);
    }
    pthread_mutex_unlock(&w->mu);
    return m;
}

void ld_conn_watch_closed(ld_conn_watch *w, ld_conn_mark *m) {
    if (!w || !m) return;
    pthread_mutex_lock(&w->mu);
    unlink_from(&w->live, m);
    pthread_mutex_unlock(&w->mu);
    free_mark(w, m);
}

void ld_conn_mark_busy(ld_conn_mark *m, int busy) {
    if (!m) return;
    if (!busy) {
        atomic_store(&m->since_ms, now_ms());
        atomic_store(&m->answered, 1);
    }
    atomic_store(&m->busy, busy);
}

void ld_conn_mark_linger(ld_conn_mark *m) {
    if (m) atomic_store(&m->linger, 1);
}
