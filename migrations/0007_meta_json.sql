-- 0007_meta_json.sql — reports.meta as `json` instead of `jsonb`.
--
-- leakd never reads meta back: it takes the fields it needs from the upload (report_id, app,
-- version, build, install) and stores meta as the device sent it, after parsing it itself, for
-- whoever queries it in SQL. Building a `jsonb` (PostgreSQL's lexer copying every string, then
-- sorting every object's keys) was ~6 % of PostgreSQL's CPU a stored traces report; `json`
-- keeps the text after a lexer pass. Measured as PostgreSQL's CPU over leakd's in the same run
-- at a steady 4,000 reports/s: 1.05 against 1.11 (four alternating pairs). The ->, ->> and #>>
-- operators work on `json` as on `jsonb`; containment (@>) and GIN indexes need a cast
-- (meta::jsonb), and no index or query of leakd's uses them.
--
-- Rewrites the table: on a large installation, run it when a lock of some minutes on
-- reports is acceptable.
ALTER TABLE reports ALTER COLUMN meta TYPE json USING meta::json;

-- A new type takes the default compression: lz4 again, as 0003 set it, and still no statistics.
DO $$
BEGIN
    ALTER TABLE reports ALTER COLUMN meta SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available in this PostgreSQL: meta keeps pglz';
END
$$;
ALTER TABLE reports ALTER COLUMN meta SET STATISTICS 0;
