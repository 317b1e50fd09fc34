package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/internal/errtext"
)

// Limits of the parked-message API.
const (
	// DefaultParkedLimit is what [Inbox.Parked] returns at most when
	// ParkedFilter.Limit is 0.
	DefaultParkedLimit = 100
)

// Parked is a message a consumer gave up on, as [Inbox.Parked] lists it.
type Parked struct {
	// ID identifies the parked entry (not the message); pass it to
	// [Inbox.Replay].
	ID       uuid.UUID
	Consumer string
	// Message is the message as it was delivered: payload, headers, topic,
	// partition and offset. Its ID is the nil UUID for a record that had
	// no valid eventId.
	Message Message
	// Error is the last error, at most 4000 bytes.
	Error string
	// Attempts is the number of times the handler ran (0 for a malformed
	// record).
	Attempts int
	ParkedAt time.Time
	// ReplayedAt is when a Replay applied the message or found it already
	// applied; zero while it waits.
	ReplayedAt time.Time
}

// ParkedFilter selects parked messages. The zero value lists up to
// DefaultParkedLimit entries of every consumer that are not yet replayed.
type ParkedFilter struct {
	// Consumer selects one consumer's entries. Defaults to "": all.
	Consumer string
	// EventType selects one event type. Defaults to "": all.
	EventType string
	// Limit is the most entries returned. Defaults to 100.
	Limit int
	// IncludeReplayed lists replayed entries too. Defaults to false.
	IncludeReplayed bool
}

// Park keeps msg as a message consumer gave up on, with its payload,
// headers, topic, partition and offset, the number of attempts and cause's
// text, so that it can be inspected ([Inbox.Parked]) and replayed
// ([Inbox.Replay]) once the cause is fixed. It runs in a transaction of its
// own. Parking the same record (same consumer, topic, partition, offset and
// message id) again keeps the first entry and returns nil, so a consumer
// that crashed after parking and before committing its offset does not
// park the record twice.
//
// Header values are stored as JSON text: invalid UTF-8 and NUL bytes in
// them are replaced by U+FFFD. The payload is stored byte for byte.
func (i *Inbox) Park(ctx context.Context, consumer string, msg Message, attempts int, cause error) error {
	return park(ctx, i.log, consumer, msg, attempts, cause, func(ctx context.Context, e parkEntry) (bool, error) {
		var ts *time.Time
		if !e.msg.Timestamp.IsZero() {
			ts = &e.msg.Timestamp
		}
		rows, err := i.pool.Query(ctx, i.q.park, e.id, e.consumer, e.msg.ID, e.msg.EventType, e.msg.AggregateID,
			e.msg.Topic, e.msg.Partition, e.msg.Offset, ts, e.headers, e.msg.Payload, e.error, e.attempts)
		if err != nil {
			return false, err
		}
		inserted, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		return len(inserted) > 0, err
	})
}

// parkEntry is a message made ready to be parked: its text cleaned, its
// headers encoded, its error cut to size, a new entry id.
type parkEntry struct {
	id       uuid.UUID
	consumer string
	// msg has EventType, AggregateID and Topic cleaned.
	msg      Message
	headers  []byte // JSON object
	error    string // cleaned, at most errtext.MaxBytes
	attempts int
}

// park is Park on any database: insert stores e, reporting whether it was
// new (false when the same record was parked before).
func park(ctx context.Context, log *slog.Logger, consumer string, msg Message, attempts int, cause error,
	insert func(context.Context, parkEntry) (bool, error)) error {
	if consumer == "" {
		return errors.New("inbox: park: empty consumer name")
	}
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("inbox: park: new id: %w", err)
	}
	headers := make(map[string]string, len(msg.Headers))
	for k, v := range msg.Headers {
		headers[cleanText(k)] = cleanText(v)
	}
	headersJSON, err := json.Marshal(headers)
	if err != nil {
		return fmt.Errorf("inbox: park message %s: encode headers: %w", msg.ID, err)
	}
	text := "unknown error"
	if cause != nil {
		text = cause.Error()
	}
	e := parkEntry{id: id, consumer: consumer, msg: msg, headers: headersJSON,
		error: errtext.Truncate(cleanText(text), errtext.MaxBytes), attempts: attempts}
	e.msg.EventType, e.msg.AggregateID, e.msg.Topic = cleanText(msg.EventType), cleanText(msg.AggregateID), cleanText(msg.Topic)
	inserted, err := insert(ctx, e)
	if err != nil {
		return fmt.Errorf("inbox: park message %s: %w", msg.ID, err)
	}
	attrs := append(msgAttrs(consumer, msg), slog.Int("attempts", attempts), slog.String("error", text))
	if !inserted {
		log.Info("inbox: message was parked already", attrs...)
		return nil
	}
	log.Warn("inbox: message parked", append(attrs, slog.String("parked_id", id.String()))...)
	return nil
}

