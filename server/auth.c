/* auth.c — a sorted array of SHA-256 key hashes behind a read-write lock. */
#define _GNU_SOURCE
#include "auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keys.h"
#include "log.h"
#include "sha256.h"

struct ld_auth {
    ld_pool *pool;
    pthread_rwlock_t lock;
    ld_key_row *rows;          /* sorted by hash */
    size_t n;
    pthread_mutex_t refresh_mu;
    double last_attempt;       /* monotonic seconds */
    int last_failed;           /* the last refresh could not reach PostgreSQL */
    uint64_t generation;       /* refreshes so far (guarded by refresh_mu) */
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_rows(const void *a, const void *b) {
    return memcmp(((const ld_key_row *)a)->hash, ((const ld_key_row *)b)->hash, 32);
}

/* Loads every key; the caller holds refresh_mu. */
static int refresh_locked(ld_auth *a) {
    a->last_attempt = now_s();
    ld_db *db = ld_pool_get(a->pool, 2000);
    int rc = -1;
    ld_key_row *rows = NULL;
    size_t n = 0;
    if (db) {
        ld_status st = ld_keys_load(db, &rows, &n);
        ld_pool_put(a->pool, db);
        if (st == LD_OK) {
            if (n) qsort(rows, n, sizeof *rows, cmp_rows);
            pthread_rwlock_wrlock(&a->lock);
            ld_key_row *old = a->rows;
            a->rows = rows;
            a->n = n;
            pthread_rwlock_unlock(&a->lock);
            ld_keys_free(old);
            rc = 0;
        } else {
            ld_warn("cannot refresh the key cache: %s", ld_strerror(st));
        }
    }
    a->last_failed = rc != 0;
    a->generation++;
    return rc;
}

int ld_auth_refresh(ld_auth *a) {
    pthread_mutex_lock(&a->refresh_mu);
    int rc = refresh_locked(a);
    pthread_mutex_unlock(&a->refresh_mu);
    return rc;
}

ld_auth *ld_auth_new(ld_pool *pool, char *err, size_t cap) {
    ld_auth *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    a->pool = pool;
    pthread_rwlock_init(&a->lock, NULL);
    pthread_mutex_init(&a->refresh_mu, NULL);
    if (ld_auth_refresh(a) != 0) {
        snprintf(err, cap, "cannot load API keys from the database");
        ld_auth_free(a);
        return NULL;
    }
    return a;
}

void ld_auth_free(ld_auth *a) {
    if (!a) return;
    pthread_rwlock_destroy(&a->lock);
    pthread_mutex_destroy(&a->refresh_mu);
    ld_keys_free(a->rows);
    free(a);
}

static int lookup(ld_auth *a, const uint8_t hash[32], ld_principal *who) {
    int found = 0;
    pthread_rwlock_rdlock(&a->lock);
    ld_key_row key;
    memcpy(key.hash, hash, 32);
    const ld_key_row *r = bsearch(&key, a->rows, a->n, sizeof *a->rows, cmp_rows);
    if (r) {
        who->key_id = r->id;
        who->kind = strcmp(r->kind, "admin") == 0 ? LD_KEY_ADMIN : strcmp(r->kind, "read") == 0 ? LD_KEY_READ : LD_KEY_INGEST;
        who->app_id = r->app_id;
        snprintf(who->app_slug, sizeof who->app_slug, "%s", r->app_slug);
        found = 1;
    }
    pthread_rwlock_unlock(&a->lock);
    return found;
}

int ld_auth_reload_after_miss(ld_auth *a) {
    /* Perhaps a key created a moment ago. Wait for the next reload (at most one a second,
     * however many unknown keys arrive: the database is never flooded, and guessing keys gets
     * slow), unless one happened since this miss. */
    pthread_mutex_lock(&a->refresh_mu);
    uint64_t seen = a->generation;
    double wait = a->last_attempt + 1.0 - now_s();
    if (wait > 0) {
        pthread_mutex_unlock(&a->refresh_mu);
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&a->refresh_mu);
    }
    if (a->generation == seen) refresh_locked(a);
    int failed = a->last_failed ? -1 : 0;
    pthread_mutex_unlock(&a->refresh_mu);
    return failed;
}

ld_auth_result ld_auth_check(ld_auth *a, const char *authorization, int may_wait, ld_principal *who) {
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0) return LD_AUTH_MISSING;
    const char *key = authorization + 7;
    while (*key == ' ') key++;
    if (!*key) return LD_AUTH_MISSING;
    char kind[16];
    int64_t id;
    if (strlen(key) > 200 || ld_key_parse(key, kind, &id) != 0) return LD_AUTH_MALFORMED;
    uint8_t hash[32];
    ld_sha256(key, strlen(key), hash);
    if (lookup(a, hash, who)) return LD_AUTH_OK;
    if (!may_wait) return LD_AUTH_WOULD_WAIT;
    int failed = ld_auth_reload_after_miss(a);
    if (lookup(a, hash, who)) return LD_AUTH_OK;
    return failed ? LD_AUTH_UNAVAILABLE : LD_AUTH_UNKNOWN;
}
