package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

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

// outcome collects what happens to a batch's messages.
type outcome struct {
	sent      []outbox.Record
	failed    []decided
	deferred  []outbox.Record
	deferAggs map[aggregate]string // aggregate -> reason
}

// decided is a message whose publish failed, with its error and what the
// relay's failure.Policy decided for it.
type decided struct {
	rec outbox.Record
	err error
	f   store.Failure
}

// decide decides what happens to rec, whose publish failed with err, as
// the table path (a polling relay) decides: see package failure.
func (r *Relay) decide(rec outbox.Record, err error) decided {
	return decided{rec: rec, err: err, f: r.policy.Decide(rec, err, time.Now())}
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

// publish sends run's messages in waves: wave k holds the k-th message of
// each aggregate in the batch, so that no publish call holds two messages
// of one aggregate. A message goes out only once the previous message of
// its aggregate (in this batch or an earlier one still in flight) was
// acknowledged; if that one was not (its publish failed, or it was
// deferred), the message is deferred too, and the table path sends it in
// order. A failed publish that counts as an attempt is recorded as FAILED
// or DEAD_LETTER; the table path retries it as the polling relay would.
// While the broker is unavailable the batch waits out the relay's pause
// (one failure.Pause for every batch in flight) and retries, counting
// nothing (the batches behind it wait, within the in-flight bounds).
// publish returns errStopped when the relay stops or the pipeline ends
// before every message was resolved.
func (r *Relay) publish(ctx context.Context, run *batchRun) error {
	var waves [][]int
	count := map[aggregate]int{}
	for i, rec := range run.recs {
		k := count[aggOf(rec)]
		count[aggOf(rec)]++
		if k == len(waves) {
			waves = append(waves, nil)
		}
		waves[k] = append(waves[k], i)
	}
	for _, wave := range waves {
		pending := wave
		for len(pending) > 0 {
			var ready, waiting []int
			for _, i := range pending {
				if prev := run.prevs[i]; prev == nil || prev.isDone() {
					ready = append(ready, i)
				} else {
					waiting = append(waiting, i)
				}
			}
			if len(ready) == 0 {
				select {
				case <-run.prevs[waiting[0]].done:
				case <-ctx.Done():
					return errStopped
				case <-r.stopping.C():
					if r.sendCtx.Err() != nil {
						return errStopped
					}
					// Wait on: the batch before finishes within the shutdown
					// timeout, or is cancelled.
					select {
					case <-run.prevs[waiting[0]].done:
					case <-ctx.Done():
						return errStopped
					case <-r.sendCtx.Done():
						return errStopped
					}
				}
				continue
			}
			var todo []int
			for _, i := range ready {
				if prev := run.prevs[i]; prev != nil && !prev.sent {
					run.out.deferred = append(run.out.deferred, run.recs[i])
					run.own[i].resolve(false)
					continue
				}
				todo = append(todo, i)
			}
			if err := r.publishWave(ctx, run, todo); err != nil {
				return err
			}
			pending = waiting
		}
	}
	return nil
}

// publishWave publishes the messages run.recs[todo] (one per aggregate)
// until each was acknowledged or failed for good, retrying while the broker
// is unavailable (awaitBroker). A wave that the broker answered in full
// ends the relay's pause.
func (r *Relay) publishWave(ctx context.Context, run *batchRun, todo []int) error {
	for len(todo) > 0 {
		if r.stopping.Closed() && r.sendCtx.Err() != nil {
			return errStopped
		}
		errs := r.publishRecs(run, todo)
		if r.aborted.Load() {
			return errStopped
		}
		again, lastErr := r.settleWave(run, todo, errs)
		if len(again) == 0 {
			r.policy.Pause.Reset()
			return nil
		}
		if r.stopping.Closed() || !r.awaitBroker(ctx, lastErr, len(again)) {
			return errStopped
		}
		todo = again
	}
	return nil
}

// publishRecs publishes run.recs[todo] and returns one error per message.
func (r *Relay) publishRecs(run *batchRun, todo []int) []error {
	recs := make([]outbox.Record, len(todo))
	for j, i := range todo {
		recs[j] = run.recs[i]
	}
	ctx, cancel := context.WithTimeout(r.sendCtx, r.cfg.PublishTimeout)
	defer cancel()
	errs, bug := failure.SinkResults(r.cfg.Sink.Publish(ctx, recs), len(recs))
	if bug != nil {
		r.log.Error("sink bug; the stream waits as for an unreachable broker", slog.Any("error", bug))
	}
	return errs
}

// settleWave resolves the messages run.recs[todo] by their publish's
// errors (errs, index by index): acknowledged, or failed as the relay's
// policy decides. It returns those that found the broker unreachable, to
// publish again, and the last such error.
func (r *Relay) settleWave(run *batchRun, todo []int, errs []error) (again []int, lastErr error) {
	for j, i := range todo {
		rec, err := run.recs[i], errs[j]
		switch {
		case err == nil:
			run.out.sent = append(run.out.sent, rec)
			run.own[i].resolve(true)
		case sink.Classify(err) == sink.Unavailable:
			again = append(again, i)
			lastErr = err
		default:
			// A message that failed waits on the table path, which retries
			// it as the polling relay would; other aggregates keep
			// streaming.
			run.out.failed = append(run.out.failed, r.decide(rec, err))
			run.own[i].resolve(false)
		}
	}
	return again, lastErr
}

// awaitBroker waits while the broker is unreachable: n messages just found
// it so (lastErr), which starts or lengthens the relay's pause, and the
// wave waits until the pause is over, whichever batch lengthened it
// meanwhile. It reports false on stop or when ctx ends.
func (r *Relay) awaitBroker(ctx context.Context, lastErr error, n int) bool {
	d := r.policy.Pause.Next(time.Now())
	r.log.Warn("broker unavailable; the stream waits", slog.Any("error", lastErr),
		slog.Int("messages", n), slog.Duration("retry_in", d))
	for d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.stopping.C():
			t.Stop()
			return false
		case <-ctx.Done():
			t.Stop()
			return false
		}
		d = r.policy.Pause.Remaining(time.Now())
	}
	return true
}

