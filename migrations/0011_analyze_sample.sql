-- 0011_analyze_sample.sql — a smaller ANALYZE sample for the tables that only grow.
--
-- ANALYZE holds a snapshot for as long as it runs, and while it does no row version that died
-- after it started can be removed, anywhere: each batch of traces reports updates the row of
-- every group it hits, and each update leaves the old version (~1.7 KB with its representative
-- trace) behind until then. ANALYZE samples 300 rows per unit of the largest statistics
-- target among a table's columns: 30,000 rows at the default 100, each on its own page of
-- reports. Autovacuum analyzed reports at migration 0010's pace in 17-21 s, in the middle of
-- ingest; on the load benchmark's machine (4,000 reports/s over 1,000 groups) leak_groups
-- grew from ~500 to 12,000 pages meanwhile and PostgreSQL's CPU a report doubled
-- (tests/bench/leakd/README.md, session 13). With a target of 10 (3,000 rows) the same ANALYZE
-- took 1.4 s and the table grew to 1,400 pages.
--
-- Nothing filters these tables on a value whose distribution matters: they are read by key,
-- by time (retention, the queue) and by status, and ten histogram buckets serve those plans.
-- result and meta keep no statistics at all (0005, 0007). The expression of the index
-- reports_failed_blobs is sampled with them, at its own target. A column (or an expression
-- index) added to these tables later needs the same, or it brings the sample back to 30,000
-- rows (test_db checks).

ALTER TABLE reports
    ALTER COLUMN id SET STATISTICS 10,
    ALTER COLUMN app_id SET STATISTICS 10,
    ALTER COLUMN received_at SET STATISTICS 10,
    ALTER COLUMN mode SET STATISTICS 10,
    ALTER COLUMN status SET STATISTICS 10,
    ALTER COLUMN error SET STATISTICS 10,
    ALTER COLUMN app_version SET STATISTICS 10,
    ALTER COLUMN build SET STATISTICS 10,
    ALTER COLUMN install_id SET STATISTICS 10,
    ALTER COLUMN blob_path SET STATISTICS 10,
    ALTER COLUMN blob_bytes SET STATISTICS 10,
    ALTER COLUMN attempts SET STATISTICS 10,
    ALTER COLUMN lease_owner SET STATISTICS 10,
    ALTER COLUMN lease_until SET STATISTICS 10,
    ALTER COLUMN analyzed_at SET STATISTICS 10,
    ALTER COLUMN leaks_found SET STATISTICS 10;

ALTER TABLE occurrences
    ALTER COLUMN report_id SET STATISTICS 10,
    ALTER COLUMN group_id SET STATISTICS 10,
    ALTER COLUMN app_id SET STATISTICS 10,
    ALTER COLUMN leaked_objects SET STATISTICS 10,
    ALTER COLUMN app_version SET STATISTICS 10,
    ALTER COLUMN build SET STATISTICS 10,
    ALTER COLUMN install_id SET STATISTICS 10,
    ALTER COLUMN seen_at SET STATISTICS 10;

ALTER TABLE leak_group_devices
    ALTER COLUMN app_id SET STATISTICS 10,
    ALTER COLUMN device_key SET STATISTICS 10,
    ALTER COLUMN first_seen SET STATISTICS 10;

ALTER INDEX reports_failed_blobs ALTER COLUMN 1 SET STATISTICS 10;
