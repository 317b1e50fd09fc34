-- Fresh planner statistics, as autovacuum would keep them on a live table.
ANALYZE {{schema}}.outbox_messages
