-- 0006_result_text.sql — two checks PostgreSQL made on every stored traces report that cost
-- more than they guarded, measured under the load benchmark (tests/bench/leakd) with perf.
--
-- reports.result becomes `text`. leakd writes every result itself, with its own JSON writer,
-- from a report it has just parsed and validated (a device's traces) or from the analyzer
-- (a heap dump), and reads it back with a cast to json where it needs fields (the API, the
-- grouping of a worker's result, a new group's representative). As `json`, PostgreSQL lexed
-- each ~10 KB document again on the way in: 11 % of its CPU at a steady 3,000 reports/s,
-- for a check that can only fail if leakd itself is broken, and that the reads still make.
--
-- Rewrites the table: on a large installation, run it when a lock of some minutes on
-- reports is acceptable.
ALTER TABLE reports ALTER COLUMN result TYPE text;

-- A new type takes the default compression (pglz, ten times lz4's CPU here): lz4 again, as
-- 0003 set it, and still no statistics.
DO $$
BEGIN
    ALTER TABLE reports ALTER COLUMN result SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available in this PostgreSQL: the JSON column keeps pglz';
END
$$;
ALTER TABLE reports ALTER COLUMN result SET STATISTICS 0;

-- A group's signature was checked with a regular expression on every upsert, twice for an
-- update (the proposed row, then the updated one): 4 % of PostgreSQL's CPU. The same rule
-- (40 lower-case hex digits) without the regex engine:
ALTER TABLE leak_groups DROP CONSTRAINT IF EXISTS leak_groups_signature_check;
ALTER TABLE leak_groups ADD CONSTRAINT leak_groups_signature_check
    CHECK (octet_length(signature) = 40 AND ltrim(signature, '0123456789abcdef') = '');
