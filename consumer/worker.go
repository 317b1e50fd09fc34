package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/backoff"
	"github.com/outbox-dev/outbox/internal/lifecycle"
)

// commitTimeout bounds one offset commit. A commit that fails is not
// retried: the next one covers its records, and if none comes, the next
// owner of the partition gets them again and the inbox finds them
// duplicates.
const commitTimeout = 10 * time.Second

// worker handles the records of one partition, strictly in offset order,
// on a goroutine of its own.
type worker struct {
	r   *Runner
	cl  *kgo.Client
	key partitionKey
	log *slog.Logger

	mu     sync.Mutex
	queue  []*kgo.Record
	paused bool          // fetching of the partition is paused because queue is long
	wake   chan struct{} // signalled when records are queued

	quit         *lifecycle.Signal // closed by stop
	commitOnStop bool              // written before quit is closed
	done         chan struct{}     // closed when run returns

	// finished is the last record handled or parked, and committed the
	// offset after the last committed record (both used by run only).
	finished  *kgo.Record
	committed int64

	// The partition's lag is hwm - pos (guarded by mu): hwm is its high
	// watermark as last seen, pos the offset after the last finished
	// record (before the first, the first record given to the worker);
	// -1 while unknown. gone is set when the worker stops, after which
	// nothing is reported (the Unassigned hook has the last word).
	hwm, pos int64
	gone     bool
}

func newWorker(r *Runner, cl *kgo.Client, key partitionKey) *worker {
	return &worker{
		r: r, cl: cl, key: key,
		log:  r.log.With(slog.String("topic", key.topic), slog.Int("partition", int(key.partition))),
		wake: make(chan struct{}, 1),
		quit: lifecycle.NewSignal(nil),
		done: make(chan struct{}),
		hwm:  -1, pos: -1,
	}
}

// lagLocked is the partition's lag, or -1 while unknown. w.mu is held.
func (w *worker) lagLocked() int64 {
	if w.hwm < 0 || w.pos < 0 {
		return -1
	}
	return max(0, w.hwm-w.pos)
}

// lag is the partition's lag, or -1 while unknown.
func (w *worker) lag() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lagLocked()
}

// reportLocked passes the lag to the Lag hook, if known. w.mu is held, so
// that reports reach the hook in the order of the changes.
func (w *worker) reportLocked() {
	if h := w.r.cfg.Hooks.Lag; h != nil && !w.gone {
		if lag := w.lagLocked(); lag >= 0 {
			h(w.key.topic, w.key.partition, lag)
		}
	}
}

// setHighWatermark records a high watermark read from a fetch or a
// refresh; an older (lower) one than already known is ignored.
func (w *worker) setHighWatermark(hwm int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if hwm > w.hwm {
		w.hwm = hwm
		w.reportLocked()
	}
}

// finish records that rec was handled or parked.
func (w *worker) finish(rec *kgo.Record) {
	w.finished = rec
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pos = rec.Offset + 1
	w.reportLocked()
}

