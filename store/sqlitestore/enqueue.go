package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/outbox-dev/outbox"
)

// Enqueue writes msgs to the outbox inside the caller's transaction tx. The
// messages become visible to the relay only if tx commits; if tx rolls back
// they are gone, as if never enqueued. That is the point of the outbox: the
// events commit or vanish together with the business change.
//
// tx should come from a *sql.DB opened with [Open], which makes it take the
// write lock at BEGIN. SQLite has one writer at a time, so a message's seq
// is given out while its transaction holds that lock: within an aggregate,
// enqueue order is commit order, and the relay publishes in that order.
//
// Enqueue first fills in defaults and validates every message with
// [outbox.Prepare]; an invalid message gives a *[outbox.ValidationError]
// (wrapping [outbox.ErrInvalidMessage]) naming its index and field, and
// nothing is written. Valid messages are inserted with one prepared
// statement. Enqueue with no messages does nothing.
func (s *Store) Enqueue(ctx context.Context, tx *sql.Tx, msgs ...outbox.Message) error {
	prepared, err := outbox.Prepare(ctx, s.cfg.Limits, msgs)
	if err != nil || len(prepared) == 0 {
		return err
	}
	headers := make([]string, len(prepared))
	for i, m := range prepared {
		headers[i] = "{}"
		if len(m.Headers) > 0 {
			b, err := json.Marshal(m.Headers)
			if err != nil {
				return fmt.Errorf("sqlitestore: encode headers of message %d: %w", i, err)
			}
			headers[i] = string(b)
		}
	}
	if tx == nil {
		return fmt.Errorf("sqlitestore: enqueue: nil transaction")
	}
	stmt, err := tx.PrepareContext(ctx, s.q.enqueue)
	if err != nil {
		return fmt.Errorf("sqlitestore: enqueue %d messages: %w", len(prepared), err)
	}
	defer stmt.Close()
	for i, m := range prepared {
		payload := m.Payload
		if payload == nil {
			payload = []byte{} // a zero-length BLOB, not NULL
		}
		_, err := stmt.ExecContext(ctx,
			m.ID.String(), m.AggregateType, m.AggregateID, m.EventType, m.EventVersion, m.Topic,
			payload, m.ContentType, headers[i], m.CorrelationID, m.CausationID, m.TraceParent)
		if err != nil {
			return fmt.Errorf("sqlitestore: enqueue message %d (id %s): %w", i, m.ID, err)
		}
	}
	return nil
}
