    -- Cleanup "mark-sent": the row keeps a record of the publish.
    UPDATE {{schema}}.outbox_messages
    SET status = 'SENT',
        published_at = now(),
        last_error = ''
    WHERE seq = ANY ($8::bigint[])
      AND status = 'PENDING'
      AND lease_token IS NULL
      AND EXISTS (SELECT 1 FROM lease)
    RETURNING 1
