/* watcher.c — the watch set and the batched retained check (ARCHITECTURE step 2). */
#define _GNU_SOURCE
#include "watcher.h"

#include "uuid.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ST_WATCHED, ST_CHECKING, ST_RETAINED } entry_state;

typedef struct entry {
    char key[37];
    char *description;
    lw_handle handle;
    int64_t watch_uptime;
    int64_t retained_uptime;
    entry_state state;
    uint64_t seq;       /* watch order */
    size_t slot;        /* index in w->set */
    int forgotten;      /* forget_before hit it while its batch was running */
    int reclaimed;      /* the current round found it reclaimed */
    struct entry *next; /* chains entries that left the set, to release them unlocked */
} entry;

struct lwc_watcher {
    pthread_mutex_t mu;          /* guards everything below except the batch_* fields */
    lw_runtime rt;
    lw_clock clock;
    lw_executor exec;
    lwc_watcher_params p;
    lwc_log log;
    entry **set;                 /* unordered; entry->slot is its index */
    size_t n, cap;
    size_t n_retained;
    int64_t next_check;          /* uptime the posted check task is due at; INT64_MAX: none */
    int batch_active;
    uint64_t next_seq;
    uint64_t reclaimed_total, refused_total;
    /* The running batch: touched only by the executor thread (round tasks run there), and
     * sized with the set so starting a batch never allocates. */
    entry **batch;
    size_t batch_n;
    unsigned round;
};

lw_sdk_status lwc_watcher_params_from_config(lwc_watcher_params *out, const lw_config *c) {
    if (!out || !c) return LW_SDK_ERR_USAGE;
    if (c->retained_delay_ms < 0 || c->gc_round_interval_ms < 0) return LW_SDK_ERR_USAGE;
    memset(out, 0, sizeof *out);
    out->retained_delay_ms = c->retained_delay_ms ? c->retained_delay_ms : LWC_DEFAULT_RETAINED_DELAY_MS;
    out->gc_rounds = c->gc_rounds ? c->gc_rounds : LWC_DEFAULT_GC_ROUNDS;
    out->gc_round_interval_ms = c->gc_round_interval_ms ? c->gc_round_interval_ms : LWC_DEFAULT_GC_ROUND_INTERVAL_MS;
    out->max_watched = c->max_watched ? c->max_watched : LWC_DEFAULT_MAX_WATCHED;
    return LW_SDK_OK;
}

/* ---- the set (callers hold w->mu) --------------------------------------------------------- */

static void set_remove(lwc_watcher *w, entry *e) {
    size_t i = e->slot;
    w->set[i] = w->set[--w->n];
    w->set[i]->slot = i;
    if (e->state == ST_RETAINED) w->n_retained--;
}

static void free_entry(entry *e) {
    free(e->description);
    free(e);
}

/* Releases and frees a chain of entries that already left the set. No lock held. */
static void release_chain(lwc_watcher *w, entry *e) {
    while (e) {
        entry *next = e->next;
        if (w->rt.release) w->rt.release(w->rt.ctx, e->handle);
        free_entry(e);
        e = next;
    }
}

static void check_task(void *arg);

/* Posts a check for the earliest watched object not yet checked, unless one is posted for
 * that time or earlier. */
static void schedule_next_locked(lwc_watcher *w, int64_t now) {
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < w->n; i++)
        if (w->set[i]->state == ST_WATCHED && w->set[i]->watch_uptime < first) first = w->set[i]->watch_uptime;
    if (first == INT64_MAX) return;
    int64_t due = first > INT64_MAX - w->p.retained_delay_ms ? INT64_MAX : first + w->p.retained_delay_ms;
    if (due >= w->next_check) return;
    w->next_check = due;
    w->exec.post(w->exec.ctx, due > now ? due - now : 0, check_task, w);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

