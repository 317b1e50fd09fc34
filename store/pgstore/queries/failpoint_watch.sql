-- Failpoint builds only: queued before failpoint_pause.sql. The server then
-- checks every 100 ms whether the client is still there while the pause
-- runs, and when the relay was killed it ends the session and rolls the
-- uncommitted mark back, as for a relay that died with its mark in flight.
-- (The check is armed when a statement starts, so it is a statement of its
-- own.)
SELECT set_config('client_connection_check_interval', '100', true)
