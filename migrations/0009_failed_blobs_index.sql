-- 0009_failed_blobs_index.sql — the dumps of failed reports, found without reading every report.
--
-- leakd looks for the failed reports whose dumps are due for deletion at start and every hour
-- (LEAKD_FAILED_BLOB_DAYS, LEAKD_FAILED_BLOB_MAX_BYTES). No index covered them, so each look
-- read the whole reports table: gigabytes an hour on a server that keeps 90 days of reports.
-- Few reports fail and keep a dump, so this index stays small; for every other report it costs
-- one check of its predicate when the report is stored (and each batch one more index to open).

CREATE INDEX reports_failed_blobs ON reports ((coalesce(analyzed_at, received_at)))
    WHERE status = 'failed' AND blob_path IS NOT NULL;
