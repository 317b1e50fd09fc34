-- Drops a phase's schema with everything in it.
DROP SCHEMA IF EXISTS {{schema}} CASCADE
