/* quota.c — per-key windows in a key table, behind one mutex. */
#include "quota.h"

#include "key_table.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    int64_t minute_start; /* unix seconds; 0: a new record */
    int reports;
    int64_t day_start;
    uint64_t bytes;
} window;

struct ld_quota {
    pthread_mutex_t mu;
    int per_min;
    uint64_t per_day;
    ld_key_table *keys;
};

ld_quota *ld_quota_new(int reports_per_min, uint64_t bytes_per_day) {
    ld_quota *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->keys = ld_key_table_new(sizeof(window));
    if (!q->keys) {
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
    ld_key_table_free(q->keys);
    free(q);
}

static void give_back(ld_quota *q, int64_t key_id, int report, uint64_t bytes) {
    if (q->per_min <= 0 && q->per_day == 0) return;
    pthread_mutex_lock(&q->mu);
    window *e = ld_key_table_find(q->keys, key_id);
    if (e) {
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
    window *e = ld_key_table_get(q->keys, key_id);
    if (!e) { /* no memory for its record: do not limit */
        pthread_mutex_unlock(&q->mu);
        return 0;
    }
    if (!e->minute_start) e->minute_start = e->day_start = now;
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
