-- Only inserts are published: the relay's own updates (marks, dead letters)
-- and deletes (cleanup) must not flow back through the stream.
CREATE PUBLICATION {{publication}} FOR TABLE {{schema}}.outbox_messages WITH (publish = 'insert')
