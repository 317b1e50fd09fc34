package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
)

// maxLastErrorBytes bounds the error text kept per message, as pgstore does.
const maxLastErrorBytes = 4000

// process takes events in stream order, in batches of up to BatchSize
// messages, and handles each batch completely (check, publish, mark) before
// it confirms the batch's end position. It returns nil when ctx is done or
// the relay stops, between batches.
func (r *Relay) process(ctx context.Context, events <-chan event, confirmed *atomic.Uint64) error {
	heartbeat := time.NewTimer(r.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	lagTick := time.NewTicker(r.cfg.LagLogInterval)
	defer lagTick.Stop()
	r.behindNano.Store(0)
	for {
		var first event
		select {
		case <-ctx.Done():
			return nil
		case <-r.stopping:
			return nil
		case <-lagTick.C:
			r.logLag()
			continue
		case <-heartbeat.C:
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
		for b.records < r.cfg.BatchSize {
			select {
			case ev := <-events:
				b.add(ev)
			default:
				break fill
			}
		}
		if b.records > 0 {
			if err := r.handleBatch(b.items); err != nil {
				return err
			}
		}
		if r.aborted.Load() {
			return errStopped
		}
		if b.end > 0 && uint64(b.end) > confirmed.Load() {
			confirmed.Store(uint64(b.end))
		}
		if len(events) == 0 {
			r.behindNano.Store(0)
		}
		heartbeat.Reset(r.cfg.HeartbeatInterval)
	}
}

// batch is a run of events: the messages, and the last position after which
// nothing of the batch is pending.
type batch struct {
	items   []event
	records int
	end     pglogrepl.LSN
}

func (b *batch) add(ev event) {
	if ev.isRec {
		b.items = append(b.items, ev)
		b.records++
		return
	}
	b.end = max(b.end, ev.end)
}

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
	failed    []failure
	deferred  []outbox.Record
	deferAggs map[aggregate]string // aggregate -> reason
}

type failure struct {
	rec   outbox.Record
	err   error
	delay time.Duration
	dead  bool
}

type aggregate struct{ typ, id string }

func aggOf(rec outbox.Record) aggregate { return aggregate{rec.AggregateType, rec.AggregateID} }

// handleBatch checks, publishes and marks one batch of messages in stream
// (commit) order. It returns errStopped when the relay stops before the
// batch was resolved: then nothing of it is confirmed, and the next active
// relay reads it again.
func (r *Relay) handleBatch(items []event) error {
	out := outcome{deferAggs: map[aggregate]string{}}
	var toCheck []event
	for _, ev := range items {
		if ev.decodeErr != nil {
			out.failed = append(out.failed, failure{rec: ev.rec, err: fmt.Errorf("%w: %w", sink.ErrPermanent, ev.decodeErr), dead: true})
			continue
		}
		toCheck = append(toCheck, ev)
	}
	publish, err := r.check(toCheck, &out)
	if err != nil {
		return err
	}
	if err := r.publish(publish, &out); err != nil {
		return err
	}
	return r.finish(&out)
}

// check runs check.sql over the batch and returns the messages to publish
// from the stream, in order. The others are deferred (out.deferred) or
// skipped (their rows are SENT or gone). A row that is absent because its
// transaction is not yet visible is read again until it is.
func (r *Relay) check(items []event, out *outcome) ([]outbox.Record, error) {
	verdicts := make(map[int64]verdict, len(items))
	pending := items
	wait := 5 * time.Millisecond
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
		if !r.sleep(wait) {
			return nil, errStopped
		}
		wait = min(2*wait, time.Second)
		pending = again
	}
	var publish []outbox.Record
	for _, ev := range items {
		v := verdicts[ev.rec.Seq]
		switch {
		case v.status == "PENDING" && !v.blocked:
			publish = append(publish, ev.rec)
		case v.status == "" || v.status == string(outbox.StatusSent):
			r.log.Debug("message already handled; skipped", recAttrs(ev.rec, slog.String("status", v.status))...)
		default:
			out.deferred = append(out.deferred, ev.rec)
		}
	}
	return publish, nil
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
	rows, err := r.cfg.Pool.Query(ctx, r.q.check, seqs, types, ids, xids)
	if err != nil {
		return fmt.Errorf("cdc: check batch: %w", err)
	}
	var seq int64
	var v verdict
	_, err = pgx.ForEachRow(rows, []any{&seq, &v.status, &v.blocked, &v.visible}, func() error {
		verdicts[seq] = v
		return nil
	})
	if err != nil {
		return fmt.Errorf("cdc: check batch: %w", err)
	}
	return nil
}