lw_sdk_status lwc_watcher_new(lwc_watcher **out, const lw_runtime *runtime, const lw_clock *clock,
                              const lw_executor *executor, const lwc_watcher_params *params, lwc_log log) {
    if (!out) return LW_SDK_ERR_USAGE;
    *out = NULL;
    if (!runtime || !runtime->is_reclaimed || !runtime->run_gc || !runtime->mark_retained) return LW_SDK_ERR_USAGE;
    if (!clock || !clock->uptime_ms || !executor || !executor->post || !params) return LW_SDK_ERR_USAGE;
    if (params->retained_delay_ms < 0 || params->gc_round_interval_ms < 0 || params->max_watched == 0)
        return LW_SDK_ERR_USAGE;
    lwc_watcher *w = calloc(1, sizeof *w);
    if (!w) return LW_SDK_ERR_NOMEM;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        free(w);
        return LW_SDK_ERR_RUNTIME;
    }
    w->rt = *runtime;
    w->clock = *clock;
    w->exec = *executor;
    w->p = *params;
    w->log = log;
    w->next_check = INT64_MAX;
    *out = w;
    return LW_SDK_OK;
}

void lwc_watcher_free(lwc_watcher *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        if (w->rt.release) w->rt.release(w->rt.ctx, w->set[i]->handle);
        free_entry(w->set[i]);
    }
    free(w->set);
    free(w->batch);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* ---- watch -------------------------------------------------------------------------------- */

lw_sdk_status lwc_watcher_watch(lwc_watcher *w, lw_handle handle, const char *description, char key_out[37]) {
    if (!w) return LW_SDK_ERR_USAGE;
    if (!description) description = "";
    lw_sdk_status rc = LW_SDK_ERR_NOMEM;
    int locked = 0;
    entry *e = calloc(1, sizeof *e);
    if (!e) goto out;
    size_t len = strnlen(description, LWC_MAX_DESCRIPTION);
    /* Cut at a UTF-8 character boundary. */
    if (description[len] != '\0')
        while (len > 0 && ((unsigned char)description[len] & 0xc0) == 0x80) len--;
    e->description = malloc(len + 1);
    if (!e->description) goto out;
    memcpy(e->description, description, len);
    e->description[len] = '\0';
    if (lw__uuid4(e->key) != 0) {
        lwc_logf(&w->log, LW_LOG_ERROR, "watcher: no random bytes for a key: %s", strerror(errno));
        rc = LW_SDK_ERR_IO;
        goto out;
    }
    e->handle = handle;
    e->state = ST_WATCHED;
    e->retained_uptime = -1;
    e->watch_uptime = w->clock.uptime_ms(w->clock.ctx);

    pthread_mutex_lock(&w->mu);
    locked = 1;
    if (w->n >= w->p.max_watched) {
        w->refused_total++;
        /* Log the 1st, 2nd, 4th, 8th ... refusal: a leak in a loop must not flood the log. */
        if ((w->refused_total & (w->refused_total - 1)) == 0)
            lwc_logf(&w->log, LW_LOG_WARN, "watcher: %zu objects watched (max_watched); %llu watch(es) refused so far",
                    w->n, (unsigned long long)w->refused_total);
        rc = LW_SDK_ERR_LIMIT;
        goto out;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        if (cap > w->p.max_watched) cap = w->p.max_watched;
        entry **set = realloc(w->set, cap * sizeof *set);
        if (!set) goto out;
        w->set = set;
        entry **batch = realloc(w->batch, cap * sizeof *batch);
        if (!batch) goto out; /* the set keeps its larger block; cap stays, so this is retried */
        w->batch = batch;
        w->cap = cap;
    }
    e->slot = w->n;
    e->seq = w->next_seq++;
    w->set[w->n++] = e;
    if (key_out) memcpy(key_out, e->key, sizeof e->key);
    int64_t due = e->watch_uptime + w->p.retained_delay_ms;
    if (due < w->next_check) {
        w->next_check = due;
        w->exec.post(w->exec.ctx, w->p.retained_delay_ms, check_task, w);
    }
    e = NULL;
    rc = LW_SDK_OK;
out:
    if (locked) pthread_mutex_unlock(&w->mu);
    if (e) free_entry(e);
    return rc;
}

/* ---- the batched check -------------------------------------------------------------------- */

static void round_task(void *arg);

