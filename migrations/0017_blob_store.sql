-- 0017_blob_store.sql — the blob store (LEAKD_DATA_DIR, by the id in its store-id file) that
-- holds a heap report's dump.
--
-- Workers claim only the reports of their own instance's store, so instances with data dirs
-- of their own share one database safely: before, a worker of another instance claimed the
-- report, found no dump in its dir and used an attempt, and three such claims failed a report
-- whose dump was safe on the disk of the instance that took it. NULL: a traces report (no
-- dump), or a heap report stored before this migration, which any worker may claim, as then.
-- Adding a nullable column rewrites nothing.
ALTER TABLE reports ADD COLUMN blob_store uuid;
-- Sampled like the other columns of reports (0011).
ALTER TABLE reports ALTER COLUMN blob_store SET STATISTICS 10;