// add queues records, in offset order after those queued before. When
// MaxPollRecords or more wait, fetching of the partition is paused until
// the worker takes them; the client then fetches from after the last
// record it returned, so nothing is skipped.
func (w *worker) add(recs []*kgo.Record, hwm int64) {
	w.mu.Lock()
	if w.pos < 0 && len(recs) > 0 {
		w.pos = recs[0].Offset
	}
	if hwm > w.hwm {
		w.hwm = hwm
	}
	w.reportLocked()
	w.queue = append(w.queue, recs...)
	if len(w.queue) >= w.r.cfg.MaxPollRecords && !w.paused {
		w.paused = true
		w.cl.PauseFetchPartitions(map[string][]int32{w.key.topic: {w.key.partition}})
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stop asks the worker to return after the record it is handling; a retry
// it waits for is abandoned. With commit, it commits the offsets of the
// records it finished before returning. Calling stop again does nothing.
func (w *worker) stop(commit bool) {
	w.quit.CloseWith(func() { w.commitOnStop = commit })
}

func (w *worker) run() {
	defer close(w.done)
	defer func() {
		if w.commitOnStop {
			w.commit()
		}
		w.mu.Lock()
		w.gone = true
		w.mu.Unlock()
		if h := w.r.cfg.Hooks.Unassigned; h != nil {
			h(w.key.topic, w.key.partition)
		}
	}()
	for {
		batch, ok := w.next()
		if !ok {
			return
		}
		for _, rec := range batch {
			if !w.process(rec) {
				return // stopped while retrying: rec is not finished
			}
			w.finish(rec)
			if w.quit.Closed() {
				return
			}
		}
		w.commit()
	}
}

// next waits for queued records and takes them all, resuming a paused
// partition. It returns false when the worker is stopped.
func (w *worker) next() ([]*kgo.Record, bool) {
	for {
		if w.quit.Closed() {
			return nil, false
		}
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		if len(batch) > 0 && w.paused {
			w.paused = false
			w.cl.ResumeFetchPartitions(map[string][]int32{w.key.topic: {w.key.partition}})
		}
		w.mu.Unlock()
		if len(batch) > 0 {
			return batch, true
		}
		select {
		case <-w.wake:
		case <-w.quit.C():
			return nil, false
		}
	}
}

// process handles one record until it is handled or parked (true), or the
// worker is stopped first (false).
func (w *worker) process(rec *kgo.Record) bool {
	cfg := &w.r.cfg
	msg, err := inbox.FromRecord(rec)
	if err != nil {
		return w.park(msg, 0, err)
	}
	attempts := 0 // counted attempts: those the database was reachable for
	for failures := 1; ; failures++ {
		attempts++
		start := time.Now()
		ctx, cancel := context.WithTimeout(w.r.base, cfg.HandlerTimeout)
		res, err := w.r.app.Apply(ctx, cfg.Consumer, msg)
		cancel()
		if err == nil {
			latency := time.Since(start)
			if h := cfg.Hooks.Handled; h != nil {
				h(msg, res, latency)
			}
			w.log.Debug("message handled", append(msgAttrs(msg), slog.String("result", res.String()),
				slog.Duration("latency", latency))...)
			return true
		}
		if errors.Is(err, inbox.ErrPermanent) || errors.Is(err, inbox.ErrMalformed) {
			return w.park(msg, attempts, err)
		}
		if w.databaseDown() {
			attempts-- // not the message's fault: do not count it
		} else if attempts >= cfg.MaxAttempts {
			return w.park(msg, attempts, err)
		}
		if h := cfg.Hooks.Retried; h != nil {
			h(msg, err)
		}
		delay := w.backoff(failures)
		w.log.Warn("handler failed; retrying", append(msgAttrs(msg), slog.Int("attempts", attempts),
			slog.Duration("retry_in", delay), slog.Any("error", err))...)
		w.commit() // keep the progress made before this record while waiting
		if !w.quit.Sleep(delay) {
			return false
		}
	}
}

// databaseDown reports whether the inbox's database does not answer, which
// makes a failed attempt the outage's fault, not the message's.
func (w *worker) databaseDown() bool {
	ctx, cancel := context.WithTimeout(w.r.base, w.r.cfg.HandlerTimeout)
	defer cancel()
	return w.r.app.Ping(ctx) != nil
}

// park parks msg, retrying while the database refuses, so that the
// partition moves on only once the message is safe. It returns false when
// the worker is stopped first.
func (w *worker) park(msg inbox.Message, attempts int, cause error) bool {
	cfg := &w.r.cfg
	for failures := 1; ; failures++ {
		ctx, cancel := context.WithTimeout(w.r.base, cfg.HandlerTimeout)
		err := w.r.app.Park(ctx, cfg.Consumer, msg, attempts, cause)
		cancel()
		if err == nil {
			if h := cfg.Hooks.Parked; h != nil {
				h(msg, cause)
			}
			return true
		}
		delay := w.backoff(failures)
		w.log.Error("parking failed; retrying", append(msgAttrs(msg), slog.Duration("retry_in", delay),
			slog.Any("error", err), slog.Any("cause", cause))...)
		if !w.quit.Sleep(delay) {
			return false
		}
	}
}

// backoff is the wait before retry n: min(RetryMax, RetryBase*2^(n-1)),
// minus up to half of it as jitter.
func (w *worker) backoff(n int) time.Duration {
	return backoff.Delay(w.r.cfg.RetryBase, w.r.cfg.RetryMax, n-1)
}

// commit commits the offset after the last finished record, if it is not
// committed yet.
func (w *worker) commit() {
	rec := w.finished
	if rec == nil || rec.Offset+1 <= w.committed {
		return
	}
	ctx, cancel := context.WithTimeout(w.r.base, commitTimeout)
	defer cancel()
	if err := w.cl.CommitRecords(ctx, rec); err != nil {
		w.log.Warn("offset commit failed; records after the last commit will be delivered again",
			slog.Int64("offset", rec.Offset), slog.Any("error", err))
		return
	}
	w.committed = rec.Offset + 1
}

// msgAttrs are the log attributes of a message.
func msgAttrs(msg inbox.Message) []any {
	return []any{
		slog.String("message_id", msg.ID.String()),
		slog.String("aggregate_id", msg.AggregateID),
		slog.String("event_type", msg.EventType),
		slog.Int64("offset", msg.Offset),
	}
}
