// Package store defines the seam between the relay (and the operations
// tools) and a database backend. A backend, such as [pgstore], implements
// [Queue]; every backend must pass the same behavioural suite.
//
// The contract every Queue keeps:
//
//   - Claim returns only due messages (PENDING or FAILED with NextAttemptAt
//     reached, or IN_FLIGHT with an expired lease), and among those only the
//     head of each aggregate: a message is never claimed while an earlier
//     message (lower Seq) of the same aggregate is unsent (PENDING, FAILED,
//     IN_FLIGHT or DEAD_LETTER). Concurrent claims never return the same
//     message twice.
//   - A claim takes a lease: the messages are IN_FLIGHT, owned by the claim's
//     token until LeaseExpiresAt. After that another claim may take them over
//     with a new token.
//   - MarkSent, MarkFailed and Release change only messages that are still
//     IN_FLIGHT under the given token. A relay whose lease was taken over
//     changes nothing (fencing); the returned count says how many rows it
//     did change.
//   - A row that cannot be read as a message (written with plain SQL
//     outside the table's rules, such as headers that are not a JSON
//     object of string values) fails no claim: Claim leases it like any
//     other head, as a record with outbox.Record.Invalid set, and the
//     relay dead-letters it with MarkFailed. One bad row never stops the
//     messages beside it.
//
// [pgstore]: github.com/outbox-dev/outbox/store/pgstore
package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
)

// ErrNotMigrated is wrapped by a store's errors when its tables are not in
// the database (or not all of them): its migrations have not been run, or
// the store is configured with the wrong schema. The error's message says
// how to fix it ("run 'outbox migrate --schema outbox'"). The relay keeps
// retrying, so that it goes on once the tables exist; test for it with
// errors.Is.
var ErrNotMigrated = errors.New("store: tables missing; run the migrations")

// ClaimParams says who claims how much for how long.
type ClaimParams struct {
	// Owner names the relay instance; it is stored as the lease owner.
	Owner string
	// Limit is the most messages to claim.
	Limit int
	// Lease is how long the claim holds the messages.
	Lease time.Duration
	// MaxRun is the most consecutive messages of one aggregate the claim
	// may lease together, its head first (a run): the followers are the
	// messages right after the head, due and free, taken in seq order until
	// one is not. 0 and 1 claim heads only. A store that cannot claim runs
	// ignores it; the relay then publishes one message per aggregate per
	// batch.
	MaxRun int
	// MaxRunBytes bounds a run's payload: a follower joins only while the
	// payload bytes of the run, head included, stay within it. 0 means no
	// bound beyond MaxRun and Limit. The head is claimed whatever its size.
	MaxRunBytes int
}

// Claim is a batch of messages leased to one relay.
type Claim struct {
	// Token fences the claim: every later state change must present it.
	Token uuid.UUID
	// Records are IN_FLIGHT under Token, in Seq order.
	Records []outbox.Record
}

// Failure is the outcome of one failed publish.
type Failure struct {
	// Seq identifies the message.
	Seq int64
	// Error is kept as the message's LastError.
	Error string
	// Delay until the next attempt (NextAttemptAt = database now + Delay).
	Delay time.Duration
	// CountAttempt adds one to Attempts. False when the failure was not the
	// message's fault (the broker was unreachable).
	CountAttempt bool
	// Dead moves the message to DEAD_LETTER instead of FAILED.
	Dead bool
	// Unavailable is true when the broker could not be reached: nobody's
	// fault, and the relay pauses as a whole. A store records it like any
	// other failure (FAILED, due after Delay, no attempt counted); a
	// strategy that holds its messages in memory (CDC) gives the message
	// back to be published again after the pause instead.
	Unavailable bool
}

// Queue is what the relay needs from a store.
type Queue interface {
	// Claim leases up to p.Limit due messages in a short transaction of its
	// own: the aggregates' heads (a head is a message with nothing earlier
	// of its aggregate unsent), and with p.MaxRun above 1 each head's run
	// (see ClaimParams.MaxRun); a store that cannot claim runs leases heads
	// only.
	Claim(ctx context.Context, p ClaimParams) (Claim, error)
	// MarkSent marks the messages SENT with PublishedAt = now, if they are
	// still IN_FLIGHT under token. It returns the number of rows changed.
	MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error)
	// MarkFailed records failed attempts (FAILED or DEAD_LETTER), if the
	// messages are still IN_FLIGHT under token. It returns the number of
	// rows changed.
	MarkFailed(ctx context.Context, token uuid.UUID, failures []Failure) (int64, error)
	// Release gives messages back unsent and due at once (status PENDING, or
	// FAILED if they had failed attempts), without counting an attempt; used
	// on shutdown. It returns the number of rows changed.
	Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error)
}

// Notifier is implemented by stores that can wake the relay when messages
// are committed (PostgreSQL LISTEN/NOTIFY). The relay polls as well, so a
// store without it, or with it switched off, still works.
type Notifier interface {
	// Notifications returns a channel that receives a value soon after a
	// transaction that enqueued messages commits. It is closed when ctx is
	// done. Notifications may be coalesced or, after a reconnect, lost; the
	// relay's poll covers for that.
	Notifications(ctx context.Context) (<-chan struct{}, error)
	// Idle tells writers that relay owner is idle and waits for a
	// notification, for at most d. A store may notify only while some
	// relay is idle: notifying serializes commits.
	Idle(ctx context.Context, owner string, d time.Duration) error
	// Busy withdraws owner's Idle: it claims without waiting now.
	Busy(ctx context.Context, owner string) error
}

// MarkClaimer is implemented by stores that can mark a batch SENT and claim
// the next one in a single round trip to the database. The claim strategy
// (package relay/claim) uses it for every batch that was published without
// failures, halving its round trips; other stores keep working with
// MarkSent and Claim.
type MarkClaimer interface {
	// MarkSentAndClaim does MarkSent(ctx, token, seqs) and then
	// Claim(ctx, p), with the same guarantees as the two calls. The claim
	// sees the mark, so an aggregate's next message can be claimed at once.
	// Both happen in one transaction. On error the caller treats the batch
	// as not marked (a repeated MarkSent is harmless: it changes nothing
	// that is no longer IN_FLIGHT under token) and nothing as claimed
	// (anything claimed by a commit whose reply was lost becomes claimable
	// again when its lease expires, as with Claim).
	MarkSentAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p ClaimParams) (int64, Claim, error)
}
