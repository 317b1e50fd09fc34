-- Wakes listening relays (Store.Notifications) when a transaction that
-- inserted messages commits: NOTIFY is delivered at commit, and not at all on
-- rollback. One notification per statement, not per row; the payload is
-- empty because the relay claims whatever is due anyway. The channel is
-- "outbox_" + schema, so outboxes in two schemas do not wake each other.
CREATE FUNCTION {{schema}}.outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify({{channel_literal}}, '');
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_messages_notify
    AFTER INSERT ON {{schema}}.outbox_messages
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.outbox_notify();
