package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-dev/outbox"
)

// Enqueue writes msgs to the outbox inside the caller's transaction tx.
// The messages become visible to the relay only if tx commits; if tx rolls
// back they are gone, as if never enqueued. That is the point of the outbox:
// the events commit or vanish together with the business change. tx is a
// transaction by its type: a pool or a connection, which would commit the
// events on their own, is not accepted. A nil tx is an error; a nil
// pointer in a non-nil pgx.Tx is a programming error and panics.
//
// Enqueue first fills in defaults and validates every message with
// [outbox.Prepare]; an invalid message gives a *[outbox.ValidationError]
// (wrapping [outbox.ErrInvalidMessage]) naming its index and field, and
// nothing is written. Valid messages are inserted with one statement in one
// round trip, however many there are. Enqueue with no messages does nothing.
//
// *Store is an [outbox.Enqueuer] of [pgx.Tx]; [Store.SQL] is the same for
// database/sql.
func (s *Store) Enqueue(ctx context.Context, tx pgx.Tx, msgs ...outbox.Message) error {
	args, err := s.enqueueArgs(ctx, msgs)
	if err != nil || args == nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("pgstore: enqueue: nil transaction")
	}
	if _, err := tx.Exec(ctx, s.q.enqueue, args...); err != nil {
		return fmt.Errorf("pgstore: enqueue %d messages: %w", len(msgs), s.explain(err))
	}
	return nil
}

// SQL returns the store's [outbox.Enqueuer] for database/sql: its Enqueue
// is [Store.Enqueue] on a *sql.Tx, which must come from a *sql.DB opened
// with pgx's driver (github.com/jackc/pgx/v5/stdlib, driver name "pgx"),
// which passes the array arguments through. Application code written
// against an outbox.Enqueuer[*sql.Tx] runs on PostgreSQL with this and on
// SQLite with a *sqlitestore.Store.
func (s *Store) SQL() outbox.Enqueuer[*sql.Tx] { return sqlEnqueuer{s} }

// sqlEnqueuer is [Store.SQL].
type sqlEnqueuer struct{ s *Store }

// Enqueue writes msgs inside tx, visible only if tx commits and gone if it
// rolls back; see [Store.Enqueue].
func (e sqlEnqueuer) Enqueue(ctx context.Context, tx *sql.Tx, msgs ...outbox.Message) error {
	args, err := e.s.enqueueArgs(ctx, msgs)
	if err != nil || args == nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("pgstore: enqueue: nil transaction")
	}
	if _, err := tx.ExecContext(ctx, e.s.q.enqueue, args...); err != nil {
		return fmt.Errorf("pgstore: enqueue %d messages: %w", len(msgs), e.s.explain(err))
	}
	return nil
}

var (
	_ outbox.Enqueuer[pgx.Tx]  = (*Store)(nil)
	_ outbox.Enqueuer[*sql.Tx] = sqlEnqueuer{}
)

// enqueueArgs prepares and validates msgs and returns the column arrays of
// enqueue.sql, or nil when there is nothing to write.
func (s *Store) enqueueArgs(ctx context.Context, msgs []outbox.Message) ([]any, error) {
	prepared, err := outbox.Prepare(ctx, s.cfg.Limits, msgs)
	if err != nil {
		return nil, err
	}
	if len(prepared) == 0 {
		return nil, nil
	}
	n := len(prepared)
	var (
		// pgtype.UUID, not uuid.UUID: pgx encodes a uuid.UUID through its
		// driver.Valuer, as a string it fails to encode, formats an error
		// for, parses again and then encodes, for every message.
		ids            = make([]pgtype.UUID, n)
		aggregateTypes = make([]string, n)
		aggregateIDs   = make([]string, n)
		eventTypes     = make([]string, n)
		eventVersions  = make([]int32, n)
		topics         = make([]string, n)
		payloads       = make([][]byte, n)
		contentTypes   = make([]string, n)
		headers        = make([]string, n)
		correlationIDs = make([]string, n)
		causationIDs   = make([]string, n)
		traceparents   = make([]string, n)
	)
	for i, m := range prepared {
		if err := checkStorable(i, &m); err != nil {
			return nil, err
		}
		h := "{}"
		if len(m.Headers) > 0 {
			b, err := json.Marshal(m.Headers)
			if err != nil {
				return nil, fmt.Errorf("pgstore: encode headers of message %d: %w", i, err)
			}
			h = string(b)
		}
		ids[i] = pgtype.UUID{Bytes: m.ID, Valid: true}
		aggregateTypes[i] = m.AggregateType
		aggregateIDs[i] = m.AggregateID
		eventTypes[i] = m.EventType
		eventVersions[i] = int32(m.EventVersion)
		topics[i] = m.Topic
		payloads[i] = m.Payload
		contentTypes[i] = m.ContentType
		headers[i] = h
		correlationIDs[i] = m.CorrelationID
		causationIDs[i] = m.CausationID
		traceparents[i] = m.TraceParent
	}
	return []any{
		ids, aggregateTypes, aggregateIDs, eventTypes, eventVersions, topics,
		payloads, contentTypes, headers, correlationIDs, causationIDs, traceparents,
	}, nil
}

// checkStorable rejects what outbox.Prepare lets through but the columns
// cannot hold: an event version beyond int4, and a NUL character in a header
// value (jsonb refuses \u0000).
func checkStorable(i int, m *outbox.Message) error {
	if m.EventVersion > math.MaxInt32 {
		return &outbox.ValidationError{Index: i, Field: "eventVersion", Rule: fmt.Sprintf("must be at most %d", math.MaxInt32)}
	}
	for name, value := range m.Headers {
		if strings.ContainsRune(value, 0) {
			return &outbox.ValidationError{Index: i, Field: fmt.Sprintf("headers[%q]", name), Rule: "value must not contain NUL characters"}
		}
	}
	return nil
}
