package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/rowheaders"
)

// heartbeatPrefix is the prefix of the relay's heartbeat messages in the
// WAL (pg_logical_emit_message).
const heartbeatPrefix = "outbox-cdc-heartbeat"

// event is what the reader hands the session (its feeder), in stream order: an
// inserted message, or a position (end > 0) up to which everything has
// been received: the end of a transaction, or an idle position from a
// keepalive or heartbeat.
type event struct {
	rec       outbox.Record
	isRec     bool
	bytes     int64 // the message's share of the budget (recordBytes)
	xid       uint32
	decodeErr error
	end       pglogrepl.LSN
}

// stream runs the reader (on this goroutine, which owns conn) and the
// session (feeder, recorder, and the ledger that the relay core publishes
// from) until stop or an error. The reader reports the session's
// confirmed position to the server every StatusInterval.
func (r *Relay) stream(conn *pgconn.PgConn, start pglogrepl.LSN) error {
	var confirmed atomic.Uint64
	confirmed.Store(uint64(start))
	events := make(chan event, 2*r.cfg.BatchSize)
	bud := newBudget(r.cfg.MaxInFlightBytes)
	procDone := make(chan error, 1)
	procCtx, procStop := context.WithCancel(context.Background())
	defer procStop()
	sess := r.newSession(events, &confirmed, bud)
	go func() { procDone <- sess.run(procCtx) }()

	rd := &reader{r: r, conn: conn, confirmed: &confirmed, relations: map[uint32]*pglogrepl.RelationMessage{},
		events: events, budget: bud, procDone: procDone}
	err := rd.run()
	procStop()
	if r.aborted.Load() {
		// The session records and confirms nothing more; it ends at once.
		if !rd.procExited {
			<-procDone
		}
		return nil
	}
	// Let the session finish what its ledger holds (it reads no more),
	// then report the final position.
	perr := rd.waitProcessor()
	if err == nil {
		err = perr
	}
	if errors.Is(err, errStopped) {
		err = nil
	}
	if !r.aborted.Load() && conn.Frontend() != nil {
		_ = rd.sendStatus()
	}
	return err
}

// errStopped ends the session or the reader when the relay stops.
var errStopped = errors.New("cdc: stopping")

type reader struct {
	r          *Relay
	conn       *pgconn.PgConn
	confirmed  *atomic.Uint64
	relations  map[uint32]*pglogrepl.RelationMessage
	types      *pgtype.Map
	events     chan<- event
	budget     *budget
	procDone   <-chan error
	procErr    error
	procExited bool
	inTx       bool
	xid        uint32
	lastEnd    pglogrepl.LSN
	nextStatus time.Time
}

// run reads the stream until stop, an error, or the session's end.
func (rd *reader) run() error {
	r := rd.r
	rd.types = pgtype.NewMap()
	rd.nextStatus = time.Now()
	for {
		if r.stopping.Closed() {
			return errStopped
		}
		select {
		case err := <-rd.procDone:
			rd.procExited, rd.procErr = true, err
			return err
		default:
		}
		if !time.Now().Before(rd.nextStatus) {
			if err := rd.sendStatus(); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithDeadline(r.runCtx, rd.nextStatus)
		msg, err := rd.conn.ReceiveMessage(ctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) || r.stopping.Closed() {
				continue
			}
			return fmt.Errorf("cdc: receive: %w", err)
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if err := rd.handle(msg.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("cdc: replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		}
	}
}

// sendStatus reports the confirmed position: the server may discard the
// WAL before it, and restarts the stream there.
//
// Only while the lead is held: once it may have ended, a standby may
// stream from the slot, and this relay's position is none of its business.
func (rd *reader) sendStatus() error {
	if l := rd.r.lead.Load(); l == nil || !l.valid(time.Now()) {
		return rd.r.fenced(errLapsed)
	}
	lsn := pglogrepl.LSN(rd.confirmed.Load())
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), rd.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn, WALFlushPosition: lsn, WALApplyPosition: lsn,
	})
	rd.nextStatus = time.Now().Add(rd.r.cfg.StatusInterval)
	if err != nil {
		return fmt.Errorf("cdc: send standby status: %w", err)
	}
	return nil
}

