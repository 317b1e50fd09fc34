package relay

import (
	"time"

	"github.com/outbox-dev/outbox"
)

// Hooks observe what the relay does, for metrics and tracing. Every field is
// optional; hooks run on the relay's goroutines and must return quickly.
type Hooks struct {
	// Claimed is called after each non-empty claim with the batch size.
	Claimed func(n int)
	// Published is called for each message the broker acknowledged and
	// that was marked SENT, with the time since it was created.
	Published func(rec outbox.Record, sinceCreated time.Duration)
	// Failed is called for each failed publish; dead is true when the
	// message became DEAD_LETTER.
	Failed func(rec outbox.Record, err error, dead bool)
	// Fenced is called when a mark changed fewer rows than expected because
	// the lease had been taken over.
	Fenced func(n int)
}
