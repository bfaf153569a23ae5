/* report_writer.h — stores traces reports by group commit. A request hands its validated
 * report to a writer thread and waits (or is called back); a writer lets a batch fill to 20
 * reports while more keep coming (at most 5 ms), takes everything queued (up to a cap) and stores it with
 * one transaction and one commit (ld_reports_insert_traces), so PostgreSQL's per-transaction cost
 * and each group's row update are paid once per batch, not once per report. */
#ifndef LD_REPORT_WRITER_H
#define LD_REPORT_WRITER_H

#include <stddef.h>

#include "db.h"
#include "reports.h"

typedef struct ld_report_writer ld_report_writer;

/* Where a stored report's time went, for its request's log line. */
typedef struct ld_writer_timing {
    double waited_s; /* queued, until a writer started its batch (the linger, or all writers busy) */
    double stored_s; /* its batch's statement and commit */
} ld_writer_timing;

/* Starts `threads` writer threads, each with its own connection to `db_url` (opened on first
 * use and reopened after a failure): while one batch commits, the next is stored by another.
 * `max_batch` reports at most per transaction; each answer of PostgreSQL is waited for at most
 * `db_timeout_ms` (0: no limit). NULL when out of memory or a thread cannot
 * start, with the reason in `err`. */
ld_report_writer *ld_report_writer_start(const char *db_url, int db_timeout_ms, int threads, size_t max_batch, char *err,
                                         size_t cap);

/* Stores `item` (see ld_traces_item) and returns when it is committed or has failed: LD_OK
 * with the item's outcome set, or LD_ERR_UNAVAILABLE (the database cannot be reached, or the
 * writer is stopping: answer 503) or another error for this item alone (a batch that fails
 * is split so that one bad report does not fail the others). Thread-safe. */
ld_status ld_report_writer_store(ld_report_writer *w, ld_traces_item *item, ld_writer_timing *timing);

/* The same without waiting, for an event loop: queues `item` (which must live until then)
 * and returns LD_OK; `done(arg, st, timing)` is called later from a writer thread with what
 * ld_report_writer_store would have returned. Any other return: nothing was queued and
 * `done` is never called (LD_ERR_UNAVAILABLE when the writer is stopping). */
ld_status ld_report_writer_submit(ld_report_writer *w, ld_traces_item *item,
                                  void (*done)(void *arg, ld_status st, const ld_writer_timing *timing), void *arg);

/* Stores what is queued (calling the `done` of what was submitted), stops the threads and
 * frees the writer. Callers of ld_report_writer_store must be gone. NULL is a no-op. */
void ld_report_writer_stop(ld_report_writer *w);

/* A batch's time (statement and commit, or failure) by bucket: <= 1, 2, 5, 10, 20, 50, 100, 200,
 * 500, 1000 ms, +Inf. A slow disk shows here first: every request of the batch waited for it. */
#define LD_BATCH_BUCKETS 11
extern const double ld_batch_bucket_le[LD_BATCH_BUCKETS - 1]; /* seconds */

/* Counters for /metrics. */
typedef struct ld_report_writer_counters {
    unsigned long long batches, reports;          /* committed, and the reports in them */
    unsigned long long bucket[LD_BATCH_BUCKETS];  /* every batch run, by its time (not cumulative) */
    double seconds_sum;
} ld_report_writer_counters;
void ld_report_writer_stats(ld_report_writer *w, ld_report_writer_counters *out);

#endif
