package inbox

import "errors"

var (
	// ErrMalformed is wrapped by FromRecord's errors: the record does not
	// follow the outbox's record contract. Such a record is parked at once.
	// [Inbox.Handle] and [Inbox.Replay] return it (wrapped) for a message
	// without an ID, which cannot be deduplicated.
	ErrMalformed = errors.New("inbox: malformed record")
	// ErrPermanent is wrapped by handler errors that retrying cannot fix
	// (an unknown event version, a payload that breaks its contract): the
	// runner parks the message at once instead of retrying it.
	ErrPermanent = errors.New("inbox: permanent handler error")
	// ErrInvalidConfig is wrapped by the error [New] and [NewSQLite] return
	// for a config they cannot use; the message names the bad field.
	ErrInvalidConfig = errors.New("inbox: invalid config")
	// ErrNotFound is returned (wrapped) by [Inbox.Replay] and
	// [SQLiteInbox.Replay] when the consumer has no parked message with the
	// id.
	ErrNotFound = errors.New("inbox: parked message not found")
)