static void finish_batch(lwc_watcher *w, size_t newly_retained) {
    int64_t now = w->clock.uptime_ms(w->clock.ctx);
    pthread_mutex_lock(&w->mu);
    w->batch_active = 0;
    w->batch_n = 0;
    size_t retained_now = w->n_retained;
    schedule_next_locked(w, now); /* objects watched while the batch ran */
    pthread_mutex_unlock(&w->mu);
    if (newly_retained)
        lwc_logf(&w->log, LW_LOG_INFO, "watcher: %zu object(s) retained, %zu retained in all", newly_retained, retained_now);
    if (w->p.on_batch_done) w->p.on_batch_done(w->p.user, retained_now, newly_retained);
}

/* One round: (after round 0) one GC, then every object of the batch is checked. Runs on the
 * executor thread with no lock held while the adapter is called. */
static void run_round(lwc_watcher *w) {
    for (;;) {
        if (w->round > 0 && w->rt.run_gc(w->rt.ctx) != 0)
            lwc_logf(&w->log, LW_LOG_WARN, "watcher: the runtime's GC failed (round %u); checking anyway", w->round);
        for (size_t i = 0; i < w->batch_n; i++)
            w->batch[i]->reclaimed = w->rt.is_reclaimed(w->rt.ctx, w->batch[i]->handle) == 1;

        entry *gone = NULL;
        size_t kept = 0, reclaimed = 0;
        pthread_mutex_lock(&w->mu);
        for (size_t i = 0; i < w->batch_n; i++) {
            entry *e = w->batch[i];
            if (e->reclaimed || e->forgotten) {
                reclaimed += e->reclaimed;
                set_remove(w, e);
                e->next = gone;
                gone = e;
            } else {
                w->batch[kept++] = e;
            }
        }
        w->reclaimed_total += reclaimed;
        pthread_mutex_unlock(&w->mu);
        release_chain(w, gone);
        w->batch_n = kept;

        if (kept == 0) {
            finish_batch(w, 0);
            return;
        }
        if (w->round >= w->p.gc_rounds) {
            int64_t now = w->clock.uptime_ms(w->clock.ctx);
            for (size_t i = 0; i < kept; i++) w->rt.mark_retained(w->rt.ctx, w->batch[i]->handle, now);
            size_t retained = 0;
            gone = NULL;
            pthread_mutex_lock(&w->mu);
            for (size_t i = 0; i < kept; i++) {
                entry *e = w->batch[i];
                if (e->forgotten) { /* forget_before ran on another thread meanwhile */
                    set_remove(w, e);
                    e->next = gone;
                    gone = e;
                    continue;
                }
                e->state = ST_RETAINED;
                e->retained_uptime = now;
                retained++;
            }
            w->n_retained += retained;
            pthread_mutex_unlock(&w->mu);
            release_chain(w, gone);
            finish_batch(w, retained);
            return;
        }
        w->round++;
        if (w->round > 1) {
            /* Give the runtime time between collections (finalizers, reference processing). */
            w->exec.post(w->exec.ctx, w->p.gc_round_interval_ms, round_task, w);
            return;
        }
        /* Round 1 follows the first check at once. */
    }
}

static void round_task(void *arg) {
    run_round(arg);
}

static void check_task(void *arg) {
    lwc_watcher *w = arg;
    pthread_mutex_lock(&w->mu);
    w->next_check = INT64_MAX;
    pthread_mutex_unlock(&w->mu);
    lwc_watcher_check_due(w, w->clock.uptime_ms(w->clock.ctx));
}