// waitProcessor waits for the session to return, keeping the server
// informed meanwhile.
func (rd *reader) waitProcessor() error {
	if rd.procExited {
		return rd.procErr
	}
	for {
		t := time.NewTimer(time.Until(rd.nextStatus))
		select {
		case err := <-rd.procDone:
			t.Stop()
			rd.procExited, rd.procErr = true, err
			return err
		case <-t.C:
			if err := rd.sendStatus(); err != nil {
				// The connection is gone; the session's marks still
				// count, only its confirmation is lost.
				return <-rd.procDone
			}
		}
	}
}

// emit hands ev to the session, sending status updates while it waits.
func (rd *reader) emit(ev event) error {
	for {
		if handed, err := rd.await(rd.events, ev, nil); handed || err != nil {
			return err
		}
	}
}

// emitRecord hands a decoded message to the session once its bytes fit
// in the budget. Until then the reader reads no further: the server keeps
// the rest of the stream, and the session's memory stays within
// MaxInFlightBytes.
func (rd *reader) emitRecord(ev event) error {
	ev.bytes = recordBytes(ev.rec)
	paused := false
	for !rd.budget.take(ev.bytes) {
		if !paused {
			paused = true
			rd.r.log.Debug("stream paused: the messages held reach MaxInFlightBytes; reading on when batches complete",
				slog.Int64("held_bytes", rd.budget.inUse()), slog.Int64("next_bytes", ev.bytes))
		}
		if _, err := rd.await(nil, ev, rd.budget.freed); err != nil {
			return err
		}
	}
	return rd.emit(ev)
}

// await waits until ev is handed on events or a token arrives on freed
// (a nil channel is not waited for), and reports true then; or until the
// next status update is due, which it sends, and reports false. It fails
// when the session returned, the relay stops or the update cannot be
// sent.
func (rd *reader) await(events chan<- event, ev event, freed <-chan struct{}) (bool, error) {
	t := time.NewTimer(time.Until(rd.nextStatus))
	defer t.Stop()
	select {
	case events <- ev:
		return true, nil
	case <-freed:
		return true, nil
	case err := <-rd.procDone:
		rd.procExited, rd.procErr = true, err
		if err == nil {
			err = errStopped
		}
		return false, err
	case <-rd.r.stopping.C():
		return false, errStopped
	case <-t.C:
		return false, rd.sendStatus()
	}
}

// emitPosition hands an idle position to the session if it is new.
func (rd *reader) emitPosition(lsn pglogrepl.LSN) error {
	if rd.inTx || lsn <= rd.lastEnd {
		return nil
	}
	rd.lastEnd = lsn
	return rd.emit(event{end: lsn})
}

// handle decodes one CopyData message of the replication protocol.
func (rd *reader) handle(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("cdc: keepalive: %w", err)
		}
		if pkm.ReplyRequested {
			rd.nextStatus = time.Time{}
		}
		// Everything the server decoded up to ServerWALEnd has been sent, and
		// so received before this message: once it is all published, the
		// slot may move there.
		return rd.emitPosition(pkm.ServerWALEnd)
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("cdc: xlogdata: %w", err)
		}
		return rd.handleLogical(xld.WALData)
	}
	return nil
}

