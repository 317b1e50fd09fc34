-- The dead letters a Filter selects, each with when it became a dead letter,
-- its error class and its group's key: the FROM item of dlq_list.sql and
-- dlq_groups.sql, which include it as {{dead_letters}}, so that a group
-- listed is exactly the group replayed or discarded. The status predicate
-- implies that of the partial index outbox_messages_unsent_by_aggregate, so
-- only unsent rows are read.
--
-- dead_at is when the message became a dead letter: its last recorded
-- attempt that dead-lettered it (outbox_attempts, by primary key), or, for a
-- message dead-lettered before that history existed, its next_attempt_at.
--
-- error_class is a short, stable name for the cause, from last_error as the
-- relay stores it (the sink's error text): the Kafka error code it names
-- ({{kafka_code}} matches the codes franz-go knows, followed by ':' as
-- kerr.Error prints them), such as MESSAGE_TOO_LARGE; else the error text
-- without the relay's prefix, with ids as <id> and numbers as N, cut to 60
-- characters. It is prefixed "max attempts: " unless the error was
-- permanent (it contains sink.ErrPermanent's text, {{permanent}}), since
-- the message was then dead-lettered for running out of attempts.
--
-- group_key names the group (error class, topic, event type): the first 8
-- hex digits of an MD5 of the three. The topic is the message's own column,
-- empty when the message named none and the relay's routes (or its default
-- topic) chose one at publish time: such messages group under the empty
-- topic, whatever topic they went to.
--
-- $1 aggregate type, $2 aggregate id, $3 event type, $7 error class, $8
-- topic, $9 group key ('' for any of them), $4 dead at or after, $5 seq
-- greater than, $10 seq at most (NULL for no bound). $6 is the LIMIT of the
-- including query.
SELECT m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.topic,
       m.created_at, d.dead_at, m.attempts, m.last_error, c.error_class, k.group_key
FROM {{schema}}.outbox_messages m
CROSS JOIN LATERAL (
    SELECT coalesce((SELECT max(a.at)
                     FROM {{schema}}.outbox_attempts a
                     WHERE a.seq = m.seq AND a.dead), m.next_attempt_at) AS dead_at
) d
CROSS JOIN LATERAL (
    SELECT CASE WHEN position('{{permanent}}' IN m.last_error) > 0 THEN '' ELSE 'max attempts: ' END
           || coalesce(substring(m.last_error FROM '{{kafka_code}}'),
                       nullif(left(btrim(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
                           replace(m.last_error, '{{permanent}}: ', ''),
                           'kafka: publish message \S+ to topic \S+: ', ''),
                           '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
                           '[0-9]+', 'N', 'g'),
                           '\s+', ' ', 'g')), 60), ''),
                       'unknown') AS error_class
) c
CROSS JOIN LATERAL (
    SELECT left(md5(concat_ws(E'\n', c.error_class, m.topic, m.event_type)), 8) AS group_key
) k
WHERE m.status = 'DEAD_LETTER'
  AND ($1::text = '' OR m.aggregate_type = $1)
  AND ($2::text = '' OR m.aggregate_id = $2)
  AND ($3::text = '' OR m.event_type = $3)
  AND d.dead_at >= $4::timestamptz
  AND m.seq > $5::bigint
  AND ($7::text = '' OR c.error_class = $7)
  AND ($8::text = '' OR m.topic = $8)
  AND ($9::text = '' OR k.group_key = $9)
  AND ($10::bigint IS NULL OR m.seq <= $10)
