-- A message's own headers (<prefix>messages.headers) are a JSON object
-- whose values are strings: they become Kafka headers, whose values are
-- strings, and Store.Enqueue writes nothing else. A writer with its own SQL
-- that writes other JSON, such as '{"x": 1}', '{"x": null}', '[]' or
-- 'null', now has its INSERT (or UPDATE of headers) aborted with
--
--   <prefix>messages.headers must be a JSON object of string values
--
-- (the prefix is Config.TablePrefix, outbox_ by default), so its
-- transaction can roll back and nothing is lost. Text that is not JSON at
-- all is left to the column's CHECK (json_valid(headers)).
--
-- Triggers rather than a CHECK constraint: SQLite cannot add a constraint to
-- an existing table, and rows written before this migration may break the
-- rule and must still move through their states (claimed, dead-lettered,
-- discarded), which a CHECK would refuse on every UPDATE. Such a row is
-- claimed like any other, read as invalid (Store reads each row's headers
-- on its own), and dead-lettered with the column and the rule as its
-- reason while the messages beside it are published; the later messages of
-- its aggregate wait behind it as behind any dead letter.
--
-- The message is a string literal, not an expression naming the value:
-- SQLite before 3.47 cannot parse an expression there, and another
-- program opening the database file with such a version would then fail to
-- read its schema at all. The relay's reason for a row written earlier
-- names the value.
CREATE TRIGGER "{{prefix}}messages_headers_are_strings"
BEFORE INSERT ON "{{prefix}}messages"
WHEN NEW.headers <> '{}' AND json_valid(NEW.headers)
     AND (json_type(NEW.headers) <> 'object'
          OR EXISTS (SELECT 1 FROM json_each(NEW.headers) WHERE type <> 'text'))
BEGIN
    SELECT RAISE(ABORT, '{{prefix}}messages.headers must be a JSON object of string values');
END;

CREATE TRIGGER "{{prefix}}messages_headers_are_strings_on_update"
BEFORE UPDATE OF headers ON "{{prefix}}messages"
WHEN NEW.headers <> '{}' AND json_valid(NEW.headers)
     AND (json_type(NEW.headers) <> 'object'
          OR EXISTS (SELECT 1 FROM json_each(NEW.headers) WHERE type <> 'text'))
BEGIN
    SELECT RAISE(ABORT, '{{prefix}}messages.headers must be a JSON object of string values');
END;
