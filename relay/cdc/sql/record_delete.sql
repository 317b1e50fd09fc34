    -- Cleanup "delete" ("write and forget"): the row goes.
    DELETE FROM {{schema}}.outbox_messages
    WHERE seq = ANY ($8::bigint[])
      AND status = 'PENDING'
      AND lease_token IS NULL
      AND EXISTS (SELECT 1 FROM lease)
    RETURNING 1
