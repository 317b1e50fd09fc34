package relay

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/failpoint"
	"github.com/outbox-dev/outbox/internal/lifecycle"
	"github.com/outbox-dev/outbox/relay/failure"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// runBatch publishes and marks a claimed batch: SENT for what the broker
// acknowledged, what the relay's failure.Policy decided for what failed,
// and released for what the strategy abandoned (strategy.ErrAbandoned),
// while the relay stops, for what the broker could not be reached for, and
// for the later messages of an aggregate whose message was not sent (see
// sortOut). If claimNext, the relay is neither stopping nor pausing, and
// the strategy can, the mark of what was sent also claims the next batch,
// which runBatch returns (nil otherwise).
func (r *Relay) runBatch(b *batch, claimNext bool) *batch {
	failpoint.Inject("relay-after-claim")
	errs := r.publishBatch(b)
	failpoint.Inject("relay-after-ack")
	out := r.sortOut(b.claim.Records, errs)
	r.orderBroken(out)
	if !out.unavailable && len(out.sent) > 0 {
		r.pause.Reset()
	}
	l := r.lingerAfter(b, claimNext)
	next := r.settle(b, out, claimNext, l)
	if next == nil && len(out.sent) > 0 {
		l.wait() // after every mark, so that none waits for it
	}
	return next
}

// lingerAfter is the worker's wait after b (Config.Linger): none unless
// it claims next and b was not full.
func (r *Relay) lingerAfter(b *batch, claimNext bool) *linger {
	l := &linger{stopping: r.stopping}
	if claimNext && len(b.claim.Records) < r.cfg.BatchSize {
		l.d = r.cfg.lingerAt(r.rate.perSecond(time.Now()))
	}
	return l
}

// settle records out: first SENT for what was sent (which may claim the
// next batch, returned), then the release of what is given back, and only
// then the failures. A failed message thus stays leased while the later
// messages of its aggregate go back, so that no relay claims one of them
// ahead of it.
func (r *Relay) settle(b *batch, out outcome, claimNext bool, l *linger) *batch {
	var next *batch
	if len(out.sent) > 0 {
		next = r.settleSent(b, out, claimNext, l)
	}
	if len(out.released) > 0 {
		r.settleReleased(b, out)
	}
	if len(out.failed) > 0 {
		r.settleFailed(b, out)
	}
	return next
}

// publishBatch publishes b's messages and returns one error per message.
// It stops waiting for acks PublishTimeout after the claim, well before
// the lease ends, so that no ack arrives for a message another relay may
// own; a publish that waits long wakes the other workers
// (watchSlowPublish).
func (r *Relay) publishBatch(b *batch) []error {
	ctx, cancel := context.WithDeadline(r.sendCtx, b.start.Add(r.cfg.PublishTimeout))
	defer cancel()
	slowDone := r.watchSlowPublish()
	defer slowDone()
	return r.publish(ctx, b.claim.Records)
}

// outcome is what happens to the messages of a published batch.
type outcome struct {
	sent []outbox.Record
	// failed are the messages whose publish failed, errs their errors and
	// failures what the relay's policy decided for them, index by index.
	failed   []outbox.Record
	errs     []error
	failures []store.Failure
	// released are the messages whose leases are given back: those the
	// strategy abandoned (strategy.ErrAbandoned; abandoned counts them),
	// those after a message of their aggregate that was not sent
	// (followers counts them), those the relay did not hand to a sink that
	// publishes one message per aggregate (onePerAggregate counts them),
	// those a sink cut from a run without sending them (cut counts them),
	// and those the broker could not be reached for while the relay stops.
	released                                   []int64
	abandoned, followers, onePerAggregate, cut int
	// broken are the aggregates of which the sink acknowledged a message
	// after an earlier one of the batch was not sent.
	broken []aggregate
	// unavailable is true when a publish found the broker unreachable.
	unavailable bool
}

// sortOut sorts recs by their publish's error (errs, index by index) and
// decides the failures. Per aggregate, the messages before its first one
// not acknowledged are sent; that one is sorted by its error (notSent);
// every later one is a follower (follow).
func (r *Relay) sortOut(recs []outbox.Record, errs []error) outcome {
	var out outcome
	var stopped map[aggregate]bool // aggregates with a message not sent; true once broken
	stopping := r.sendCtx.Err() != nil
	now := time.Now()
	for i, rec := range recs {
		agg := aggregateOf(rec)
		switch broken, ok := stopped[agg]; {
		case ok:
			stopped[agg] = out.follow(rec, errs[i], agg, broken)
		case errs[i] == nil:
			out.sent = append(out.sent, rec)
		default:
			if stopped == nil {
				stopped = make(map[aggregate]bool)
			}
			stopped[agg] = false
			r.notSent(&out, rec, errs[i], stopping, now)
		}
	}
	return out
}

