/* quota.c — a small open-addressing table of per-key windows behind one mutex. */
#include "quota.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    int64_t key_id;        /* 0 = empty */
    int64_t minute_start;  /* unix seconds */
    int reports;
    int64_t day_start;
    uint64_t bytes;
} entry;

struct ld_quota {
    pthread_mutex_t mu;
    int per_min;
    uint64_t per_day;
    entry *slots;
    size_t cap, used;
};

ld_quota *ld_quota_new(int reports_per_min, uint64_t bytes_per_day) {
    ld_quota *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->cap = 1024;
    q->slots = calloc(q->cap, sizeof *q->slots);
    if (!q->slots) {
        free(q);
        return NULL;
    }
    q->per_min = reports_per_min;
    q->per_day = bytes_per_day;
    pthread_mutex_init(&q->mu, NULL);
    return q;
}

void ld_quota_free(ld_quota *q) {
    if (!q) return;
    pthread_mutex_destroy(&q->mu);
    free(q->slots);
    free(q);
}

static entry *slot(ld_quota *q, int64_t key) {
    size_t i = (size_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 20) & (q->cap - 1);
    while (q->slots[i].key_id && q->slots[i].key_id != key) i = (i + 1) & (q->cap - 1);
    return &q->slots[i];
}

static void grow(ld_quota *q) {
    entry *old = q->slots;
    size_t oldcap = q->cap;
    entry *n = calloc(oldcap * 2, sizeof *n);
    if (!n) return; /* stay at this size: lookups still work while not full */
    q->slots = n;
    q->cap = oldcap * 2;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key_id) *slot(q, old[i].key_id) = old[i];
    free(old);
}

static void give_back(ld_quota *q, int64_t key_id, int report, uint64_t bytes) {
    if (q->per_min <= 0 && q->per_day == 0) return;
    pthread_mutex_lock(&q->mu);
    entry *e = slot(q, key_id);
    if (e->key_id == key_id) {
        if (report && e->reports > 0) e->reports--;
        e->bytes = e->bytes > bytes ? e->bytes - bytes : 0;
    }
    pthread_mutex_unlock(&q->mu);
}

void ld_quota_give_back(ld_quota *q, int64_t key_id, uint64_t bytes) { give_back(q, key_id, 1, bytes); }

void ld_quota_give_back_bytes(ld_quota *q, int64_t key_id, uint64_t bytes) { give_back(q, key_id, 0, bytes); }

int ld_quota_take(ld_quota *q, int64_t key_id, uint64_t bytes) {
    if (q->per_min <= 0 && q->per_day == 0) return 0;
    int64_t now = (int64_t)time(NULL);
    int wait = 0;
    pthread_mutex_lock(&q->mu);
    if (q->used * 2 >= q->cap) grow(q);
    entry *e = slot(q, key_id);
    if (!e->key_id) {
        if (q->used + 1 >= q->cap) { /* full and could not grow: do not limit */
            pthread_mutex_unlock(&q->mu);
            return 0;
        }
        e->key_id = key_id;
        e->minute_start = e->day_start = now;
        q->used++;
    }
    if (now - e->minute_start >= 60) {
        e->minute_start = now;
        e->reports = 0;
    }
    if (now - e->day_start >= 86400) {
        e->day_start = now;
        e->bytes = 0;
    }
    if (q->per_min > 0 && e->reports >= q->per_min) wait = (int)(60 - (now - e->minute_start));
    else if (q->per_day && e->bytes + bytes > q->per_day) wait = (int)(86400 - (now - e->day_start));
    if (!wait) {
        e->reports++;
        e->bytes += bytes;
    }
    pthread_mutex_unlock(&q->mu);
    return wait > 0 ? wait : wait < 0 ? 1 : 0;
}