// publish sends recs in waves: wave k holds the k-th message of each
// aggregate in the batch, so that no publish call holds two messages of one
// aggregate, and a message goes out only after the earlier ones of its
// aggregate were acknowledged. A message whose publish failed (a counted
// attempt) is recorded as FAILED or DEAD_LETTER and its aggregate deferred,
// with the rest of the aggregate's messages; the table path retries it as
// the polling relay would. While the broker is unavailable the whole
// stream waits and retries, counting nothing.
func (r *Relay) publish(recs []outbox.Record, out *outcome) error {
	var waves [][]outbox.Record
	count := map[aggregate]int{}
	for _, rec := range recs {
		k := count[aggOf(rec)]
		count[aggOf(rec)]++
		if k == len(waves) {
			waves = append(waves, nil)
		}
		waves[k] = append(waves[k], rec)
	}
	failedAggs := map[aggregate]bool{}
	backoff := time.Duration(0)
	for _, wave := range waves {
		var todo []outbox.Record
		for _, rec := range wave {
			if failedAggs[aggOf(rec)] {
				out.deferred = append(out.deferred, rec)
				continue
			}
			todo = append(todo, rec)
		}
		for len(todo) > 0 {
			if r.isStopping() && r.sendCtx.Err() != nil {
				return errStopped
			}
			ctx, cancel := context.WithTimeout(r.sendCtx, r.cfg.PublishTimeout)
			errs := r.cfg.Sink.Publish(ctx, todo)
			cancel()
			if r.aborted.Load() {
				return errStopped
			}
			if len(errs) != len(todo) {
				bug := fmt.Errorf("cdc: sink returned %d results for %d records", len(errs), len(todo))
				r.log.Error("sink bug", slog.Any("error", bug))
				errs = make([]error, len(todo))
				for i := range errs {
					errs[i] = fmt.Errorf("%w: %w", sink.ErrUnavailable, bug)
				}
			}
			var again []outbox.Record
			var lastErr error
			for i, rec := range todo {
				err := errs[i]
				if err == nil {
					out.sent = append(out.sent, rec)
					continue
				}
				switch sink.Classify(err) {
				case sink.Unavailable:
					again = append(again, rec)
					lastErr = err
				case sink.Permanent:
					failedAggs[aggOf(rec)] = true
					out.failed = append(out.failed, failure{rec: rec, err: err, dead: true})
				default:
					failedAggs[aggOf(rec)] = true
					dead := r.cfg.MaxAttempts <= 1
					out.failed = append(out.failed, failure{rec: rec, err: err, dead: dead, delay: r.retryDelay(1)})
				}
			}
			todo = again
			if len(todo) == 0 {
				backoff = 0
				break
			}
			if r.isStopping() {
				return errStopped
			}
			backoff = min(max(2*backoff, 500*time.Millisecond), r.cfg.UnavailableBackoffMax)
			r.log.Warn("broker unavailable; the stream waits", slog.Any("error", lastErr),
				slog.Int("messages", len(todo)), slog.Duration("retry_in", backoff))
			if !r.sleep(backoff) {
				return errStopped
			}
		}
	}
	return nil
}

// finish records the batch's outcome in one transaction: failures,
// deferred aggregates, and the SENT marks (or deletes). Only then is the
// batch's end position confirmed. If it fails, the session ends and the
// next one reads the batch again.
func (r *Relay) finish(out *outcome) error {
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.sendCtx), r.cfg.PublishTimeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		if len(out.failed) > 0 {
			seqs := make([]int64, len(out.failed))
			errs := make([]string, len(out.failed))
			delays := make([]int64, len(out.failed))
			deads := make([]bool, len(out.failed))
			for i, f := range out.failed {
				seqs[i], errs[i], delays[i], deads[i] = f.rec.Seq, cleanError(f.err.Error()), f.delay.Milliseconds(), f.dead
			}
			if _, err := tx.Exec(ctx, r.q.fail, seqs, errs, delays, deads); err != nil {
				return fmt.Errorf("record failures: %w", err)
			}
		}
		if len(out.deferAggs) > 0 {
			var types, ids, reasons []string
			for a, reason := range out.deferAggs {
				types, ids, reasons = append(types, a.typ), append(ids, a.id), append(reasons, reason)
			}
			if _, err := tx.Exec(ctx, r.q.deferAggs, types, ids, reasons); err != nil {
				return fmt.Errorf("defer aggregates: %w", err)
			}
		}
		if len(out.sent) > 0 {
			seqs := make([]int64, len(out.sent))
			for i, rec := range out.sent {
				seqs[i] = rec.Seq
			}
			q := r.q.markSent
			if r.cfg.Cleanup == CleanupDelete {
				q = r.q.deleteSent
			}
			if _, err := tx.Exec(ctx, q, seqs); err != nil {
				return fmt.Errorf("mark sent: %w", err)
			}
		}
		if r.aborted.Load() {
			return errStopped
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cdc: record the batch (its messages are sent again after a reconnect): %w", err)
	}
	r.report(out)
	return nil
}

// report logs the outcome and calls the hooks.
func (r *Relay) report(out *outcome) {
	now := time.Now()
	if h := r.cfg.Hooks.Published; h != nil {
		for _, rec := range out.sent {
			h(rec, now.Sub(rec.CreatedAt))
		}
	}
	for _, f := range out.failed {
		attrs := recAttrs(f.rec, slog.String("error", f.err.Error()))
		if f.dead {
			r.log.Error("message dead-lettered; its aggregate waits (table path)", attrs...)
		} else {
			r.log.Warn("publish failed; retry scheduled on the table path", append(attrs, slog.Duration("retry_in", f.delay))...)
		}
		if h := r.cfg.Hooks.Failed; h != nil {
			h(f.rec, f.err, f.dead)
		}
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

// retryDelay is the polling relay's delay before the next attempt after
// `attempt` failures: min(RetryMax, RetryBase*2^attempt), minus a random
// jitter of up to half.
func (r *Relay) retryDelay(attempt int) time.Duration {
	d := r.cfg.RetryMax
	if attempt < 40 {
		if e := r.cfg.RetryBase << attempt; e > 0 && e < d {
			d = e
		}
	}
	return d - time.Duration(rand.Int64N(int64(d/2)+1))
}

// cleanError makes an error text storable and bounded: valid UTF-8 without
// NUL characters, at most maxLastErrorBytes bytes.
func cleanError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= maxLastErrorBytes {
		return s
	}
	cut := maxLastErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
