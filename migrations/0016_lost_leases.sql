-- 0016_lost_leases.sql — an attempt given up because another worker took over its lease while
-- its own worker was alive is not held against the report.
--
-- A worker that cannot renew its lease for LEAKD_LEASE_SECONDS (PostgreSQL unreachable that
-- long, the host frozen) may find another worker has claimed the report meanwhile; it then
-- gives up its analysis. Both claims counted an attempt: two of LEAKD_MAX_ATTEMPTS gone for
-- one analysis, and a report whose next analysis crashed once more could fail for good. The
-- worker that lost the lease adds one here when it learns of it, and a report fails after
-- `attempts - lost_leases` attempts. A worker that never comes back (a dead host, a killed
-- supervisor) gives nothing back: a report that keeps killing whatever analyzes it still ends.
-- Adding a column with a constant default rewrites nothing (PostgreSQL 11 and later).
ALTER TABLE reports ADD COLUMN lost_leases int NOT NULL DEFAULT 0;
-- Sampled like the other columns of reports (0011): the default target would bring ANALYZE's
-- sample back to 30,000 rows.
ALTER TABLE reports ALTER COLUMN lost_leases SET STATISTICS 10;
