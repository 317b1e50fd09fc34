package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/errtext"
	"github.com/outbox-dev/outbox/relay/failure"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// heartbeat writes a heartbeat message into the WAL, so that an idle
// stream still gets a position to confirm.
func (r *Relay) heartbeat() {
	ctx, cancel := context.WithTimeout(r.runCtx, r.cfg.HeartbeatInterval)
	defer cancel()
	var lsn string
	if err := r.cfg.Pool.QueryRow(ctx, r.q.heartbeat, heartbeatPrefix).Scan(&lsn); err != nil {
		if r.runCtx.Err() == nil {
			r.log.Warn("heartbeat failed", slog.Any("error", err))
		}
		return
	}
	r.log.Debug("heartbeat", slog.String("lsn", lsn))
}

// decide decides what happens to rec, whose publish failed with err, as
// the table path (a polling relay) decides: see package failure.
func (r *Relay) decide(rec outbox.Record, err error) store.Failure {
	return r.policy.Decide(rec, err, time.Now())
}

type aggregate struct{ typ, id string }

func aggOf(rec outbox.Record) aggregate { return aggregate{rec.AggregateType, rec.AggregateID} }

// check runs check.sql over the batch and returns the verdict on each
// message, by seq. A row that is absent because its transaction is not yet
// visible is read again until it is.
func (r *Relay) check(items []event) (map[int64]verdict, error) {
	verdicts := make(map[int64]verdict, len(items))
	pending := items
	wait := time.Millisecond
	for len(pending) > 0 {
		if err := r.checkOnce(pending, verdicts); err != nil {
			return nil, err
		}
		var again []event
		for _, ev := range pending {
			if v := verdicts[ev.rec.Seq]; v.status == "" && !v.visible {
				again = append(again, ev)
			}
		}
		if len(again) == 0 {
			break
		}
		r.log.Debug("transaction committed in the WAL but not yet visible; reading again",
			slog.Int("messages", len(again)), slog.Duration("wait", wait))
		if !r.stopping.Sleep(wait) {
			return nil, errStopped
		}
		wait = min(2*wait, time.Second)
		pending = again
	}
	return verdicts, nil
}

// action is what the stream does with a checked message.
type action int

const (
	// actPublish: the row is PENDING and nothing holds its aggregate.
	actPublish action = iota
	// actDefer: the message goes to the table path (check.sql deferred its
	// aggregate already).
	actDefer
	// actSkip: the row is SENT or gone: handled already.
	actSkip
)

func (v verdict) action() action {
	switch {
	case v.status == string(outbox.StatusPending) && !v.blocked:
		return actPublish
	case v.status == "" || v.status == string(outbox.StatusSent):
		return actSkip
	}
	return actDefer
}

type verdict struct {
	status  string
	blocked bool
	// visible reports whether the message's transaction was visible to the
	// snapshot the row was read in.
	visible bool
}

func (r *Relay) checkOnce(items []event, verdicts map[int64]verdict) error {
	seqs := make([]int64, len(items))
	types := make([]string, len(items))
	ids := make([]string, len(items))
	xids := make([]int64, len(items))
	for i, ev := range items {
		seqs[i], types[i], ids[i], xids[i] = ev.rec.Seq, ev.rec.AggregateType, ev.rec.AggregateID, int64(ev.xid)
	}
	ctx, cancel := context.WithTimeout(r.sendCtx, r.cfg.PublishTimeout)
	defer cancel()
	r.leaseRow.RLock()
	defer r.leaseRow.RUnlock()
	rows, err := r.cfg.Pool.Query(ctx, r.q.check, seqs, types, ids, xids, r.cfg.Slot, r.leaseToken())
	if err != nil {
		return fmt.Errorf("cdc: check batch: %w", err)
	}
	var seq int64
	var v verdict
	leading := true
	_, err = pgx.ForEachRow(rows, []any{&seq, &v.status, &v.blocked, &v.visible, &leading}, func() error {
		verdicts[seq] = v
		return nil
	})
	if err != nil {
		return fmt.Errorf("cdc: check batch: %w", err)
	}
	if !leading {
		return r.fenced(errRefused)
	}
	return nil
}

// permanent marks err as a permanent failure.
func permanent(err error) error { return fmt.Errorf("%w: %w", sink.ErrPermanent, err) }

