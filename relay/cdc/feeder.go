package cdc

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/outbox-dev/outbox/relay/failure"
)

// feed reads the events in stream order, cuts them into batches and adds
// each checked batch to the ledger, while there is room in flight
// (roomForBatch), until ctx is done, the relay stops, the recorder failed
// or the lead is lost (nil), or a check fails (its error). While the
// stream is silent it writes heartbeats, and it logs the slot's lag every
// LagLogInterval.
func (ss *session) feed(ctx context.Context) error {
	r := ss.r
	heartbeat := time.NewTimer(r.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	lagTick := time.NewTicker(r.cfg.LagLogInterval)
	defer lagTick.Stop()
	lead := r.leadContext()
	batchSize := min(r.cfg.BatchSize, r.cfg.MaxInFlight)
	for {
		// Without room for a batch, wait for room, not for messages or the
		// heartbeat's turn (a nil channel is not waited for).
		events, beat, room := ss.events, heartbeat.C, (<-chan struct{})(nil)
		if !ss.roomForBatch(batchSize) {
			events, beat, room = nil, nil, ss.room
		}
		var first event
		select {
		case <-ctx.Done():
			return nil
		case <-r.stopping.C():
			return nil
		case <-ss.a.rec.failed:
			return nil
		case <-lead.Done():
			return nil
		case <-lagTick.C:
			r.logLag()
			continue
		case <-room:
			continue
		case <-beat:
			r.heartbeat()
			heartbeat.Reset(r.cfg.HeartbeatInterval)
			continue
		case first = <-events:
		}
		if r.behindNano.Load() == 0 {
			r.behindNano.Store(time.Now().UnixNano())
		}
		b := batch{}
		b.add(first)
	fill:
		for b.records < batchSize {
			select {
			case ev := <-ss.events:
				b.add(ev)
			default:
				break fill
			}
		}
		if err := ss.addBatch(b); err != nil {
			return err
		}
		heartbeat.Reset(r.cfg.HeartbeatInterval)
	}
}

// roomForBatch reports whether a batch may start: when a full one fits
// under MaxInFlight, or the ledger holds nothing, so that MaxInFlight =
// BatchSize means one batch at a time. The bytes need no check here: every
// message the reader handed on holds its share of the budget already.
func (ss *session) roomForBatch(batchSize int) bool {
	held := ss.held()
	return held == 0 || ss.r.cfg.MaxInFlight-held >= batchSize
}

// addBatch checks b and adds it to the ledger; it hands what the ledger
// leaves to record to the recorder, without waiting (under s.mu, as the
// strategy's marks do, so that the recorder gets the ledger's changes in
// their order), and wakes the core's workers when messages are ready.
func (ss *session) addBatch(b batch) error {
	var epoch uint64 // 0 for an idle position, which unblocks nothing
	var items []item
	if b.records > 0 {
		epoch = ss.checks.Add(1)
		var err error
		if items, err = ss.checkBatch(b); err != nil {
			return err
		}
	}
	ss.s.mu.Lock()
	out := ss.a.l.add(epoch, items, b.end)
	if !out.empty() {
		ss.a.rec.hand(out) // in the order of the ledger's changes
	}
	ss.countBatch(len(items))
	ready := ss.a.l.ready() > 0
	ss.s.mu.Unlock()
	if ready {
		ss.s.wakes.signal()
	}
	if out.empty() {
		ss.a.rec.hand(out) // completes at once (the position may move), taking s.mu
	}
	return nil
}

// checkBatch checks b's messages (check.sql) and returns them as the
// ledger's items, with the check's verdicts. A message that could not be
// decoded becomes a dead letter (the relay's policy for a permanent
// error) once no earlier message of its aggregate waits in the ledger
// (ledger.addUnpublishable).
func (ss *session) checkBatch(b batch) ([]item, error) {
	r := ss.r
	var toCheck []event
	for _, ev := range b.items {
		if ev.decodeErr == nil {
			toCheck = append(toCheck, ev)
		}
	}
	verdicts, err := r.check(toCheck)
	if err != nil {
		return nil, err
	}
	items := make([]item, len(b.items))
	for i, ev := range b.items {
		items[i] = item{rec: ev.rec, bytes: ev.bytes}
		if ev.decodeErr != nil {
			err := permanent(ev.decodeErr)
			f := r.decide(ev.rec, err)
			items[i].fail, items[i].err = &f, err
			continue
		}
		v := verdicts[ev.rec.Seq]
		items[i].act = v.action()
		if items[i].act == actSkip {
			r.log.Debug("message already handled; skipped", failure.RecordAttrs(ev.rec, "status", v.status)...)
		}
	}
	return items, nil
}

// batch is a run of events: the messages, and the last position after which
// nothing of the batch is pending.
type batch struct {
	items   []event
	records int
	bytes   int64
	end     pglogrepl.LSN
}

func (b *batch) add(ev event) {
	if ev.isRec {
		b.items = append(b.items, ev)
		b.records++
		b.bytes += ev.bytes
		return
	}
	b.end = max(b.end, ev.end)
}
