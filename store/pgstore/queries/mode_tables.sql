-- Store.Mode and Store.SetMode: which of the tables that decide the relay
-- mode exist (outbox_cdc_slots is created by the CDC relay, the others by
-- the migrations), and whether the server can serve CDC. The statements
-- that read a table run only when it exists.
SELECT to_regclass('{{schema}}.outbox_messages') IS NOT NULL,
       to_regclass('{{schema}}.outbox_cursor') IS NOT NULL,
       to_regclass('{{schema}}.outbox_cdc_slots') IS NOT NULL,
       to_regclass('{{schema}}.outbox_relay_mode') IS NOT NULL,
       current_setting('wal_level')