void lwc_watcher_check_due(lwc_watcher *w, int64_t now) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    if (w->batch_active) {
        pthread_mutex_unlock(&w->mu);
        return;
    }
    /* Objects due a little later join this batch (checked at most `window` early): screens
     * destroyed together then cost one series of GCs, not one each. */
    int64_t window = w->p.gc_round_interval_ms * (int64_t)(w->p.gc_rounds ? w->p.gc_rounds : 1);
    if (window < 100) window = 100;
    size_t n = 0;
    for (size_t i = 0; i < w->n; i++) {
        entry *e = w->set[i];
        if (e->state == ST_WATCHED && now - e->watch_uptime >= w->p.retained_delay_ms - window) {
            e->state = ST_CHECKING;
            e->forgotten = 0;
            w->batch[n++] = e;
        }
    }
    if (n == 0) {
        schedule_next_locked(w, now);
        pthread_mutex_unlock(&w->mu);
        return;
    }
    w->batch_active = 1;
    w->batch_n = n;
    w->round = 0;
    pthread_mutex_unlock(&w->mu);
    lwc_logf(&w->log, LW_LOG_DEBUG, "watcher: checking %zu object(s)", n);
    run_round(w);
}

/* ---- queries and forgetting ----------------------------------------------------------------- */

size_t lwc_watcher_retained_count(lwc_watcher *w) {
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    size_t n = w->n_retained;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void lwc_watcher_get_stats(lwc_watcher *w, lwc_watcher_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    out->watched = w->n;
    out->retained = w->n_retained;
    out->reclaimed = w->reclaimed_total;
    out->refused = w->refused_total;
    pthread_mutex_unlock(&w->mu);
}

size_t lwc_watcher_forget_before(lwc_watcher *w, int64_t dump_uptime_ms) {
    if (!w) return 0;
    entry *gone = NULL;
    size_t count = 0;
    pthread_mutex_lock(&w->mu);
    /* Downwards, so set_remove's swap only moves entries already visited. */
    for (size_t i = w->n; i-- > 0;) {
        entry *e = w->set[i];
        if (e->watch_uptime > dump_uptime_ms) continue;
        if (e->state == ST_CHECKING) {
            if (!e->forgotten) count++;
            e->forgotten = 1; /* the batch drops it when its round ends */
            continue;
        }
        set_remove(w, e);
        e->next = gone;
        gone = e;
        count++;
    }
    pthread_mutex_unlock(&w->mu);
    release_chain(w, gone);
    if (count) lwc_logf(&w->log, LW_LOG_DEBUG, "watcher: %zu object(s) watched before the dump left the set", count);
    return count;
}

static int by_seq(const void *a, const void *b) {
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void lwc_retained_list_free(lwc_retained_list *list) {
    if (!list) return;
    for (size_t i = 0; i < list->count; i++) free(list->items[i].description);
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

lw_sdk_status lwc_watcher_retained_list(lwc_watcher *w, int64_t dump_uptime_ms, lwc_retained_list *out) {
    if (!out) return LW_SDK_ERR_USAGE;
    out->items = NULL;
    out->count = 0;
    if (!w) return LW_SDK_ERR_USAGE;
    lw_sdk_status rc = LW_SDK_ERR_NOMEM;
    const entry **sorted = NULL;
    pthread_mutex_lock(&w->mu);
    size_t n = 0;
    if (w->n_retained == 0) {
        rc = LW_SDK_OK;
        goto out;
    }
    sorted = malloc(w->n_retained * sizeof *sorted);
    out->items = calloc(w->n_retained, sizeof *out->items);
    if (!sorted || !out->items) goto out;
    for (size_t i = 0; i < w->n; i++)
        if (w->set[i]->state == ST_RETAINED) sorted[n++] = w->set[i];
    qsort(sorted, n, sizeof *sorted, by_seq);
    for (size_t i = 0; i < n; i++) {
        const entry *e = sorted[i];
        lwc_retained_entry *r = &out->items[out->count];
        r->description = strdup(e->description);
        if (!r->description) goto out;
        out->count++;
        memcpy(r->key, e->key, sizeof r->key);
        r->watch_uptime_ms = e->watch_uptime;
        r->retained_uptime_ms = e->retained_uptime;
        r->watch_ms = dump_uptime_ms - e->watch_uptime;
        r->retained_ms = dump_uptime_ms - e->retained_uptime;
    }
    rc = LW_SDK_OK;
out:
    pthread_mutex_unlock(&w->mu);
    free(sorted);
    if (rc != LW_SDK_OK) lwc_retained_list_free(out);
    return rc;
}
