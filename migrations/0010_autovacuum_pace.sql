-- 0010_autovacuum_pace.sql — autovacuum of the insert-mostly tables at a fifth of its pace.
--
-- reports (and its TOAST table, which holds the trace documents), occurrences and
-- leak_group_devices only grow between purges, and PostgreSQL vacuums a table that grew by a
-- fifth to mark its new pages all-visible: every new page read and written once more. At the
-- default pace (autovacuum_vacuum_cost_delay = 2 ms) that came as bursts of ~30 MB/s of reads
-- and as many writes, for 5 s (reports) to 25 s (its TOAST table), in the middle of ingest: in
-- the load benchmark (2 cores, ~5,000 reports/s) the machine went from ~70 % to ~90 % busy
-- while they ran, and runs fell behind for seconds (tests/bench/leakd/README.md). The marking
-- can wait, so the same work is spread over five times as long, a fifth as heavy. Vacuums
-- against transaction ID wraparound keep their triggers, and PostgreSQL's failsafe
-- (vacuum_failsafe_age) drops the delay if one ever runs late.

ALTER TABLE reports SET (autovacuum_vacuum_cost_delay = 10, toast.autovacuum_vacuum_cost_delay = 10);
ALTER TABLE occurrences SET (autovacuum_vacuum_cost_delay = 10);
ALTER TABLE leak_group_devices SET (autovacuum_vacuum_cost_delay = 10);
