/* pool.c — connections are opened on demand up to the limit and reused. */
#define _GNU_SOURCE
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

struct ld_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *url;
    int size;      /* the limit */
    int db_timeout_ms; /* each connection's (ld_db_set_timeout) */
    int open;      /* connections that exist, idle or lent */
    ld_db **idle;
    int nidle;
};

ld_pool *ld_pool_new(const char *url, int size, int db_timeout_ms) {
    ld_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->url = strdup(url);
    p->idle = calloc((size_t)size, sizeof *p->idle);
    if (!p->url || !p->idle) {
        free(p->url);
        free(p->idle);
        free(p);
        return NULL;
    }
    p->size = size;
    p->db_timeout_ms = db_timeout_ms;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    return p;
}

void ld_pool_free(ld_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->nidle; i++) ld_db_close(p->idle[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->idle);
    free(p->url);
    free(p);
}

ld_db *ld_pool_get(ld_pool *p, int wait_ms) {
    return ld_pool_get_within(p, wait_ms, 0);
}

ld_db *ld_pool_get_within(ld_pool *p, int wait_ms, int answer_ms) {
    int timeout_ms = answer_ms > 0 ? answer_ms : p->db_timeout_ms;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    ld_db *db = NULL;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->nidle > 0) {
            db = p->idle[--p->nidle];
            break;
        }
        if (p->open < p->size) {
            p->open++;
            break; /* connect outside the lock */
        }
        if (pthread_cond_timedwait(&p->cv, &p->mu, &deadline) == ETIMEDOUT) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (db) {
        /* The check waits as long as the caller will: under the pool's 30 s, a probe of a
         * PostgreSQL that hangs took 35 s (the check, then a reconnect). */
        ld_db_set_timeout(db, timeout_ms);
        if (ld_db_check(db) == LD_OK) return db;
        ld_db_close(db);
    } else {
        char err[512];
        db = ld_db_connect(p->url, err, sizeof err);
        if (db) {
            ld_db_set_timeout(db, timeout_ms);
            return db;
        }
        ld_warn("database unreachable: %s", err);
    }
    pthread_mutex_lock(&p->mu);
    p->open--;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void ld_pool_put(ld_pool *p, ld_db *db) {
    if (!db) return;
    int bad = PQstatus(ld_db_conn(db)) != CONNECTION_OK || PQtransactionStatus(ld_db_conn(db)) != PQTRANS_IDLE;
    if (!bad) ld_db_set_timeout(db, p->db_timeout_ms); /* a caller may have changed it */
    pthread_mutex_lock(&p->mu);
    if (bad) {
        p->open--;
    } else {
        p->idle[p->nidle++] = db;
        db = NULL;
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (db) ld_db_close(db);
}
