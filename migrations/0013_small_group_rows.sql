-- 0013_small_group_rows.sql — a group's representative trace leaves its row for the TOAST
-- table, and the signature check gets cheaper.
--
-- Every batch of reports updates the row of each group it hits, and PostgreSQL writes a whole
-- new row version for each update. With its representative trace inline (~1.5 KB of lz4 over
-- ~9.6 KB of JSON, written once, when the group is created, and never changed) a row was
-- ~1.75 KB: four to a page at fillfactor 70, so a page had room for one more version before
-- it had to be pruned, and an update that found no room moved the row to a new page, leaving a
-- dead line pointer and three index entries behind. In the load benchmark's development runs
-- (tests/bench/leakd/README.md, session 19: 1,000 groups, ~5,000 reports/s, 60 s after a 40-s
-- closed loop) the table grew to 825-3,710 pages of 1,000 live rows. A row that only points at
-- its representative is ~250 bytes: the same runs left 50 pages (and 200 of TOAST, written
-- once per new group), every version an update leaves behind is a seventh the size, and a
-- checkpoint's first change to each page logs a seventh as many full pages. Where it matters
-- most is while a transaction is held open, when no old version can be removed
-- (docs/operations.md, "Long transactions"): one held for 20 s at 4,000 reports/s grew the
-- table from ~580 to ~18,000 pages, the writers fell behind (p99 1.5-1.8 s); with this
-- migration from ~60 to ~2,300 pages, p99 32 and 73 ms (two runs each).
--
-- toast_tuple_target is the length PostgreSQL shrinks a row to once it toasts it, which it does
-- to every new group's row (the uncompressed trace is far over 2 KB): with 256 the compressed
-- trace goes out of line. An update copies the pointer, not the trace. Groups created before
-- this migration keep theirs inline until they are rewritten; nothing is rewritten here.
ALTER TABLE leak_groups SET (toast_tuple_target = 256);

-- The same rule as 0006 (40 lower-case hex digits), checked twice for each update (the
-- proposed row and the updated one). ltrim with a set compares each character against the set
-- one by one: ~1.4 µs a row here, and 0006's anchored regex ~1.9 µs; a search for any
-- character outside the class (its compiled form cached per connection) ~0.2 µs.
ALTER TABLE leak_groups DROP CONSTRAINT IF EXISTS leak_groups_signature_check;
ALTER TABLE leak_groups ADD CONSTRAINT leak_groups_signature_check
    CHECK (octet_length(signature) = 40 AND signature !~ '[^0-9a-f]');
