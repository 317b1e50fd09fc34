package pgstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/rowheaders"
)

// queueCursorRead queues the leader's read q (queries/cursor_read.sql),
// whose result lands in read.
func (s *Store) queueCursorRead(b *pgx.Batch, q *CursorReadRequest, read *CursorRead) {
	b.Queue(s.q.cursorRead, q.From, q.HeadLimit, q.GapLo, q.GapHi, q.GapLimit).Query(func(rows pgx.Rows) error {
		read.GapsComplete = true
		nGap := 0
		var (
			snapshot   bool
			xmin, xmax *string
			gap        *bool
			status     *string
			headers    *string
			version    *int32
			created    *time.Time
			seq        *int64
			id         pgtype.UUID // not *uuid.UUID: see scanRecordAnd
			blocked    *bool
			at, ai, et *string
			topic, ct  *string
			cor, cau   *string
			tp         *string
		)
		for rows.Next() {
			var row CursorRow
			r := &row.Record
			if err := rows.Scan(&snapshot, &xmin, &xmax, &gap, &seq, &status, &id, &at, &ai, &et, &version, &topic,
				&r.Payload, &ct, &headers, &cor, &cau, &tp, &created, &blocked); err != nil {
				return err
			}
			if snapshot {
				var err error
				if read.Xmin, err = strconv.ParseUint(deref(xmin), 10, 64); err != nil {
					return fmt.Errorf("snapshot xmin %q: %w", deref(xmin), err)
				}
				if read.Xmax, err = strconv.ParseUint(deref(xmax), 10, 64); err != nil {
					return fmt.Errorf("gap bound %q: %w", deref(xmax), err)
				}
				continue
			}
			r.Seq, r.ID = deref(seq), id.Bytes
			r.AggregateType, r.AggregateID, r.EventType = deref(at), deref(ai), deref(et)
			r.EventVersion = int(deref(version))
			r.Topic, r.ContentType = deref(topic), deref(ct)
			r.CorrelationID, r.CausationID, r.TraceParent = deref(cor), deref(cau), deref(tp)
			r.CreatedAt = deref(created)
			r.Status = outbox.StatusPending
			r.NextAttemptAt = r.CreatedAt
			if headers != nil {
				// A row whose headers break the rule is handed out with
				// Invalid set, for the relay to dead-letter: it must not
				// fail the read of the rows beside it.
				r.Headers, r.Invalid = rowheaders.Decode([]byte(*headers))
			}
			row.Queued = deref(status) == statusQueued
			row.Blocked = deref(blocked)
			if deref(gap) {
				read.GapRows = append(read.GapRows, row)
				nGap++
			} else {
				read.HeadRows = append(read.HeadRows, row)
			}
		}
		if nGap >= q.GapLimit {
			read.GapsComplete = false
		}
		read.Returned = time.Now()
		return rows.Err()
	})
}

// statusQueued is the stored status of a cursor message (migration 010).
const statusQueued = "QUEUED"
