package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
)

// session is one streaming session's processing of the stream, in stages
// that overlap:
//
//   - The reader (stream.go) decodes the messages and hands them on in
//     stream order, each once it fits in the session's byte budget
//     (Config.MaxInFlightBytes, see budget), which it holds until the
//     message is passed by the confirmed position.
//   - The feeder (feeder.go) reads the events in stream order, cuts them
//     into batches within Config.MaxInFlight, checks each batch (one
//     statement, batches one after the other) and adds it to the ledger.
//   - The relay core's workers (Relay.core, driving streamStrategy) claim
//     the ledger's ready messages, one per aggregate or a run (Config.MaxRun),
//     each only after the previous one of its aggregate was acknowledged
//     or is in the same claim, publish them and mark what became of them.
//   - The recorder records what the check and the marks leave to record,
//     and the ledger then confirms the positions over what is recorded.
//
// So the confirmed position only moves over messages that were
// acknowledged (or recorded as failed or deferred) and whose bookkeeping
// committed: a crash re-sends what came after it, never loses.
type session struct {
	r         *Relay
	s         *streamStrategy
	a         *attachment
	events    <-chan event
	confirmed *atomic.Uint64
	budget    *budget
	checks    atomic.Uint64 // checks started
	room      chan struct{} // a token when messages were passed

	// Under s.mu: the cumulative count of messages added at the end of
	// each batch not yet passed (ends), and the messages passed, for
	// Relay.batchesInFlight.
	ends   []int
	added  int
	passed int
}

// newSession attaches a fresh ledger and recorder to the stream's strategy,
// under the lease token of the session's lead (its records are fenced by
// it); the previous session's must have been detached (session.end).
func (r *Relay) newSession(events <-chan event, confirmed *atomic.Uint64, bud *budget) *session {
	ss := &session{r: r, s: r.strat, events: events, confirmed: confirmed, budget: bud, room: make(chan struct{}, 1)}
	a := &attachment{l: newLedger(), returned: make(chan struct{}, 1), token: r.leaseToken()}
	a.ctx, a.cancel = context.WithCancel(r.sendCtx)
	a.rec = newRecorder(func(out toRecord) error { return r.record(out, a.token) }, ss.complete)
	ss.a = a
	r.behindNano.Store(0)
	r.batchesInFlight.Store(0)
	r.strat.attach(a)
	return ss
}

// run feeds the stream into the session until ctx is done, the relay
// stops, or an error; then it lets the core publish and the recorder
// record what the ledger holds (see drain), and ends the session. It
// returns errStopped when the relay was aborted.
func (ss *session) run(ctx context.Context) error {
	err := ss.feed(ctx)
	if !ss.r.aborted.Load() {
		ss.drain()
	}
	ss.end()
	if rerr := ss.a.rec.failure(); rerr != nil {
		return rerr
	}
	if err == nil && ss.r.aborted.Load() {
		err = errStopped
	}
	return err
}

// drain waits until every message the ledger holds is recorded and
// passed, the recorder failed, the lead is lost, or the relay's publishes
// are cancelled (ShutdownTimeout after Stop, or abort).
func (ss *session) drain() {
	lead := ss.r.leadContext()
	for {
		if ss.held() == 0 && ss.a.rec.idle() {
			return
		}
		select {
		case <-ss.a.rec.progress:
		case <-ss.a.rec.failed:
			return
		case <-ss.r.sendCtx.Done():
			return
		case <-lead.Done():
			return
		}
	}
}

// end detaches the session from the strategy: no more claims, the
// publishes of its claims are cancelled, and once every claim came back
// and the records under way returned, its marks change nothing more. It
// does not detach while a claim is out, so that an old claim's publish or
// mark never runs under the next session: past the core's lease it logs a
// warning and keeps waiting, until the claims come back or the relay's
// publishes are cancelled (ShutdownTimeout after Stop). After an abort it
// waits for nothing.
func (ss *session) end() {
	ss.s.closeClaims(ss.a)
	ss.a.cancel()
	if !ss.r.aborted.Load() {
		ss.waitReturned(streamLease(ss.r.cfg))
		ss.waitRecorded()
	}
	ss.s.detach(ss.a)
}

// waitReturned waits until no claim of the session's ledger is out, or
// the relay's publishes are cancelled (Stop's ShutdownTimeout, or abort);
// if that takes longer than warnAfter it logs a warning, once.
func (ss *session) waitReturned(warnAfter time.Duration) {
	warn := time.NewTimer(warnAfter)
	defer warn.Stop()
	for {
		ss.s.mu.Lock()
		n := ss.a.l.leased()
		ss.s.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ss.a.returned:
		case <-ss.r.sendCtx.Done():
			return
		case <-warn.C:
			ss.r.log.Warn("the stream's publishes did not return within the lease; the session waits for them before it ends",
				slog.Int("messages", n), slog.Duration("lease", warnAfter))
		}
	}
}

