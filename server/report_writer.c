/* report_writer.c — writer threads, each with its own connection, over one queue of waiting
 * requests. */
#define _GNU_SOURCE
#include "report_writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "metrics.h"

/* A batch stops growing past this much trace JSON (one report alone may be larger). */
#define BATCH_BYTES (4u << 20)

/* A batch waits to fill to BATCH_FILL reports while reports keep coming, for at most
 * BATCH_LINGER_NS; when none has come for BATCH_QUIET_NS it goes once its oldest has waited
 * BATCH_MIN_NS. A batch has a fixed cost (a few round trips, a commit, starting a large
 * statement) about that of ten reports: when reports arrive spread out rather than together,
 * batches of one or two spent twice the CPU per report. Reports that come together (a closed
 * loop of clients, a burst) fill a batch at once, and a few clients that have all sent are not
 * kept waiting. At a steady 4,600/s, waiting for 20 (batches of ~21 against ~15 with a 2-ms
 * wait) cut PostgreSQL's CPU a report by ~15 % and the machine's busy time from 76-88 % to
 * 68-74 % (eight alternated pairs, 2026-12-02). */
#define BATCH_FILL 20
#define BATCH_LINGER_NS 5000000L
#define BATCH_MIN_NS 2000000L
#define BATCH_QUIET_NS 1500000L

/* A report waiting to be stored: on the waiting thread's stack (ld_report_writer_store), or
 * allocated, with a callback (ld_report_writer_submit). */
typedef struct job {
    ld_traces_item *item;
    size_t bytes;
    struct timespec queued_at; /* CLOCK_MONOTONIC */
    ld_status st;
    ld_writer_timing timing;
    int done;
    pthread_cond_t cv;
    void (*done_fn)(void *arg, ld_status st, const ld_writer_timing *t); /* set: called when stored, then the job freed */
    void *done_arg;
    struct job *next;
} job;

/* A writer thread's own: its connection and batch arrays. */
typedef struct writer_thread {
    struct ld_report_writer *w;
    pthread_t thread;
    int started;
    ld_db *db;
    int db_down;          /* logged as unreachable; logged again when it is back */
    job **batch;
    ld_traces_item *items;
} writer_thread;

struct ld_report_writer {
    pthread_mutex_t mu;
    pthread_cond_t work;
    job *head, *tail;
    size_t queued;
    struct timespec last_queued; /* CLOCK_MONOTONIC: when the newest report came */
    int stopping;
    char *url;
    int db_timeout_ms; /* each writer connection's (ld_db_set_timeout) */
    size_t max_batch;
    size_t fill;      /* a lingering writer starts once this many are queued */
    int nthreads;
    writer_thread *threads;
    atomic_ullong batches, reports;
    atomic_ullong bucket[LD_BATCH_BUCKETS];
    atomic_ullong batch_us_sum;
};

const double ld_batch_bucket_le[LD_BATCH_BUCKETS - 1] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0};

