-- Store.Partitions: the partitions of outbox_messages with their bounds.
-- pg_get_expr renders the bound as FOR VALUES FROM ('…') TO ('…'), with the
-- timestamps in this session's DateStyle and TimeZone, which the casts below
-- read back in the same session. MINVALUE and MAXVALUE become NULL.
SELECT c.relname::text,
       b.expr = 'DEFAULT' AS is_default,
       CASE WHEN m.r[1] IS NULL OR m.r[1] = 'MINVALUE' THEN NULL
            ELSE btrim(m.r[1], '''')::timestamptz END AS lower_bound,
       CASE WHEN m.r[2] IS NULL OR m.r[2] = 'MAXVALUE' THEN NULL
            ELSE btrim(m.r[2], '''')::timestamptz END AS upper_bound
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) b
CROSS JOIN LATERAL (SELECT regexp_match(b.expr, '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS r) m
WHERE i.inhparent = to_regclass(format('%I.outbox_messages', $1::text))
ORDER BY lower_bound NULLS FIRST, c.relname