// waitRecorded waits until the recorder's statements returned, or it
// failed.
func (ss *session) waitRecorded() {
	for !ss.a.rec.idle() {
		select {
		case <-ss.a.rec.progress:
		case <-ss.a.rec.failed:
			return
		}
	}
}

// held returns the messages the ledger holds.
func (ss *session) held() int {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	return ss.a.l.held()
}

// complete takes a group whose record committed (the recorder's
// callback): it passes the group's messages in the ledger, confirms the
// position that moved (under the strategy's mutex, so that two records
// completing at once never move it backwards), gives their bytes back to
// the budget and their room to the feeder, and reports the record
// (Relay.report: Hooks.Published for the acknowledged messages, what was
// handed to the table path). After an abort it confirms and reports
// nothing.
func (ss *session) complete(out toRecord) {
	r := ss.r
	epoch := ss.checks.Load()
	ss.s.mu.Lock()
	confirm, msgs, bytes := ss.a.l.recorded(out, epoch)
	ss.pass(msgs)
	aborted := r.aborted.Load()
	if !aborted && confirm > 0 && uint64(confirm) > ss.confirmed.Load() {
		ss.confirmed.Store(uint64(confirm))
	}
	idle := ss.a.l.held() == 0
	ready := !ss.a.closed && ss.a.l.ready() > 0
	ss.s.mu.Unlock()
	if ready {
		ss.s.wakes.signal()
	}
	if aborted {
		return // nothing more is confirmed
	}
	ss.budget.give(bytes)
	select {
	case ss.room <- struct{}{}:
	default:
	}
	if idle && len(ss.events) == 0 {
		r.behindNano.Store(0)
	}
	r.report(out)
}

// countBatch counts a batch of n messages added to the ledger. s.mu is
// held.
func (ss *session) countBatch(n int) {
	if n == 0 {
		return
	}
	ss.added += n
	ss.ends = append(ss.ends, ss.added)
	ss.r.batchesInFlight.Add(1)
}

// pass counts n messages passed by the confirmed position, and the
// batches they complete. s.mu is held.
func (ss *session) pass(n int) {
	ss.passed += n
	done := 0
	for done < len(ss.ends) && ss.ends[done] <= ss.passed {
		done++
	}
	if done > 0 {
		ss.ends = ss.ends[done:]
		ss.r.batchesInFlight.Add(-int64(done))
	}
}

// streamSink is the sink of the stream's relay core: its publishes also
// end when the session of their claim ends (attachment.ctx: at the
// session's end, on abort, or ShutdownTimeout after Stop). A publish whose
// session ended before it began, and the errors a session's end caused
// (the publish was cancelled: errors of the retriable and unavailable
// classes), wrap strategy.ErrAbandoned, so that the core gives the
// messages back without pausing or counting anything; the broker's other
// answers (a permanent error, a topic that cannot take records) keep their
// class and are recorded as usual.
type streamSink struct {
	sink.Sink
	s *streamStrategy
}

func (k streamSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	return k.s.publishInSession(ctx, recs, k.Sink.Publish)
}

// streamRunSink is streamSink over a sink.RunSink: the stream's core over
// it publishes runs (Config.MaxRun).
type streamRunSink struct {
	streamSink
	runs sink.RunSink
}

func (k streamRunSink) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	return k.s.publishInSession(ctx, recs, k.runs.PublishRuns)
}

// newStreamSink returns the sink of the stream's relay core over snk: a
// sink.RunSink when snk is one.
func newStreamSink(snk sink.Sink, s *streamStrategy) sink.Sink {
	k := streamSink{Sink: snk, s: s}
	if runs, ok := snk.(sink.RunSink); ok {
		return streamRunSink{streamSink: k, runs: runs}
	}
	return k
}

// publishInSession publishes recs, the records of one claim, with publish,
// within the session of the claim (see streamSink).
func (s *streamStrategy) publishInSession(ctx context.Context, recs []outbox.Record,
	publish func(context.Context, []outbox.Record) []error) []error {
	a := s.sessionOf(recs)
	if a == nil || a.ctx.Err() != nil {
		errs := make([]error, len(recs))
		for i := range errs {
			errs[i] = errSessionEnded
		}
		return errs
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(a.ctx, cancel)
	defer stop()
	errs := publish(ctx, recs)
	if a.ctx.Err() != nil {
		for i, err := range errs {
			if c := sink.Classify(err); err != nil && (c == sink.Retriable || c == sink.Unavailable) {
				errs[i] = fmt.Errorf("%w: %w", errSessionEnded, err)
			}
		}
	}
	return errs
}

// errSessionEnded is the error of a stream publish whose session ended.
var errSessionEnded = fmt.Errorf("%w: the stream's session ended", strategy.ErrAbandoned)
