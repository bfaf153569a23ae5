/* reports.h — the reports table: idempotent insert of uploaded reports (queued heap
 * reports; traces reports, grouped at once), the report object of the API, and retention. */
#ifndef LD_REPORTS_H
#define LD_REPORTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "leakcore.h"

/* What leakd takes of an analysis result (a worker reads the analyzer's output with these
 * limits) and so of any trace it stored, read again: a leak path of 100,000 elements, strings
 * of 1 MiB. */
#define LD_RESULT_LIMITS {256u << 20, 100000, 100, 100000, 1u << 20}

/* A report as ingest stores it. All strings are borrowed. */
typedef struct ld_report_in {
    const char *report_id;   /* lower-case UUID text, made on the device */
    int64_t app_id;
    const char *mode;        /* "heap" or "traces" */
    const char *app_version; /* NULL = "" */
    int64_t build;
    const char *install_id;  /* meta.device.install_id; NULL = "" (unknown device) */
    const char *meta_json;   /* the upload's meta object, JSON text */
    const char *blob_path;   /* relative to LEAKD_DATA_DIR; NULL for traces reports */
    const char *blob_store;  /* the id of that data dir's store (blob_store.h); NULL for traces reports */
    int64_t blob_bytes;
} ld_report_in;


/* Inserts a heap report with status 'queued' and, in the same statement, NOTIFY
 * leakd_reports so idle workers wake up (delivered at commit). *created = 1 when inserted,
 * 0 when this app already has a report with this id (nothing changed). LD_ERR_CONFLICT
 * when the id belongs to a report of another app; LD_ERR_INVALID for a malformed id. */
ld_status ld_report_insert_queued(ld_db *db, const ld_report_in *in, int *created);

/* A traces report for ld_reports_insert_traces, and what became of it. */
typedef struct ld_traces_item {
    ld_report_in in;          /* mode "traces", no blob */
    const lw_leak_report *rep; /* the report, after ld_trace_validate (its leaks' signatures, ...) */
    const char *result_json;  /* the same, as trace JSON */
    size_t result_len;        /* strlen(result_json), or 0: counted where needed (the writer
                               * and the batch each counted the ~10 KB document again) */
    /* Set when ld_reports_insert_traces returns LD_OK: */
    ld_status st;             /* LD_OK (stored now, or before by the same app), LD_ERR_CONFLICT (the
                               * id is another app's), LD_ERR_UNAVAILABLE (stored before, and deleted
                               * meanwhile or its owner could not be looked up) */
    int created;              /* 1: stored by this call */
    char received_at[24];     /* RFC 3339 UTC, when created */
} ld_traces_item;

/* Stores `n` traces reports in one statement, its own transaction (one commit for the
 * batch): each new one as 'done' with its result, leaks_found and analyzed_at, and all the new
 * ones grouped at once (LD_GROUPING_CTES). A repeated id (stored before, or earlier in the
 * same batch) changes nothing. LD_OK when the transaction committed, with each item's outcome
 * in it; any other status means nothing was stored (the caller may retry, or split the batch
 * to find a bad item). Retried once after a serialization failure or deadlock. */
ld_status ld_reports_insert_traces(ld_db *db, ld_traces_item *items, size_t n);

/* One traces report (a batch of one): *created = 1 when stored now, 0 when this app has it;
 * LD_ERR_CONFLICT when another app has the id. `rep` must have passed ld_trace_validate. */
ld_status ld_report_insert_traces(ld_db *db, const ld_report_in *in, const lw_leak_report *rep, int *created);

/* The report object (as ld_report_get gives it) of a traces report just created by
 * ld_reports_insert_traces, built without asking the database, as compact JSON text ending in
 * a newline (the caller frees it; written directly: with jansson, building and writing it
 * cost 6 % of leakd's instructions a report). NULL when out of memory. */
char *ld_report_traces_json(const ld_traces_item *it, const char *app_slug, const lw_leak_report *rep);

/* The report object of the API (GET /v1/reports/{id}, answer of POST /v1/reports):
 * {"id","app","status","mode","received_at","app_version","build","attempts","error",
 *  "analyzed_at","leaks_found","leaks":[{"signature","kind","short_description","count"}]}
 * Times are RFC 3339 UTC; "error" is null unless failed; "analyzed_at" and "leaks_found" are
 * null and "leaks" empty until done. *out is new (json_decref it). LD_ERR_NOT_FOUND when
 * there is no such report in app `app_id` (or the id is malformed). */
ld_status ld_report_get(ld_db *db, int64_t app_id, const char *report_id, json_t **out);

/* Deletes up to `limit` of the oldest reports received more than `days` days ago and done or
 * failed (one queued or under analysis waits until it is), in one transaction; their
 * occurrences go with them (groups keep their counters). The caller calls
 * again while *reports_deleted == limit: a transaction holds back the removal of every row
 * version that dies while it runs, and each batch of traces reports updates the row of each
 * group it hits, so one statement for an hour's worth of reports (millions at a few thousand
 * a second) would bloat those rows for as long as it ran. *blob_paths_out = a malloc'd array
 * of *nblobs malloc'd relative blob paths for the caller to delete (NULL when none); free
 * them with ld_blob_paths_free. A report whose dump is kept in another blob store than
 * `store` (this instance's) is left to the instances of that store, which delete the file too. */
ld_status ld_retention_purge(ld_db *db, const char *store, int days, int64_t limit, int64_t *reports_deleted,
                             char ***blob_paths_out, size_t *nblobs);
void ld_blob_paths_free(char **paths, size_t n); /* NULL is a no-op */

/* The blobs of failed reports kept for inspection that are due: those that failed more than
 * `days` ago, and, when max_bytes > 0, the older ones beyond the newest max_bytes of them (by
 * blob_bytes). Their blob_path is cleared and the list returned for the caller to delete
 * (ld_blob_paths_free). Only the dumps in `store` (this instance's; max_bytes is counted per
 * store: each is its own disk) and those that name no store. */
ld_status ld_failed_blobs_purge(ld_db *db, const char *store, int days, uint64_t max_bytes, char ***blob_paths_out,
                                size_t *nblobs);

/* The report's blob was deleted (after a successful analysis): clear its blob_path. */
ld_status ld_report_forget_blob(ld_db *db, int64_t app_id, const char *report_id);

#endif
