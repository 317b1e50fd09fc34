-- Stats.Topics: the topics the running relays reported in the last minute
-- (ops.ReportTopics), summed over relays; those that cannot take records
-- first. The table holds a row per relay and topic.
SELECT topic,
       sum(published_last_hour)::bigint,
       max(last_published_at),
       min(unavailable_since),
       coalesce(max(reason) FILTER (WHERE unavailable_since IS NOT NULL), ''),
       coalesce(max(fix) FILTER (WHERE unavailable_since IS NOT NULL), '')
FROM {{schema}}.outbox_topics
WHERE reported_at > now() - interval '1 minute'
GROUP BY topic
ORDER BY min(unavailable_since) IS NULL, topic
LIMIT 200
