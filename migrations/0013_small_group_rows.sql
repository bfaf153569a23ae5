-- 0013_small_group_rows.sql — a group's representative trace leaves its row for the TOAST
-- table, the index by first version leads with the version, and the signature check gets
-- cheaper.
--
-- Every batch of reports updates the row of each group it hits, and PostgreSQL writes a whole
-- new row version for each update. With its representative trace inline (~1.5 KB of lz4 over
-- ~9.6 KB of JSON, written once, when the group is created, and never changed) a row was
-- ~1.75 KB: four to a page at fillfactor 70, so a page had room for one more version before
-- it had to be pruned, and an update that found no room moved the row to a new page, leaving a
-- dead line pointer and three index entries behind. In the load benchmark's development runs
-- (tests/bench/leakd/README.md, session 19: 1,000 groups, ~5,000 reports/s, 60 s after a 40-s
-- closed loop) the table grew to 825-3,710 pages of 1,000 live rows. A row that only points at
-- its representative is ~300 bytes: every version an update leaves behind is a sixth the
-- size, the same runs left ~50 pages (and ~200 of TOAST, written once per new group), and a
-- checkpoint's first change to each page logs that many fewer full pages. Where it matters
-- most is while a transaction is held open, when no old version can be removed
-- (docs/operations.md, "Long transactions"): one held for 20 s at 4,000 reports/s grew the
-- table from 579-803 to ~18,200-18,600 pages and the writers fell behind (p99 0.9-1.4 s); with
-- the trace out of line from ~50 to ~2,570 pages, p99 41 and 22 ms (two runs each).
--
-- toast_tuple_target is the length PostgreSQL shrinks a row to once it toasts it, which it does
-- to every new group's row (the uncompressed trace is far over 2 KB): it compresses the trace
-- and, as the compressed trace alone is over 1 KB, moves it out of line. The rest of a row
-- (~300 bytes) stays well under the target, so nothing else is touched; a smaller target had
-- PostgreSQL move the signature and the names out of line too (a pointer is shorter than 41
-- bytes), and every comparison of a signature then read the TOAST table: on a new server, whose
-- first plan compared the signature of every group of the app (below), ingest fell to ~700
-- reports/s. The signature is also kept in its row whatever the row's length (storage MAIN;
-- 40 hex digits do not compress). An update copies the trace's pointer, not the trace. Groups
-- created before this migration keep theirs inline until they are rewritten; nothing is
-- rewritten here.
ALTER TABLE leak_groups SET (toast_tuple_target = 1024);
ALTER TABLE leak_groups ALTER COLUMN signature SET STORAGE MAIN;

-- Ingest asks, for each group of a batch, whether it exists yet (by app and signature: the
-- unique index). The index by first version led with app_id too, and it is smaller; while
-- leak_groups is small and not yet analyzed (a new server), the planner costed both at one row
-- and took the smaller one, reading every group of the app to find one signature: with the
-- small rows above, the statement's first plan did that for its first 30 s (until leakd
-- prepares it again), and ingest fell to 2,300-3,000 reports/s. Leading with the version, the
-- index still serves its query (an app's groups first seen in one version) and cannot serve a
-- lookup by app alone.
CREATE INDEX leak_groups_version_app ON leak_groups (first_version, app_id);
DROP INDEX IF EXISTS leak_groups_first_version;

-- The same rule as 0006 (40 lower-case hex digits), checked twice for each update (the
-- proposed row and the updated one). ltrim with a set compares each character against the set
-- one by one: ~1.4 µs a row here, and 0006's anchored regex ~1.9 µs; a search for any
-- character outside the class (its compiled form cached per connection) ~0.2 µs.
ALTER TABLE leak_groups DROP CONSTRAINT IF EXISTS leak_groups_signature_check;
ALTER TABLE leak_groups ADD CONSTRAINT leak_groups_signature_check
    CHECK (octet_length(signature) = 40 AND signature !~ '[^0-9a-f]');
