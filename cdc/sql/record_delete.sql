    -- Cleanup "delete" ("write and forget"): the row goes.
    DELETE FROM {{schema}}.outbox_messages
    WHERE seq = ANY ($8::bigint[])
      AND status = 'PENDING'
    RETURNING 1
