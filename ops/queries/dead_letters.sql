-- The dead letters a Filter selects, each with when it became a dead letter,
-- its error class and its group's key: the FROM item of dlq_list.sql and
-- dlq_groups.sql, which include it as {{dead_letters}}, so that a group
-- listed is exactly the group replayed or discarded. They are the messages
-- in state DEAD_LETTER (outbox_message_states, migration 016), which the
-- function reads through the partial index outbox_messages_dead
-- (migration 014) in seq order, so only the dead letters are read, and a
-- LIMIT stops the scan.
--
-- Each LATERAL subquery ends in OFFSET 0 so that it is computed once per
-- row: without it PostgreSQL substitutes its expressions wherever they are
-- used (the class is used by the group key, the output and the filters),
-- and runs the regular expressions several times per row.
--
-- dead_at is when the message became a dead letter: its last recorded
-- attempt that dead-lettered it (outbox_attempts, by primary key), or, for a
-- message dead-lettered before that history existed, its next_attempt_at.
--
-- reason is last_error as the relay stores it (the sink's error text)
-- without the prefixes that name the message and its topic: the permanent
-- error's text ({{permanent}}), then the Kafka sink's "kafka: publish
-- message ID to topic T: " or "kafka: message ID not published to topic T:
-- ", the relay's "relay: message ID not published: ", or CDC's "cdc: decode
-- column C: " before an "outbox: " reason, which names the field itself.
--
-- error_class is a short, stable name for the cause, from the reason: the
-- Kafka error code it names, as kerr.Error prints one (an upper-case word
-- with underscores before ':', such as MESSAGE_TOO_LARGE), if it is one of
-- the codes franz-go knows ($11); else the reason with ids as <id>, numbers
-- as N and white space as one space, cut at a word to 80 characters and
-- '…'. It is prefixed "max attempts: " unless the error was permanent,
-- since the message was then dead-lettered for running out of attempts.
-- Each row costs a few microseconds: LIKE recognises the prefixes (none
-- of the ids, topics and columns they name holds a ':', so stripping one
-- is removing two ': '-separated fields), the code's regular expression is
-- short, and the text's run only for a reason without a code (and once per
-- distinct reason when PostgreSQL memoizes them).
--
-- group_key names the group (error class, topic, event type): the first 16
-- hex digits of an MD5 of the three. The topic is the message's own column,
-- empty when the message named none and the relay's routes (or its default
-- topic) chose one at publish time: such messages group under the empty
-- topic, whatever topic they went to.
--
-- $1 aggregate type, $2 aggregate id, $3 event type, $7 error class, $8
-- topic, $9 group key ('' for any of them), $4 dead at or after, $5 seq
-- greater than, $10 seq at most (NULL for no bound), $11 the Kafka error
-- codes' names. $6 is the LIMIT of the including query.
SELECT m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.topic,
       m.created_at, d.dead_at, m.attempts, m.last_error, c.error_class, k.group_key
FROM {{schema}}.outbox_message_states(ARRAY['DEAD_LETTER']) m
CROSS JOIN LATERAL (
    SELECT coalesce((SELECT max(a.at)
                     FROM {{schema}}.outbox_attempts a
                     WHERE a.seq = m.seq AND a.dead), m.next_attempt_at) AS dead_at
    OFFSET 0
) d
CROSS JOIN LATERAL (
    SELECT position('{{permanent}}' IN m.last_error) > 0 AS permanent,
           replace(m.last_error, '{{permanent}}: ', '') AS text
    OFFSET 0
) p
CROSS JOIN LATERAL (
    SELECT CASE WHEN p.text LIKE 'kafka: publish message % to topic %: %'
                  OR p.text LIKE 'kafka: message % not published to topic %: %'
                  OR p.text LIKE 'relay: message % not published: %'
                  OR p.text LIKE 'cdc: decode column %: outbox: %'
                THEN regexp_replace(p.text, '^[^:]*: [^:]*: ', '')
                ELSE p.text END AS reason
    OFFSET 0
) r
CROSS JOIN LATERAL (
    SELECT CASE WHEN p.permanent THEN '' ELSE 'max attempts: ' END
           || coalesce((SELECT code
                        FROM substring(r.reason FROM '(?:^|: )([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+):') code
                        WHERE code = ANY ($11::text[])),
                       (SELECT nullif(CASE WHEN char_length(t) <= 80 THEN t
                                           ELSE coalesce(substring(left(t, 81) FROM '^(.*\S) '), left(t, 80)) || '…' END, '')
                        FROM btrim(regexp_replace(regexp_replace(regexp_replace(r.reason,
                                 '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
                                 '[0-9]+', 'N', 'g'),
                                 '\s+', ' ', 'g')) t),
                       'unknown') AS error_class
    OFFSET 0
) c
CROSS JOIN LATERAL (
    SELECT left(md5(concat_ws(E'\n', c.error_class, m.topic, m.event_type)), 16) AS group_key
    OFFSET 0
) k
WHERE ($1::text = '' OR m.aggregate_type = $1)
  AND ($2::text = '' OR m.aggregate_id = $2)
  AND ($3::text = '' OR m.event_type = $3)
  AND d.dead_at >= $4::timestamptz
  AND m.seq > $5::bigint
  AND ($7::text = '' OR c.error_class = $7)
  AND ($8::text = '' OR m.topic = $8)
  AND ($9::text = '' OR k.group_key = $9)
  AND ($10::bigint IS NULL OR m.seq <= $10)
