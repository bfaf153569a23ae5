-- 0005_json_documents.sql — the trace JSON leakd stores (reports.result, a group's
-- representative trace) as `json` instead of `jsonb`.
--
-- leakd writes these documents itself, from a report it has just parsed and validated, and
-- reads them back whole (the API) or a few fields at a time (grouping a worker's result):
-- nothing queries inside them. Building a `jsonb` was a third of PostgreSQL's CPU for each
-- stored traces report: PostgreSQL 15's JSON lexer copies every string of a ~10 KB document a
-- character at a time to build it, then sorts every object's keys. A `json` value is the
-- text, checked by the lexer without those copies (about a seventh of the cost). The
-- grouping's few fields (signature, kind, count, ...) come to PostgreSQL beside the documents
-- (reports.c), and a new group's representative is cut out of its report's result only when
-- the group is new (grouping.h).
--
-- Rewrites both tables: on a large installation, run it when a lock of some minutes on
-- reports is acceptable.
ALTER TABLE reports ALTER COLUMN result TYPE json USING result::json;
ALTER TABLE leak_groups ALTER COLUMN representative TYPE json USING representative::json;

-- As 0003 set them: the rewrite keeps a column's compression and statistics target, but say
-- so rather than rely on it.
DO $$
BEGIN
    ALTER TABLE reports ALTER COLUMN result SET COMPRESSION lz4;
    ALTER TABLE leak_groups ALTER COLUMN representative SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available in this PostgreSQL: the JSON columns keep pglz';
END
$$;
ALTER TABLE reports ALTER COLUMN result SET STATISTICS 0;
ALTER TABLE leak_groups ALTER COLUMN representative SET STATISTICS 0;
