-- Ops.ReportTopics: one relay's view of its topics, upserted by
-- (relay_id, topic) in one statement (PostgreSQL runs a data-modifying
-- WITH whether or not it is referenced); rows no relay reported for a day
-- go.
-- $1 relay id; $2.. one array per column, zipped by unnest (NULL times
-- for "never").
WITH reported AS (
    INSERT INTO {{schema}}.outbox_topics AS t
        (relay_id, topic, published, published_last_hour, first_published_at, last_published_at,
         unavailable_since, reason, fix, reported_at)
    SELECT $1, r.topic, r.published, r.last_hour, r.first_at, r.last_at, r.unavailable_since, r.reason, r.fix, now()
    FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[],
                $8::text[], $9::text[])
        AS r (topic, published, last_hour, first_at, last_at, unavailable_since, reason, fix)
    ON CONFLICT (relay_id, topic) DO UPDATE
    SET published = EXCLUDED.published,
        published_last_hour = EXCLUDED.published_last_hour,
        first_published_at = EXCLUDED.first_published_at,
        last_published_at = EXCLUDED.last_published_at,
        unavailable_since = EXCLUDED.unavailable_since,
        reason = EXCLUDED.reason,
        fix = EXCLUDED.fix,
        reported_at = now()
    RETURNING 1
)
DELETE FROM {{schema}}.outbox_topics
WHERE reported_at < now() - interval '1 day'
