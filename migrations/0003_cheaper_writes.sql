-- 0003_cheaper_writes.sql — what it costs PostgreSQL to store a report and count it in its
-- group, measured under the load benchmark (tests/bench/leakd), section by section.

-- The stored trace JSON (reports.result, ~10 KB a traces report) is compressed with lz4
-- instead of pglz: pglz cost PostgreSQL about a tenth of its CPU per stored report, lz4 a
-- fraction of that. Servers built without lz4 keep pglz.
DO $$
BEGIN
    ALTER TABLE reports ALTER COLUMN result SET COMPRESSION lz4, ALTER COLUMN meta SET COMPRESSION lz4;
    ALTER TABLE leak_groups ALTER COLUMN representative SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available in this PostgreSQL: the JSON columns keep pglz';
END
$$;

-- Devices are counted in leak_group_devices since 0002: this index only slowed every
-- occurrence insert down.
DROP INDEX IF EXISTS occurrences_group_device;

-- Occurrences and devices are written only by leakd's grouping, in the statement that has just
-- upserted their group and stored their report; their foreign keys re-checked that, row by row,
-- at about 50 us each: a fifth of what storing a traces report cost PostgreSQL. Retention
-- deletes a report's occurrences with it (reports.c), as the cascade did.
ALTER TABLE occurrences DROP CONSTRAINT IF EXISTS occurrences_group_id_fkey;
ALTER TABLE occurrences DROP CONSTRAINT IF EXISTS occurrences_app_id_report_id_fkey;
ALTER TABLE leak_group_devices DROP CONSTRAINT IF EXISTS leak_group_devices_group_id_fkey;

-- Fewer indexes to keep per stored report. With the foreign key above gone, nothing needs
-- (app_id, id): the report id alone is unique, and becomes the primary key. Retention finds
-- occurrences by report, never by time any more.
ALTER TABLE reports DROP CONSTRAINT reports_pkey;
ALTER TABLE reports ADD CONSTRAINT reports_pkey PRIMARY KEY USING INDEX reports_id;
DROP INDEX IF EXISTS occurrences_seen;

-- No statistics on the JSON documents: nothing filters on them, and ANALYZE of reports read
-- and decompressed 30,000 sampled results for them, a second of CPU at a time under load.
ALTER TABLE reports ALTER COLUMN result SET STATISTICS 0, ALTER COLUMN meta SET STATISTICS 0;
ALTER TABLE leak_groups ALTER COLUMN representative SET STATISTICS 0;

-- A group's row is updated by every batch that hits it, and an indexed column changing
-- (occurrences, last_seen) made each update write a new entry in all five indexes and left
-- the table and its indexes bloated (18 MB for 1,000 groups after a minute of load). Without
-- those two indexes, and with room on each page, 97 % of the updates are HOT: the API's
-- sorted lists sort an app's groups, found through (app_id, signature), instead.
DROP INDEX IF EXISTS leak_groups_last_seen;
DROP INDEX IF EXISTS leak_groups_occurrences;
ALTER TABLE leak_groups SET (fillfactor = 70);