static struct timespec add_ns(struct timespec t, long ns) {
    t.tv_nsec += ns;
    while (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

static int later(struct timespec a, struct timespec b) {
    return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

static double elapsed(const struct timespec *from, const struct timespec *to) {
    return (double)(to->tv_sec - from->tv_sec) + (double)(to->tv_nsec - from->tv_nsec) / 1e9;
}

/* One transaction for items[0..n); reconnects and tries once more after an outage (safe: a
 * batch that did commit before the connection broke comes back as repeats). */
static ld_status store(writer_thread *t, ld_traces_item *items, size_t n) {
    ld_report_writer *w = t->w;
    char err[512];
    if (!t->db) {
        t->db = ld_db_connect(w->url, err, sizeof err);
        if (t->db) ld_db_set_timeout(t->db, w->db_timeout_ms);
        /* The batch statement's plan is the same whatever its arrays hold, and planning it
         * costs as much as running it (docs/server.md, "Group commit"). */
        if (t->db && ld_db_use_generic_plans(t->db) != LD_OK) {
            snprintf(err, sizeof err, "%s", ld_db_error(t->db));
            ld_db_close(t->db);
            t->db = NULL;
        }
        if (!t->db) {
            if (!t->db_down) ld_warn("traces reports: database unreachable: %s", err);
            t->db_down = 1;
            return LD_ERR_UNAVAILABLE;
        }
    }
    ld_status st = ld_reports_insert_traces(t->db, items, n);
    if (st == LD_ERR_UNAVAILABLE && ld_db_check(t->db) == LD_OK) st = ld_reports_insert_traces(t->db, items, n);
    if (st == LD_ERR_UNAVAILABLE) {
        if (!t->db_down) ld_warn("traces reports: database unreachable: %s", ld_db_error(t->db));
        t->db_down = 1;
    } else if (t->db_down) {
        ld_info("traces reports: database reachable again");
        t->db_down = 0;
    }
    if (st == LD_OK) {
        atomic_fetch_add(&w->batches, 1);
        atomic_fetch_add(&w->reports, n);
    }
    return st;
}

/* Stores batch[0..n) and sets each job's status; a batch that fails for a reason other than
 * an outage is split, so that one bad report fails alone. */
static void run_batch(writer_thread *t, size_t n) {
    for (size_t i = 0; i < n; i++) t->items[i] = *t->batch[i]->item;
    ld_status st = store(t, t->items, n);
    if (st != LD_OK && st != LD_ERR_UNAVAILABLE && n > 1) {
        for (size_t i = 0; i < n; i++) {
            t->batch[i]->st = store(t, &t->items[i], 1);
            *t->batch[i]->item = t->items[i];
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            t->batch[i]->st = st;
            *t->batch[i]->item = t->items[i];
        }
    }
    for (size_t i = 0; i < n; i++)
        if (t->batch[i]->st != LD_OK && t->batch[i]->st != LD_ERR_UNAVAILABLE)
            ld_error("traces report %s could not be stored (%s): %s", t->batch[i]->item->in.report_id,
                     ld_strerror(t->batch[i]->st), t->db ? ld_db_error(t->db) : "no connection");
}

static void *writer_main(void *arg) {
    writer_thread *t = arg;
    ld_report_writer *w = t->w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stopping) pthread_cond_wait(&w->work, &w->mu);
        if (!w->head) break; /* stopping, and nothing left */
        /* Let the batch fill (see BATCH_FILL). Reports that join do not wake the writer: it
         * looks again at each deadline. */
        while (w->head && !w->stopping && w->queued < w->fill) {
            struct timespec now, hard = add_ns(w->head->queued_at, BATCH_LINGER_NS);
            struct timespec soft = add_ns(w->head->queued_at, BATCH_MIN_NS), quiet = add_ns(w->last_queued, BATCH_QUIET_NS);
            if (later(quiet, soft)) soft = quiet;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (!later(hard, now) || !later(soft, now)) break;
            struct timespec deadline = later(soft, hard) ? hard : soft;
            pthread_cond_timedwait(&w->work, &w->mu, &deadline);
        }
        if (!w->head) continue; /* another writer took them */
        size_t n = 0, bytes = 0;
        while (w->head && n < w->max_batch && (n == 0 || bytes + w->head->bytes <= BATCH_BYTES)) {
            job *j = w->head;
            w->head = j->next;
            if (!w->head) w->tail = NULL;
            w->queued--;
            bytes += j->bytes;
            t->batch[n++] = j;
        }
        pthread_mutex_unlock(&w->mu);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        run_batch(t, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double took = elapsed(&t0, &t1);
        atomic_fetch_add(&w->bucket[ld_histogram_bucket(ld_batch_bucket_le, LD_BATCH_BUCKETS - 1, took)], 1);
        atomic_fetch_add(&w->batch_us_sum, (unsigned long long)(took * 1e6));
        for (size_t i = 0; i < n; i++) {
            job *j = t->batch[i];
            j->timing = (ld_writer_timing){elapsed(&j->queued_at, &t0), took};
            if (!j->done_fn) continue;
            j->done_fn(j->done_arg, j->st, &j->timing);
            free(j);
            t->batch[i] = NULL;
        }
        pthread_mutex_lock(&w->mu);
        for (size_t i = 0; i < n; i++) {
            if (!t->batch[i]) continue;
            t->batch[i]->done = 1;
            pthread_cond_signal(&t->batch[i]->cv);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void writer_free(ld_report_writer *w) {
    for (int i = 0; i < w->nthreads; i++) {
        ld_db_close(w->threads[i].db);
        free(w->threads[i].batch);
        free(w->threads[i].items);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work);
    free(w->threads);
    free(w->url);
    free(w);
}

/* Stops and joins the threads that started. */
static void writer_join(ld_report_writer *w) {
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->nthreads; i++)
        if (w->threads[i].started) pthread_join(w->threads[i].thread, NULL);
}

ld_report_writer *ld_report_writer_start(const char *db_url, int db_timeout_ms, int threads, size_t max_batch, char *err,
                                         size_t cap) {
    if (!db_url || threads < 1 || max_batch < 1) {
        snprintf(err, cap, "ld_report_writer_start: bad arguments");
        return NULL;
    }
    ld_report_writer *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the linger deadline */
    pthread_cond_init(&w->work, &ca);
    pthread_condattr_destroy(&ca);
    w->db_timeout_ms = db_timeout_ms;
    w->max_batch = max_batch;
    w->fill = max_batch < BATCH_FILL ? max_batch : BATCH_FILL;
    w->url = strdup(db_url);
    w->threads = calloc((size_t)threads, sizeof *w->threads);
    if (!w->url || !w->threads) goto nomem;
    w->nthreads = threads;
    for (int i = 0; i < threads; i++) {
        writer_thread *t = &w->threads[i];
        t->w = w;
        t->batch = calloc(max_batch, sizeof *t->batch);
        t->items = calloc(max_batch, sizeof *t->items);
        if (!t->batch || !t->items) goto nomem;
    }
    for (int i = 0; i < threads; i++) {
        int rc = pthread_create(&w->threads[i].thread, NULL, writer_main, &w->threads[i]);
        if (rc != 0) {
            snprintf(err, cap, "cannot start the report writer: %s", strerror(rc));
            writer_join(w);
            writer_free(w);
            return NULL;
        }
        w->threads[i].started = 1;
    }
    return w;

nomem:
    snprintf(err, cap, "out of memory");
    writer_free(w);
    return NULL;
}

/* Queues j (locked); LD_ERR_UNAVAILABLE when stopping. */
static ld_status enqueue(ld_report_writer *w, job *j) {
    if (w->stopping) return LD_ERR_UNAVAILABLE;
    if (!j->item->result_len) j->item->result_len = strlen(j->item->result_json);
    j->bytes = j->item->result_len + (j->item->in.meta_json ? strlen(j->item->in.meta_json) : 0);
    clock_gettime(CLOCK_MONOTONIC, &j->queued_at);
    w->last_queued = j->queued_at;
    if (w->tail) w->tail->next = j;
    else w->head = j;
    w->tail = j;
    w->queued++;
    /* A lingering writer sleeps to its deadline unless the batch has filled: waking it for
     * every report that joins cost two context switches per report. */
    if (w->queued == 1 || w->queued == w->fill) pthread_cond_signal(&w->work);
    return LD_OK;
}

ld_status ld_report_writer_store(ld_report_writer *w, ld_traces_item *item, ld_writer_timing *timing) {
    if (!w || !item || !item->result_json) return LD_ERR_INVALID;
    job j = {.item = item};
    pthread_cond_init(&j.cv, NULL);
    pthread_mutex_lock(&w->mu);
    j.st = enqueue(w, &j);
    while (j.st == LD_OK && !j.done) pthread_cond_wait(&j.cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    pthread_cond_destroy(&j.cv);
    if (timing) *timing = j.timing;
    return j.st;
}

ld_status ld_report_writer_submit(ld_report_writer *w, ld_traces_item *item,
                                  void (*done)(void *arg, ld_status st, const ld_writer_timing *timing), void *arg) {
    if (!w || !item || !item->result_json || !done) return LD_ERR_INVALID;
    job *j = calloc(1, sizeof *j);
    if (!j) return LD_ERR_NOMEM;
    j->item = item;
    j->done_fn = done;
    j->done_arg = arg;
    pthread_mutex_lock(&w->mu);
    ld_status st = enqueue(w, j);
    pthread_mutex_unlock(&w->mu);
    if (st != LD_OK) free(j);
    return st;
}

void ld_report_writer_stop(ld_report_writer *w) {
    if (!w) return;
    writer_join(w);
    writer_free(w);
}

void ld_report_writer_stats(ld_report_writer *w, ld_report_writer_counters *out) {
    *out = (ld_report_writer_counters){0};
    if (!w) return;
    out->batches = atomic_load(&w->batches);
    out->reports = atomic_load(&w->reports);
    for (size_t i = 0; i < LD_BATCH_BUCKETS; i++) out->bucket[i] = atomic_load(&w->bucket[i]);
    out->seconds_sum = (double)atomic_load(&w->batch_us_sum) / 1e6;
}
