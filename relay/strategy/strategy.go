// Package strategy defines the seam between the relay's core (package
// relay: workers, publishing, failures, lifecycle) and a way of finding
// the messages to publish. Each strategy is a package of its own:
//
//   - [github.com/outbox-dev/outbox/relay/claim]: every relay claims due
//     messages from a store.Queue and marks each one; any number of relays
//     share the work.
//   - [github.com/outbox-dev/outbox/relay/cursor]: one relay at a time, the
//     leader, reads the table in seq order and keeps a position instead of
//     marking each message (PostgreSQL).
//   - [github.com/outbox-dev/outbox/relay/cdc]: one relay at a time reads
//     the inserts from PostgreSQL's write-ahead log; its stream strategy
//     hands out the messages read, in commit order, and records the marks
//     in grouped statements (the package runs the relay itself:
//     cdc.New).
//
// The core drives a Strategy and never asks which one it is: it claims a
// batch, publishes it, and hands back what became of each message (sent,
// failed as package failure decided, or given back). A strategy that
// abandons a publish because its source of messages ended (it wraps the
// relay's sink, whose errors then wrap [ErrAbandoned]) gets the message
// back with Release: the core neither pauses nor counts anything for it.
//
// [github.com/outbox-dev/outbox/relay/modes] is a Strategy made of the two
// for PostgreSQL: it runs the one the outbox records ("outbox mode") and
// follows a switch from claim to cursor while the relay runs.
package strategy

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
)

// Strategy finds the messages to publish and records what became of them.
// Its methods are called by several workers at once. Every record method
// is fenced by the claim's token: a relay whose claim was taken over
// changes nothing, and the count returned says how many messages it did
// change.
type Strategy interface {
	// Claim leases up to p.Limit messages to p.Owner for p.Lease, keeping
	// order per aggregate: a message is never handed out while an earlier
	// message of its aggregate is unsent or held by another claim. The
	// records are in the order the strategy publishes in: Seq order (claim,
	// cursor) or commit order (CDC).
	Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error)
	// MarkSent records seqs of the claim token as sent. When next is not
	// nil, the worker claims again right after: the strategy may claim the
	// next batch with next.Params in the same round trip and return it,
	// after calling next.Linger, and only if Linger reports true. It
	// returns a nil claim when it did not claim; the core then calls
	// next.Linger itself if the strategy did not, and Claim. On error
	// nothing counts as marked and nothing as claimed. A strategy may
	// return before the mark is durable (CDC groups its records): it then
	// calls the relay's Published hook itself, once the mark is.
	MarkSent(ctx context.Context, token uuid.UUID, seqs []int64, next *Next) (int64, *store.Claim, error)
	// MarkFailed records failed publishes, as package failure decided them
	// (FAILED with a retry time, or DEAD_LETTER). A strategy that holds its
	// messages in memory gives those with Failure.Unavailable back
	// instead of recording them.
	MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error)
	// Release gives messages back unsent and due at once, counting no
	// attempt.
	Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error)
	// Wakeups returns what tells the relay of new messages, or nil when
	// the strategy has nothing but polling.
	Wakeups() store.Notifier
	// Close ends the strategy after the relay's last mark; a leader hands
	// its lead over, so that another relay leads at once. A failure only
	// means that another relay takes over when the lead's lease ends. It
	// is called once.
	Close(ctx context.Context) error
}

// Next asks MarkSent to claim the next batch as well.
type Next struct {
	// Params are the claim's.
	Params store.ClaimParams
	// Linger waits before the claim, so that it finds more messages
	// (relay.Config.Linger); it returns early when the relay stops. It
	// reports whether the relay still wants the batch: false when it
	// stops or pauses (the broker is unreachable), and the strategy then
	// only marks. It waits once: a second call returns at once. Not nil.
	Linger func() bool
}

// StopError is returned, wrapped or not, by a strategy's Claim when the
// strategy cannot go on (its source of messages is gone, or the outbox
// left the strategy's mode for good): the relay then stops as Stop does,
// and Err, Stop and Run return Err. Create it with [Stop].
type StopError struct {
	// Err is why the strategy stopped.
	Err error
}

func (e *StopError) Error() string { return "strategy stopped: " + e.Err.Error() }

func (e *StopError) Unwrap() error { return e.Err }

// Stop returns err as a StopError, for a Claim that ends the relay.
func Stop(err error) error { return &StopError{Err: err} }

// ErrAbandoned marks the error of a publish the strategy abandoned because
// its source of messages ended (a sink of the strategy's own, wrapping the
// relay's, returns it, wrapped or not): the core gives the message back
// with Release, without pausing and without counting anything: no attempt,
// no failure reported, no Hooks.Failed. The core checks for it before it
// classifies the error (package sink), so that an error that wraps both
// ErrAbandoned and sink.ErrUnavailable is abandoned, not unavailable.
var ErrAbandoned = errors.New("strategy: publish abandoned: its source of messages ended")
