package failure

import (
	"fmt"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/backoff"
	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// Defaults of Policy.
const (
	DefaultMaxAttempts = 10
	DefaultRetryBase   = time.Second
	DefaultRetryMax    = 300 * time.Second
)

// Policy decides what happens to a message whose publish failed. Zero
// fields take the defaults. A Policy is a value; its Pause, shared by
// every copy, is what the relay's workers have in common.
type Policy struct {
	// MaxAttempts is the number of counted attempts after which a message
	// becomes a dead letter. Defaults to 10.
	MaxAttempts int
	// RetryBase and RetryMax shape the delay before the next attempt after
	// n counted ones: min(RetryMax, RetryBase·2^n), less a random jitter of
	// up to half of it. Default to 1s and 300s.
	RetryBase, RetryMax time.Duration
	// Pause is the relay's pause while the broker is unreachable: Decide
	// starts or lengthens it for such an error, and the failure's delay is
	// the pause. Nil: the delay is PauseStart, and nothing pauses.
	Pause *Pause
}

func (p Policy) withDefaults() Policy {
	conf.Default(&p.MaxAttempts, DefaultMaxAttempts)
	conf.Default(&p.RetryBase, DefaultRetryBase)
	conf.Default(&p.RetryMax, DefaultRetryMax)
	return p
}

// Decide returns what happens to rec, whose publish failed with err (not
// nil) at now, as the store records it: the message's Seq, the error's
// text, and whether the attempt counts, when the next one is due and
// whether the message is dead (see the package documentation).
func (p Policy) Decide(rec outbox.Record, err error, now time.Time) store.Failure {
	p = p.withDefaults()
	f := store.Failure{Seq: rec.Seq, Error: err.Error()}
	switch classify(rec, err) {
	case sink.Permanent:
		f.CountAttempt, f.Dead = true, true
	case sink.TopicUnavailable:
		f.Delay = sink.TopicRetryDelay(err, now)
	case sink.Unavailable:
		f.Unavailable = true
		f.Delay = PauseStart
		if p.Pause != nil {
			f.Delay = p.Pause.Next(now)
		}
	default:
		attempts := rec.Attempts + 1
		f.CountAttempt = true
		f.Dead = attempts >= p.MaxAttempts
		f.Delay = backoff.Delay(p.RetryBase, p.RetryMax, attempts)
	}
	return f
}

// classify is err's class, Permanent for a record that is itself invalid.
func classify(rec outbox.Record, err error) sink.Class {
	if rec.Invalid != nil {
		return sink.Permanent
	}
	return sink.Classify(err)
}

// SinkResults checks that a sink's Publish returned one error per record,
// as sink.Sink requires: n is the number of records. If it did, errs is
// returned as it is and bug is nil. Otherwise the sink has a bug: every
// record gets an error that wraps both [sink.ErrUnavailable] and bug, so
// that nothing is counted or dead-lettered for it and the relay pauses as
// for an unreachable broker, and the caller logs bug.
func SinkResults(errs []error, n int) (_ []error, bug error) {
	if len(errs) == n {
		return errs, nil
	}
	bug = fmt.Errorf("sink returned %d results for %d records", len(errs), n)
	out := make([]error, n)
	for i := range out {
		out[i] = fmt.Errorf("%w: %w", sink.ErrUnavailable, bug)
	}
	return out, bug
}
