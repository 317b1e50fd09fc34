-- A message's own headers (outbox_messages.headers) are a JSON object whose
-- values are strings: they become Kafka headers, whose values are strings,
-- and Store.Enqueue writes nothing else. A writer with its own SQL (another
-- service, a script, a database trigger) that writes other JSON, such as
-- '{"x": 1}', '{"x": null}', '[]' or 'null', now has its INSERT refused:
--
--   ERROR: outbox_messages.headers must be a JSON object of string values:
--          the value of "x" is a number (SQLSTATE 23514)
--
-- with the constraint name outbox_messages_headers_are_strings (pgconn's
-- PgError.ConstraintName), so the business transaction rolls back and
-- nothing is lost. An UPDATE that sets headers is held to the same rule.
--
-- A row trigger rather than a CHECK constraint, because rows written before
-- this migration may break the rule and must still move through their
-- states. A CHECK constraint, even NOT VALID, is checked on every new row
-- version, so the claim's UPDATE of such a row, the relay's mark of it as a
-- dead letter and an operator's discard would all fail, and the claim that
-- fails takes the other messages of its batch down with it; partitioning
-- the table later would have to validate it; and its error prints the
-- whole row, payload included. The trigger fires on INSERT and on an
-- UPDATE that sets headers, never on the relay's changes of state.
--
-- So a row written before this migration with such headers is claimed like
-- any other, read as invalid (pgstore reads each row's headers on its own),
-- and dead-lettered with the column and the rule as its reason, while the
-- messages beside it are published; the later messages of its aggregate
-- wait behind it as behind any dead letter. Correct its headers with an
-- UPDATE (which the trigger checks) and replay it, or discard it. The same
-- holds on a time-partitioned table: a row trigger on the partitioned
-- table is cloned to every partition, those attached later too, and
-- partitioning a plain table later validates nothing. No existing row is
-- read, so the migration takes a moment however large the table is.
--
-- Cost: the trigger's WHEN compares each inserted row's headers with '{}'
-- (the common case, which calls no function) and otherwise calls
-- outbox_headers_are_strings. That is PL/pgSQL, not SQL: an SQL function
-- would be inlined, and its jsonpath parsed, again for every statement,
-- whatever the headers. The trigger function, which builds the error,
-- runs only for a row that breaks the rule. (Measured in
-- docs/performance-history.md.)
--
-- outbox_headers_are_strings also finds rows written before this
-- migration that break the rule:
--
--   SELECT seq, id, status FROM outbox.outbox_messages
--   WHERE NOT outbox.outbox_headers_are_strings(headers);
CREATE FUNCTION {{schema}}.outbox_headers_are_strings(headers jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN jsonb_typeof(headers) = 'object'
        AND NOT jsonb_path_exists(headers, 'strict $.* ? (@.type() != "string")');
END
$$;

-- The kind of a JSON value as the error says it ("a number").
CREATE FUNCTION {{schema}}.outbox_json_kind(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(v)
        WHEN 'object' THEN 'an object'
        WHEN 'array' THEN 'an array'
        WHEN 'string' THEN 'a string'
        WHEN 'number' THEN 'a number'
        WHEN 'boolean' THEN 'a boolean'
        ELSE 'null'
    END
$$;

-- Refuses the row that fired it, naming the first value that is not a
-- string (by byte order of the names, as pgstore's reason for an older
-- row does).
CREATE FUNCTION {{schema}}.outbox_refuse_headers() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    what text;
BEGIN
    IF jsonb_typeof(NEW.headers) = 'object' THEN
        SELECT format('the value of %s is %s', to_jsonb(key), {{schema}}.outbox_json_kind(value)) INTO what
        FROM jsonb_each(NEW.headers)
        WHERE jsonb_typeof(value) <> 'string'
        ORDER BY key COLLATE "C"
        LIMIT 1;
    ELSE
        what := 'it is ' || {{schema}}.outbox_json_kind(NEW.headers);
    END IF;
    RAISE EXCEPTION 'outbox_messages.headers must be a JSON object of string values: %', what
        USING ERRCODE = 'check_violation',
              CONSTRAINT = 'outbox_messages_headers_are_strings',
              SCHEMA = TG_TABLE_SCHEMA,
              TABLE = TG_TABLE_NAME,
              COLUMN = 'headers',
              HINT = 'Kafka header values are strings: write each value as a JSON string.';
END
$$;

-- Named like a constraint: it is the rule the error names. Store.Migrate
-- carries it over when it partitions the table (partition.go).
CREATE TRIGGER outbox_messages_headers_are_strings
    BEFORE INSERT OR UPDATE OF headers ON {{schema}}.outbox_messages
    FOR EACH ROW
    WHEN (NEW.headers <> '{}'::jsonb AND NOT {{schema}}.outbox_headers_are_strings(NEW.headers))
    EXECUTE FUNCTION {{schema}}.outbox_refuse_headers();
