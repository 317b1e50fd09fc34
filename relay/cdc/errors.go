package cdc

import "errors"

var (
	// ErrInvalidConfig is wrapped by the error [New] returns for a bad
	// Config; the message names the field.
	ErrInvalidConfig = errors.New("cdc: invalid config")
	// ErrAlreadyStarted is returned by Start when the relay runs already.
	ErrAlreadyStarted = errors.New("cdc: already started")
	// ErrSlotLost is wrapped by the error that stops the relay when the
	// replication slot it recorded is gone or was invalidated by
	// PostgreSQL (max_slot_wal_keep_size): the WAL since the slot's last
	// confirmed position cannot be read any more. The relay never creates a
	// replacement on its own; the error says how to recover (see
	// Config.RecreateSlot and docs/cdc.md).
	ErrSlotLost = errors.New("cdc: replication slot lost")
	// ErrNotReady is wrapped by the error that stops the relay when the
	// database cannot serve CDC: wal_level is not logical, the publication
	// exists but does not publish the outbox table's inserts, or the server
	// refuses replication connections (a connection pooler such as
	// PgBouncer: CDC must connect to PostgreSQL directly). Missing outbox
	// tables do not stop it: it logs an error wrapping
	// pgstore.ErrNotMigrated, which says how to fix it, and waits for them.
	ErrNotReady = errors.New("cdc: database not ready for CDC")
	// ErrSlotInUse is wrapped by the error [Remove] returns when a
	// walsender still streams from the slot after [RemoveWait]: a relay,
	// or another client, still runs on it.
	ErrSlotInUse = errors.New("cdc: replication slot in use")
	// ErrNotCDCMode is wrapped by the error that stops the relay when the
	// outbox is not in CDC mode (pgstore.Store.Mode): the relay checks it
	// each time it becomes the active relay for its slot, before it
	// creates or reads the slot and again before it streams, and while it
	// streams at each renewal of its lease. 'outbox mode set cdc'
	// (pgstore.Store.SetMode) switches the outbox.
	ErrNotCDCMode = errors.New("cdc: the outbox is not in cdc mode")
)