// Parked lists parked messages that match f, oldest first.
func (i *Inbox) Parked(ctx context.Context, f ParkedFilter) ([]Parked, error) {
	f, err := f.withDefaults()
	if err != nil {
		return nil, err
	}
	rows, err := i.pool.Query(ctx, i.q.parked, f.Consumer, f.EventType, f.IncludeReplayed, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("inbox: parked: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanParked)
	if err != nil {
		return nil, fmt.Errorf("inbox: parked: %w", err)
	}
	return out, nil
}

// withDefaults checks f and fills in its default Limit.
func (f ParkedFilter) withDefaults() (ParkedFilter, error) {
	if f.Limit < 0 {
		return f, fmt.Errorf("inbox: parked: Limit %d must not be negative", f.Limit)
	}
	if f.Limit == 0 {
		f.Limit = DefaultParkedLimit
	}
	return f, nil
}

// Replay handles the parked message id of consumer again: it runs fn on it
// through [Inbox.Handle], and in the same transaction marks the entry
// replayed. The entry is kept (for audit) and no longer listed by default.
//
// It returns (Processed, nil) when fn applied the message, and
// (Duplicate, nil) when consumer had processed the message already (a
// second Replay, or another delivery of it got through); the entry is then
// marked replayed too. When fn fails, the error is returned and the entry
// stays as it was. An unknown id, or one parked by another consumer, gives
// an error wrapping [ErrNotFound]; a message parked without a valid id
// cannot be replayed (the error wraps [ErrMalformed]).
func (i *Inbox) Replay(ctx context.Context, consumer string, id uuid.UUID, fn HandlerFunc) (Result, error) {
	return replayTx(ctx, i.txOps(), consumer, id, fn, fn == nil)
}

// replayTx is Replay on any database. See [Inbox.Replay].
func replayTx[T any](ctx context.Context, ops txOps[T], consumer string, id uuid.UUID,
	fn func(context.Context, T, Message) error, nilFn bool) (Result, error) {
	p, ok, err := ops.parkedGet(ctx, consumer, id)
	if err != nil {
		return 0, fmt.Errorf("inbox: replay %s: %w", id, err)
	}
	if !ok {
		return 0, fmt.Errorf("%w: consumer %q has no parked message %s", ErrNotFound, consumer, id)
	}
	if err := checkHandle(consumer, p.Message.ID, nilFn); err != nil {
		return 0, fmt.Errorf("inbox: replay %s: %w", id, err)
	}
	res, err := handleTx(ctx, ops, consumer, p.Message, func(ctx context.Context, tx T, msg Message) error {
		if err := fn(ctx, tx, msg); err != nil {
			return err
		}
		if err := ops.markReplayed(ctx, tx, id); err != nil {
			return fmt.Errorf("mark replayed: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("inbox: replay %s: %w", id, err)
	}
	if res == Duplicate {
		if err := ops.markReplayedNow(ctx, id); err != nil {
			return 0, fmt.Errorf("inbox: replay %s: already processed; mark replayed: %w", id, err)
		}
	}
	ops.log.Info("inbox: parked message replayed", append(msgAttrs(consumer, p.Message),
		slog.String("parked_id", id.String()), slog.String("result", res.String()))...)
	return res, nil
}

// parkedGet reads one parked entry of consumer.
func (i *Inbox) parkedGet(ctx context.Context, consumer string, id uuid.UUID) (Parked, bool, error) {
	rows, err := i.pool.Query(ctx, i.q.parkedGet, id, consumer)
	if err != nil {
		return Parked{}, false, err
	}
	p, err := pgx.CollectExactlyOneRow(rows, scanParked)
	if errors.Is(err, pgx.ErrNoRows) {
		return Parked{}, false, nil
	}
	return p, err == nil, err
}

// scanParked reads one row of parked.sql or parked_get.sql.
func scanParked(row pgx.CollectableRow) (Parked, error) {
	var (
		p          Parked
		ts, replay *time.Time
		headers    map[string]string
	)
	err := row.Scan(&p.ID, &p.Consumer, &p.Message.ID, &p.Message.EventType, &p.Message.AggregateID,
		&p.Message.Topic, &p.Message.Partition, &p.Message.Offset, &ts, &headers, &p.Message.Payload,
		&p.Error, &p.Attempts, &p.ParkedAt, &replay)
	if err != nil {
		return Parked{}, err
	}
	p.restore(ts, replay, headers)
	return p, nil
}

// restore completes a parked entry read from the database: the optional
// times, and the message's typed fields from its headers.
func (p *Parked) restore(ts, replay *time.Time, headers map[string]string) {
	if ts != nil {
		p.Message.Timestamp = *ts
	}
	if replay != nil {
		p.ReplayedAt = *replay
	}
	if headers == nil {
		headers = map[string]string{}
	}
	// The typed fields come from the headers, as FromRecord reads them; the
	// stored id and aggregate id (the record key when there was no
	// aggregateId header) are authoritative.
	id, aggregateID := p.Message.ID, p.Message.AggregateID
	p.Message.Headers = headers
	_ = p.Message.readHeaders() // a malformed message was parked as it was
	p.Message.ID, p.Message.AggregateID = id, aggregateID
}

// cleanText makes s storable as PostgreSQL text: valid UTF-8 without NUL.
func cleanText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
