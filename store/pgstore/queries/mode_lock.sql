-- Store.SetMode, in its transaction: the recorded mode, locked until the
-- switch commits (a second switch waits, and then sees this one's result).
SELECT m.mode FROM {{schema}}.outbox_relay_mode m FOR UPDATE
