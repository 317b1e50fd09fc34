package cdc

import (
	"time"

	"github.com/outbox-dev/outbox"
)

// Hooks observe what the relay does, for metrics and tracing. Every field is
// optional; hooks run on the relay's goroutines and must return quickly.
type Hooks struct {
	// Published is called for each message the broker acknowledged, after
	// its row was marked (or deleted), with the time since it was created.
	// It is called for the stream and for the table path alike.
	Published func(rec outbox.Record, sinceCreated time.Duration)
	// Failed is called for each failed publish, once it is recorded, except
	// those that found the broker unreachable (given back, nothing
	// counted); dead is true when the message became DEAD_LETTER.
	Failed func(rec outbox.Record, err error, dead bool)
	// Deferred is called for each message the stream hands to the table
	// path instead of publishing it (its aggregate is blocked or deferred,
	// or its row is owned by another relay).
	Deferred func(rec outbox.Record)
}