// notSent sorts rec, the first message of its aggregate in the batch that
// was not acknowledged, by its error err. A publish the strategy abandoned
// is released whatever else err wraps: it neither pauses the relay nor
// counts; so is one that was not handed to the broker (sink.ErrNotSent:
// held back by the relay from a sink that takes one message per aggregate,
// or cut from a run by the sink), and, while the relay stops, one that
// found the broker unreachable. Any other is failed, as the policy decides.
func (r *Relay) notSent(out *outcome, rec outbox.Record, err error, stopping bool, now time.Time) {
	if errors.Is(err, strategy.ErrAbandoned) {
		out.released = append(out.released, rec.Seq)
		out.abandoned++
		return
	}
	if errors.Is(err, sink.ErrNotSent) {
		out.released = append(out.released, rec.Seq)
		if errors.Is(err, errOnePerAggregate) {
			out.onePerAggregate++
		} else {
			out.cut++
		}
		return
	}
	unavailable := sink.Classify(err) == sink.Unavailable
	if unavailable && stopping {
		out.released = append(out.released, rec.Seq)
		return
	}
	out.unavailable = out.unavailable || unavailable
	out.failed = append(out.failed, rec)
	out.errs = append(out.errs, err)
	out.failures = append(out.failures, r.policy.Decide(rec, err, now))
}

// follow sorts rec, a message after one of its aggregate agg that was not
// sent, and reports whether agg's order is broken: rec is released unsent
// whatever its error, and counts nothing; but if the sink acknowledged it
// (err nil, against the sink.RunSink contract) it is on the topic, so it
// is sent, and agg joins out.broken (once: broken says it has).
func (out *outcome) follow(rec outbox.Record, err error, agg aggregate, broken bool) bool {
	if err != nil {
		out.released = append(out.released, rec.Seq)
		out.followers++
		return broken
	}
	out.sent = append(out.sent, rec)
	if !broken {
		out.broken = append(out.broken, agg)
	}
	return true
}

// releaseReason says why out.released are given back.
func (out outcome) releaseReason() string {
	var why []string
	if out.abandoned > 0 {
		why = append(why, "the strategy abandoned their publish: its source of messages ended")
	}
	if out.followers > 0 {
		why = append(why, "an earlier message of the aggregate was not sent")
	}
	if out.onePerAggregate > 0 {
		why = append(why, "the sink publishes one message per aggregate per call")
	}
	if out.cut > 0 {
		why = append(why, "the sink cut the run before them (a change of topic, or a copy still in its producer); they follow in a later batch")
	}
	if len(out.released) > out.abandoned+out.followers+out.onePerAggregate+out.cut {
		why = append(why, "shutdown: the broker could not be reached, or did not acknowledge in time")
	}
	return strings.Join(why, "; ")
}

// settleReleased gives out.released back and logs why.
func (r *Relay) settleReleased(b *batch, out outcome) {
	if n, ok := r.giveBack(b, out.released); ok {
		r.log.Info("released unsent messages", slog.String("reason", out.releaseReason()), slog.Int64("messages", n))
	}
}

// settleSent marks out.sent SENT and calls Hooks.Published. If claimNext,
// the worker claims again at once, after lingering (l) as Config.Linger
// says when the batch was not full. If the batch has nothing else to mark
// and the relay neither stops nor pauses, the mark asks the strategy for
// the next batch as well (strategy.Next): a strategy that claims it in the
// mark's round trip lingers before that trip and returns the batch, which
// settleSent returns. Otherwise (nil) runBatch lingers after the batch's
// marks, so that its acknowledgement does not wait, and the worker claims
// on its own.
func (r *Relay) settleSent(b *batch, out outcome, claimNext bool, l *linger) *batch {
	var next *batch
	var nx *strategy.Next
	if claimNext && len(out.failed) == 0 && len(out.released) == 0 && r.wantsNext() {
		next = r.newBatch()
		nx = &strategy.Next{Params: r.claimParams(), Linger: func() bool {
			if l.wait() {
				next = r.newBatch() // the claim starts after the wait
			}
			return r.wantsNext()
		}}
	}
	seqs := seqsOf(out.sent)
	var c *store.Claim
	n, err := r.mark(r.leaseEnd(b), func(ctx context.Context) (int64, error) {
		n, claimed, err := r.strategy.MarkSent(ctx, b.claim.Token, seqs, nx)
		nx = nil // a retry only marks
		if err == nil {
			c = claimed
		}
		return n, err
	})
	r.markedSent(b, out.sent, n, err)
	if c == nil {
		return nil
	}
	next.claim = *c
	r.claimed(*c)
	return next
}

// wantsNext reports whether a worker claims now: the relay neither stops
// nor pauses for an unreachable broker.
func (r *Relay) wantsNext() bool {
	return !r.stopping.Closed() && r.pause.Remaining(time.Now()) <= 0
}

