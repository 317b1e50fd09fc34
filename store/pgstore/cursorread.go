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

// cursorRead builds and reads one leader read (queries/cursor_read.sql).
func (s *Store) queueCursorRead(b *pgx.Batch, from int64, limit int, gapLo, gapHi []int64, gapLimit int, read *cursorRead) {
	b.Queue(s.q.cursorRead, from, limit, gapLo, gapHi, gapLimit).Query(func(rows pgx.Rows) error {
		read.gapsComplete = true
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
			var row cursorRow
			r := &row.rec
			if err := rows.Scan(&snapshot, &xmin, &xmax, &gap, &seq, &status, &id, &at, &ai, &et, &version, &topic,
				&r.Payload, &ct, &headers, &cor, &cau, &tp, &created, &blocked); err != nil {
				return err
			}
			if snapshot {
				var err error
				if read.xmin, err = strconv.ParseUint(deref(xmin), 10, 64); err != nil {
					return fmt.Errorf("snapshot xmin %q: %w", deref(xmin), err)
				}
				if read.xmax, err = strconv.ParseUint(deref(xmax), 10, 64); err != nil {
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
			row.queued = deref(status) == statusQueued
			row.blocked = deref(blocked)
			if deref(gap) {
				read.gapRows = append(read.gapRows, row)
				nGap++
			} else {
				read.headRows = append(read.headRows, row)
			}
		}
		if nGap >= gapLimit {
			read.gapsComplete = false
		}
		read.returned = time.Now()
		return rows.Err()
	})
}

// statusQueued is the stored status of a cursor message (migration 010).
const statusQueued = "QUEUED"