// handleLogical handles one pgoutput (protocol version 1) message.
func (rd *reader) handleLogical(data []byte) error {
	m, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("cdc: parse pgoutput message: %w", err)
	}
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		rd.relations[m.RelationID] = m
	case *pglogrepl.BeginMessage:
		rd.inTx, rd.xid = true, m.Xid
	case *pglogrepl.InsertMessage:
		rel, ok := rd.relations[m.RelationID]
		if !ok {
			return fmt.Errorf("cdc: insert into unknown relation %d", m.RelationID)
		}
		if rel.Namespace != rd.r.cfg.Schema || rel.RelationName != "outbox_messages" {
			return nil // another table in a publication someone widened
		}
		rec, err := decodeRecord(rd.types, rel, m.Tuple)
		if rec.Seq == 0 {
			return fatal(fmt.Errorf("%w: an insert into %s.outbox_messages has no usable seq: %w",
				ErrNotReady, rel.Namespace, err))
		}
		return rd.emitRecord(event{rec: rec, isRec: true, xid: rd.xid, decodeErr: err})
	case *pglogrepl.CommitMessage:
		rd.inTx = false
		rd.lastEnd = max(rd.lastEnd, m.TransactionEndLSN)
		return rd.emit(event{end: m.TransactionEndLSN})
	case *pglogrepl.LogicalDecodingMessage:
		// A non-transactional message (the heartbeat, or anyone's) is
		// decoded at its place in the WAL, outside any transaction.
		if !m.Transactional {
			return rd.emitPosition(m.LSN)
		}
	}
	return nil
}

// decodeRecord builds the message from the row's columns, by name, so that
// the column order and columns added later do not matter. The error names
// the first column that could not be decoded; Seq is set whenever the seq
// column could be read.
func decodeRecord(types *pgtype.Map, rel *pglogrepl.RelationMessage, tuple *pglogrepl.TupleData) (outbox.Record, error) {
	var rec outbox.Record
	var firstErr error
	if tuple == nil {
		return rec, errors.New("cdc: insert without a tuple")
	}
	for i, c := range tuple.Columns {
		if i >= len(rel.Columns) {
			break
		}
		col := rel.Columns[i]
		if c.DataType == pglogrepl.TupleDataTypeNull {
			continue
		}
		err := fmt.Errorf("unexpected tuple data type %q", c.DataType)
		if c.DataType == pglogrepl.TupleDataTypeText {
			err = decodeColumn(types, &rec, col, c.Data)
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("cdc: decode column %s: %w", col.Name, err)
		}
	}
	if rec.Seq == 0 && firstErr == nil {
		firstErr = errors.New("cdc: no seq column")
	}
	return rec, firstErr
}

// decodeColumn sets the field of rec that col holds, from its text form
// data. Columns it does not know are left alone.
func decodeColumn(types *pgtype.Map, rec *outbox.Record, col *pglogrepl.RelationMessageColumn, data []byte) error {
	var err error
	switch col.Name {
	case "payload":
		// Decoded from the text form directly: the payload is the one large
		// column, and its text (hex for bytea) is not copied.
		err = types.Scan(col.DataType, pgtype.TextFormatCode, data, &rec.Payload)
	case "headers":
		// The error names the header and the rule, and makes the message
		// a dead letter with it.
		rec.Headers, err = rowheaders.Decode(data)
	case "created_at":
		err = types.Scan(col.DataType, pgtype.TextFormatCode, data, &rec.CreatedAt)
	case "seq":
		rec.Seq, err = strconv.ParseInt(string(data), 10, 64)
	case "id":
		rec.ID, err = uuid.Parse(string(data))
	case "event_version":
		rec.EventVersion, err = strconv.Atoi(string(data))
	case "attempts":
		rec.Attempts, _ = strconv.Atoi(string(data))
	case "status":
		rec.Status = outbox.Status(data)
	default:
		if f := textField(rec, col.Name); f != nil {
			*f = string(data)
		}
	}
	return err
}

// textField returns rec's text field stored in the column name, or nil.
func textField(rec *outbox.Record, name string) *string {
	switch name {
	case "aggregate_type":
		return &rec.AggregateType
	case "aggregate_id":
		return &rec.AggregateID
	case "event_type":
		return &rec.EventType
	case "topic":
		return &rec.Topic
	case "content_type":
		return &rec.ContentType
	case "correlation_id":
		return &rec.CorrelationID
	case "causation_id":
		return &rec.CausationID
	case "traceparent":
		return &rec.TraceParent
	}
	return nil
}