// record records what a change of the ledger leaves to record in one
// statement (record.sql, the recorder's): failures, deferred aggregates,
// and the SENT marks (or deletes), fenced by token, the slot's lease token
// of the session whose ledger it comes from: a record of a session whose
// lease was taken over changes nothing. Only then may the position move
// over its messages. If it fails, the session ends and the next one reads
// them again.
func (r *Relay) record(out toRecord, token uuid.UUID) error {
	if out.empty() {
		return nil
	}
	if r.aborted.Load() {
		return errStopped
	}
	q := r.q.recordMark
	if r.cfg.Cleanup == CleanupDelete {
		q = r.q.recordDelete
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.sendCtx), r.cfg.PublishTimeout)
	defer cancel()
	var nFailed, nDeferred, nSent int64
	var leading bool
	r.leaseRow.RLock()
	err := r.cfg.Pool.QueryRow(ctx, q, append(recordArgs(out), r.cfg.Slot, token)...).
		Scan(&leading, &nFailed, &nDeferred, &nSent)
	r.leaseRow.RUnlock()
	if err != nil {
		return fmt.Errorf("cdc: record the batch (its messages are sent again after a reconnect): %w", err)
	}
	if !leading {
		return r.fenced(errRefused)
	}
	return nil
}

// recordArgs are record.sql's arguments for out, up to the slot and the
// lease token: the failures, the deferred aggregates, the sent messages and
// which failures count an attempt.
func recordArgs(out toRecord) []any {
	n := len(out.failed)
	fSeqs, fErrs, fDelays := make([]int64, n), make([]string, n), make([]int64, n)
	fDead, fCount := make([]bool, n), make([]bool, n)
	for i, e := range out.failed {
		f := e.failure
		fSeqs[i], fErrs[i], fDelays[i], fDead[i], fCount[i] = f.Seq, errtext.Clean(f.Error), f.Delay.Milliseconds(), f.Dead, f.CountAttempt
	}
	aggs := deferrals(out)
	types := make([]string, 0, len(aggs))
	ids := make([]string, 0, len(aggs))
	reasons := make([]string, 0, len(aggs))
	for a, reason := range aggs {
		types, ids, reasons = append(types, a.typ), append(ids, a.id), append(reasons, reason)
	}
	sent := make([]int64, len(out.sent))
	for i, e := range out.sent {
		sent[i] = e.rec.Seq
	}
	return []any{fSeqs, fErrs, fDelays, fDead, types, ids, reasons, sent, fCount}
}

// deferrals are the aggregates out hands to the table path, with the
// reason each is recorded with (outbox_cdc_deferred.reason).
func deferrals(out toRecord) map[aggregate]string {
	aggs := make(map[aggregate]string, len(out.failed)+len(out.deferred))
	for _, e := range out.failed {
		aggs[e.agg] = "stream: message " + fmt.Sprint(e.rec.Seq) + " failed"
	}
	for _, e := range out.deferred {
		if _, ok := aggs[e.agg]; !ok {
			aggs[e.agg] = "stream: an earlier message of the aggregate failed or was deferred"
		}
	}
	return aggs
}

// streamLines are the log lines of the stream's messages that could not be
// decoded (the stream's relay core logs its publishes' failures with the
// polling relay's lines); the table path handles them.
var streamLines = failure.Lines{
	Dead:  "message dead-lettered; its aggregate waits (table path)",
	Retry: "publish failed; retry scheduled on the table path",
	Wait:  "topic cannot take records; the message waits on the table path",
}

// report reports what a record committed, once: Hooks.Published for the
// acknowledged messages, and what it handed to the table path, logged and
// passed to the hooks: the messages that failed before they were published
// (they could not be decoded; the relay core reports the failures of its
// publishes itself, once their record committed) and the deferred ones.
func (r *Relay) report(out toRecord) {
	if h := r.cfg.Hooks.Published; h != nil {
		now := time.Now()
		for _, e := range out.sent {
			h(e.rec, now.Sub(e.rec.CreatedAt))
		}
	}
	rp := failure.Reporter{Log: r.log, Lines: streamLines, Failed: r.cfg.Hooks.Failed}
	for _, e := range out.failed {
		if e.err != nil {
			rp.Report(e.rec, e.err, e.failure)
		}
	}
	for _, e := range out.deferred {
		r.log.Debug("message handed to the table path", failure.RecordAttrs(e.rec)...)
		if h := r.cfg.Hooks.Deferred; h != nil {
			h(e.rec)
		}
	}
}
