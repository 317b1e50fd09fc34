package outbox

import (
	"errors"
	"fmt"
)

// ErrInvalidMessage is wrapped by every error that [Validate] and the stores'
// Enqueue methods return for a message that breaks a rule. Callers branch on it
// with errors.Is; errors.As with *[ValidationError] gives the field and rule.
var ErrInvalidMessage = errors.New("outbox: invalid message")

// ValidationError names the message (by its index in the enqueued slice), the
// field and the rule it breaks. It wraps [ErrInvalidMessage].
type ValidationError struct {
	// Index is the position of the message in the slice passed to Enqueue or
	// Validate, or -1 for a stored message checked before publishing
	// ([ValidateHeaders]).
	Index int
	// Field is the message field, spelled as in the Kafka headers
	// (aggregateId, eventType, payload, headers["x"], ...).
	Field string
	// Rule says what the value must satisfy.
	Rule string
}

func (e *ValidationError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("outbox: invalid message: %s: %s", e.Field, e.Rule)
	}
	return fmt.Sprintf("outbox: invalid message %d: %s: %s", e.Index, e.Field, e.Rule)
}

// Unwrap makes errors.Is(err, ErrInvalidMessage) true.
func (e *ValidationError) Unwrap() error { return ErrInvalidMessage }
