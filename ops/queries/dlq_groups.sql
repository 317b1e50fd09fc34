-- Ops.DeadLetterGroups: the dead letters that dead_letters.sql selects (its
-- parameters), grouped by cause: error class, topic (the column, empty for
-- a topic the routes chose) and event type, most first. Each group has its
-- key, its count, how many aggregates it blocks, when its first and last
-- message became dead letters, and the last error of its newest message
-- (by primary key, not aggregated: errors are up to 4,000 bytes each).
--
-- $6 limit on the groups (NULL for none).
WITH g AS (
    SELECT s.group_key, s.error_class, s.topic, s.event_type,
           count(*) AS n,
           count(DISTINCT (s.aggregate_type, s.aggregate_id)) AS aggregates,
           min(s.dead_at) AS first_dead_at,
           max(s.dead_at) AS last_dead_at,
           max(s.seq) AS last_seq
    FROM ({{dead_letters}}) s
    GROUP BY s.group_key, s.error_class, s.topic, s.event_type
)
SELECT g.group_key, g.error_class, g.topic, g.event_type, g.n, g.aggregates,
       g.first_dead_at, g.last_dead_at,
       (SELECT m.last_error
        FROM {{schema}}.outbox_message_states(ARRAY['DEAD_LETTER']) m
        WHERE m.seq = g.last_seq)
FROM g
ORDER BY g.n DESC, g.first_dead_at, g.group_key
LIMIT $6::bigint
