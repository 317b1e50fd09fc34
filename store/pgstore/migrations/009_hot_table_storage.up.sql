-- Storage settings for the hot table. Every message is inserted, then
-- updated twice (claimed, marked SENT), and every change leaves a dead row
-- version and dead index entries behind until VACUUM removes them. Dead
-- entries at the low end of outbox_messages_due make claims walk them (the
-- claim floor in queue.go avoids most of that, but the periodic full claim
-- still walks them), and stale statistics make the planner misjudge the
-- backlog. PostgreSQL's defaults vacuum a table after 20% of it changed and
-- analyze it after 10%: for a table holding millions of sent rows that is
-- rarely, and much too late.
--
--   autovacuum_vacuum_threshold 10000, scale factor 0: vacuum after 10,000
--     dead row versions (about 5,000 messages marked), whatever the table's
--     size.
--   autovacuum_vacuum_insert_threshold 10000, scale factor 0: an
--     insert-only burst (a backlog building up during a broker outage) is
--     vacuumed too, which keeps the visibility map current.
--   autovacuum_analyze_threshold 10000, scale factor 0.02: fresh statistics
--     (and a fresh SENT estimate for ops.Stats) after 10,000 changes plus 2%
--     of the table.
--   autovacuum_vacuum_cost_limit 2000: each run finishes quickly instead of
--     sharing the default budget of 200.
--   fillfactor 90: a status change is never a HOT update (status is in the
--     predicates of the partial indexes), but a tenth of each page left free
--     lets the claim's or the mark's new row version often stay on the same
--     page (with the pruning of dead versions that page accesses do),
--     instead of going to the table's last page, where the inserts are. It
--     applies to pages written from now on.
--
-- These are the values docs/operations.md recommends; change them with
-- ALTER TABLE ... SET (...) (or RESET) to fit your rate: the threshold is
-- best a minute or two of the peak message rate.
-- They take effect only where autovacuum runs (the server's autovacuum
-- setting); docs/operations.md has the rest. ALTER TABLE ... SET takes a
-- SHARE UPDATE EXCLUSIVE lock for a moment and does not rewrite the table.
-- A partitioned table cannot hold storage settings itself; its partitions
-- get them (and partitions created later copy them from
-- outbox_partitioning.reloptions, where the partitioning records them).
DO $$
DECLARE
    settings constant text := 'fillfactor = 90, '
        'autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_scale_factor = 0, '
        'autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0, '
        'autovacuum_analyze_threshold = 10000, autovacuum_analyze_scale_factor = 0.02, '
        'autovacuum_vacuum_cost_limit = 2000';
    tbl regclass := '{{schema}}.outbox_messages'::regclass;
    part regclass;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = tbl) = 'p' THEN
        FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = tbl LOOP
            EXECUTE format('ALTER TABLE %s SET (%s)', part, settings);
        END LOOP;
    ELSE
        EXECUTE format('ALTER TABLE %s SET (%s)', tbl, settings);
    END IF;
END
$$;