// linger is a worker's wait before it claims again (Config.Linger), done
// at most once per batch.
type linger struct {
	stopping *lifecycle.Signal
	d        time.Duration // 0: no wait
	done     bool
}

// wait waits d, returning early when the relay stops; it reports whether
// it waited, which only its first call does.
func (l *linger) wait() bool {
	if l.done || l.d <= 0 {
		return false
	}
	l.done = true
	l.stopping.Sleep(l.d)
	return true
}

// markedSent reports the SENT mark of sent (n rows changed, or err).
func (r *Relay) markedSent(b *batch, sent []outbox.Record, n int64, err error) {
	if err != nil {
		r.log.Error("mark sent failed; the messages will be sent again after the lease expires",
			slog.Any("error", err), slog.Int("messages", len(sent)))
		return
	}
	r.fenced(b.claim.Token, len(sent), n)
	if r.cfg.Hooks.Published != nil {
		now := time.Now()
		for _, rec := range sent {
			r.cfg.Hooks.Published(rec, now.Sub(rec.CreatedAt))
		}
	}
}

// settleFailed records the decided failures (FAILED or DEAD_LETTER) and,
// once they are recorded, reports each (a log line, Hooks.Failed); a batch that found the broker unreachable logs the
// relay's pause.
func (r *Relay) settleFailed(b *batch, out outcome) {
	n, err := r.mark(r.leaseEnd(b), func(ctx context.Context) (int64, error) {
		return r.strategy.MarkFailed(ctx, b.claim.Token, out.failures)
	})
	switch {
	case err != nil:
		r.log.Error("mark failed failed; the messages will be retried after the lease expires",
			slog.Any("error", err), slog.Int("messages", len(out.failures)))
	case n < int64(len(out.failures)):
		// Another relay owns some of them now and decides their fate; which
		// ones is not known, so none is reported as retrying or dead.
		r.fenced(b.claim.Token, len(out.failures), n)
	default:
		for i, rec := range out.failed {
			r.report.Report(rec, out.errs[i], out.failures[i])
		}
	}
	if out.unavailable {
		r.log.Warn("broker unavailable; relay pausing", slog.Duration("pause", r.pause.Remaining(time.Now())))
	}
}

func seqsOf(recs []outbox.Record) []int64 {
	seqs := make([]int64, len(recs))
	for i, rec := range recs {
		seqs[i] = rec.Seq
	}
	return seqs
}

// publish publishes recs with the sink and returns one error per record,
// nil for those the broker acknowledged. The records holdBack holds back
// are not given to the sink, and get its errors; the others are published
// as usual.
func (r *Relay) publish(ctx context.Context, recs []outbox.Record) []error {
	held, run := r.holdBack(recs)
	if held == nil {
		return r.publishValid(ctx, recs, run)
	}
	var send []outbox.Record
	var at []int // the index in recs of each record of send
	for i, rec := range recs {
		if held[i] == nil {
			send = append(send, rec)
			at = append(at, i)
		}
	}
	errs := held
	if len(send) > 0 {
		for j, err := range r.publishValid(ctx, send, run) {
			errs[at[j]] = err
		}
	}
	return errs
}

// publishValid publishes recs with the sink, with PublishRuns if they hold
// a run, and returns one error per record (see failure.SinkResults for a
// sink that returns another number).
func (r *Relay) publishValid(ctx context.Context, recs []outbox.Record, run bool) []error {
	var errs []error
	if run {
		errs = r.runs.PublishRuns(ctx, recs)
	} else {
		errs = r.cfg.Sink.Publish(ctx, recs)
	}
	errs, bug := failure.SinkResults(errs, len(recs))
	if bug != nil {
		r.log.Error("sink bug; the relay pauses as for an unreachable broker", slog.Any("error", bug))
	}
	return errs
}

// mark runs a state change, retrying transient database errors (a killed
// connection, a failover) until shortly before the lease ends. Past that the
// message is someone else's to send, and the fence would reject the change
// anyway.
func (r *Relay) mark(leaseEnd time.Time, fn func(context.Context) (int64, error)) (int64, error) {
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithDeadline(context.Background(), leaseEnd)
		n, err := fn(ctx)
		cancel()
		if err == nil {
			return n, nil
		}
		if time.Until(leaseEnd) < wait {
			return 0, err
		}
		r.log.Warn("mark failed; retrying", slog.Any("error", err), slog.Duration("retry_in", wait))
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Second)
	}
}

func (r *Relay) fenced(token uuid.UUID, want int, got int64) {
	if got >= int64(want) {
		return
	}
	lost := want - int(got)
	r.log.Warn("lease was taken over; another relay owns these messages now",
		slog.String("token", token.String()), slog.Int("messages", lost))
	if r.cfg.Hooks.Fenced != nil {
		r.cfg.Hooks.Fenced(lost)
	}
}