// permanent marks err as a permanent failure.
func permanent(err error) error { return fmt.Errorf("%w: %w", sink.ErrPermanent, err) }

// record records an outcome in one statement (record.sql): failures,
// deferred aggregates, and the SENT marks (or deletes). Only then are the
// batches' end positions confirmed. If it fails, the session ends and the
// next one reads the batches again.
func (r *Relay) record(out *outcome) error {
	for _, f := range out.failed {
		out.deferAggs[aggOf(f.rec)] = "stream: message " + fmt.Sprint(f.rec.Seq) + " failed"
	}
	for _, rec := range out.deferred {
		if _, ok := out.deferAggs[aggOf(rec)]; !ok {
			out.deferAggs[aggOf(rec)] = "stream: an earlier message of the aggregate failed or was deferred"
		}
	}
	if len(out.failed) == 0 && len(out.deferAggs) == 0 && len(out.sent) == 0 {
		return nil
	}
	if r.aborted.Load() {
		return errStopped
	}
	fSeqs := make([]int64, len(out.failed))
	fErrs := make([]string, len(out.failed))
	fDelays := make([]int64, len(out.failed))
	fDead := make([]bool, len(out.failed))
	fCount := make([]bool, len(out.failed))
	for i, d := range out.failed {
		fSeqs[i], fErrs[i], fDelays[i], fDead[i] = d.f.Seq, errtext.Clean(d.f.Error), d.f.Delay.Milliseconds(), d.f.Dead
		fCount[i] = d.f.CountAttempt
	}
	types := make([]string, 0, len(out.deferAggs))
	ids := make([]string, 0, len(out.deferAggs))
	reasons := make([]string, 0, len(out.deferAggs))
	for a, reason := range out.deferAggs {
		types, ids, reasons = append(types, a.typ), append(ids, a.id), append(reasons, reason)
	}
	sent := make([]int64, len(out.sent))
	for i, rec := range out.sent {
		sent[i] = rec.Seq
	}
	q := r.q.recordMark
	if r.cfg.Cleanup == CleanupDelete {
		q = r.q.recordDelete
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.sendCtx), r.cfg.PublishTimeout)
	defer cancel()
	var nFailed, nDeferred, nSent int64
	var leading bool
	err := r.cfg.Pool.QueryRow(ctx, q, fSeqs, fErrs, fDelays, fDead, types, ids, reasons, sent, fCount, r.cfg.Slot, r.leaseToken()).
		Scan(&leading, &nFailed, &nDeferred, &nSent)
	if err != nil {
		return fmt.Errorf("cdc: record the batch (its messages are sent again after a reconnect): %w", err)
	}
	if !leading {
		return r.fenced(errRefused)
	}
	r.report(out)
	return nil
}

// streamLines are the log lines of the stream's failures, which the table
// path retries.
var streamLines = failure.Lines{
	Dead:  "message dead-lettered; its aggregate waits (table path)",
	Retry: "publish failed; retry scheduled on the table path",
	Wait:  "topic cannot take records; the message waits on the table path",
}

// report logs the outcome and calls the hooks.
func (r *Relay) report(out *outcome) {
	now := time.Now()
	if h := r.cfg.Hooks.Published; h != nil {
		for _, rec := range out.sent {
			h(rec, now.Sub(rec.CreatedAt))
		}
	}
	rp := failure.Reporter{Log: r.log, Lines: streamLines, Failed: r.cfg.Hooks.Failed}
	for _, d := range out.failed {
		rp.Report(d.rec, d.err, d.f)
	}
	for _, rec := range out.deferred {
		r.log.Debug("message handed to the table path", recAttrs(rec)...)
		if h := r.cfg.Hooks.Deferred; h != nil {
			h(rec)
		}
	}
}

func recAttrs(rec outbox.Record, extra ...any) []any {
	return append([]any{slog.String("message_id", rec.ID.String()), slog.Int64("seq", rec.Seq),
		slog.String("aggregate_type", rec.AggregateType), slog.String("aggregate_id", rec.AggregateID),
		slog.String("event_type", rec.EventType)}, extra...)
}
