package failure

import (
	"log/slog"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

// Lines are the log messages of a Reporter, one per outcome.
type Lines struct {
	// Dead is logged at ERROR for a message that became a dead letter.
	Dead string
	// Retry is logged at WARN for a counted attempt with a retry scheduled.
	Retry string
	// Wait is logged at DEBUG for a failure that was not the message's
	// fault (no attempt counted), with a retry scheduled; not for an
	// unreachable broker (store.Failure.Unavailable), which logs
	// UnavailableLine.
	Wait string
}

// UnavailableLine is logged at DEBUG by every Reporter for a failure that
// found the broker unreachable (store.Failure.Unavailable): no attempt is
// counted, and the message is tried again once the relay's pause is over,
// whether the strategy recorded a retry or holds the message in memory and
// gave it back.
const UnavailableLine = "broker unreachable; the message is tried again after the relay's pause, without counting an attempt"

// RelayLines are the polling relay's lines, a Reporter's default.
var RelayLines = Lines{
	Dead:  "message dead-lettered",
	Retry: "publish failed; retry scheduled",
	Wait:  "not the message's fault; retry scheduled without counting an attempt",
}

// Reporter logs decided failures and passes them to the relay's Failed
// hook. Every line carries message_id, seq, aggregate_type, aggregate_id,
// event_type, attempts (counting this one when it counts) and error, and,
// unless the message is dead, retry_in.
type Reporter struct {
	// Log receives the lines. Defaults to slog.Default().
	Log *slog.Logger
	// Lines are the messages logged. Zero: RelayLines.
	Lines Lines
	// Failed, if set, is called for every failure reported; dead is true
	// when the message became a dead letter. It must return quickly.
	Failed func(rec outbox.Record, err error, dead bool)
}

// Report logs f, decided for rec whose publish failed with err, and calls
// the Failed hook.
func (rp Reporter) Report(rec outbox.Record, err error, f store.Failure) {
	log, lines := rp.Log, rp.Lines
	if log == nil {
		log = slog.Default()
	}
	if lines == (Lines{}) {
		lines = RelayLines
	}
	attempts := rec.Attempts
	if f.CountAttempt {
		attempts++
	}
	attrs := RecordAttrs(rec, slog.Int("attempts", attempts), slog.String("error", f.Error))
	switch {
	case f.Dead:
		log.Error(lines.Dead, attrs...)
	case f.CountAttempt:
		log.Warn(lines.Retry, append(attrs, slog.Duration("retry_in", f.Delay))...)
	case f.Unavailable:
		log.Debug(UnavailableLine, append(attrs, slog.Duration("retry_in", f.Delay))...)
	default:
		log.Debug(lines.Wait, append(attrs, slog.Duration("retry_in", f.Delay))...)
	}
	if rp.Failed != nil {
		rp.Failed(rec, err, f.Dead)
	}
}

// RecordAttrs are the log attributes that identify rec (message_id, seq,
// aggregate_type, aggregate_id, event_type), followed by extra.
func RecordAttrs(rec outbox.Record, extra ...any) []any {
	return append([]any{slog.String("message_id", rec.ID.String()), slog.Int64("seq", rec.Seq),
		slog.String("aggregate_type", rec.AggregateType), slog.String("aggregate_id", rec.AggregateID),
		slog.String("event_type", rec.EventType)}, extra...)
}
