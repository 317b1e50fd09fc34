package cdc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-dev/outbox"
)

// node is one message's place in its aggregate's chain.
//
// The chain: pipeline.tails maps each aggregate to the node of its latest
// message in flight. A message whose predecessor was not acknowledged (it
// failed, or was itself deferred) is deferred to the table path, and so
// are the rest of its aggregate's messages behind it. A node leaves the map when
// its batch was recorded, and, if its message was not acknowledged, only
// once every check that may have read the table before that record
// committed has been linked: a later check sees the deferral itself.
type node struct {
	agg  aggregate
	done chan struct{} // closed when the outcome is known
	sent bool          // acknowledged; valid once done is closed
	// resolved is set with the outcome, by the goroutine that owns the
	// node (its batch's publisher, or the dispatcher for nodes resolved at
	// once).
	resolved bool
}

func newNode(agg aggregate) *node { return &node{agg: agg, done: make(chan struct{})} }

func (n *node) resolve(sent bool) {
	if n.resolved {
		return
	}
	n.resolved, n.sent = true, sent
	close(n.done)
}

func (n *node) isDone() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// retiredNode is a node whose message was not acknowledged, recorded when
// epoch checks had started.
type retiredNode struct {
	n     *node
	epoch uint64
}

// batchRun is one batch on its way through the pipeline.
type batchRun struct {
	end   pglogrepl.LSN
	msgs  int
	bytes int64
	// recs are the messages to publish, in stream order, with their
	// predecessors in the chain and their own nodes.
	recs  []outbox.Record
	prevs []*node
	own   []*node
	nodes []*node // every node of the batch, resolved ones included
	out   outcome
	done  chan struct{} // closed when publishing is over
	err   error         // set before done is closed
}

// pipeline is one session's processing of the stream, in stages that
// overlap: reading, checking, publishing and recording.
//
//   - The reader (stream.go) decodes the messages and hands them on in
//     stream order, each once it fits in the session's byte budget
//     (Config.MaxInFlightBytes, see budget), which it holds until its batch
//     was recorded.
//   - The dispatcher (process, one goroutine) reads the events in stream
//     order, cuts them into batches within Config.MaxInFlight, checks each
//     batch (one statement, batches one after the other) and starts its
//     publishing.
//   - Each batch publishes on its own goroutine, in waves; a message waits
//     for the outcome of the previous message of its aggregate, wherever
//     that one is (its chain, see node), so order per aggregate holds
//     across batches.
//   - The finisher takes the batches in stream order, waits until a batch
//     is published, and records the outcome of it and of the following
//     batches that are published already in one statement, on a goroutine
//     (up to maxRecords at once). As the records complete, in stream order,
//     it confirms their end position and frees their share of the bounds
//     and of the budget.
//
// So the confirmed position only moves over batches whose every message
// was acknowledged (or recorded as failed or deferred) and whose
// bookkeeping committed, and always in stream order: a crash re-sends what
// came after it, never loses.
type pipeline struct {
	r         *Relay
	events    <-chan event
	confirmed *atomic.Uint64
	budget    *budget
	ctx       context.Context // ends when the finisher stops on an error
	cancel    context.CancelFunc
	queue     chan *batchRun // dispatched batches, in stream order
	wg        sync.WaitGroup // the batches' publishers
	checks    atomic.Uint64  // checks started

	mu      sync.Mutex
	tails   map[aggregate]*node
	retired []retiredNode
	inMsgs  int
	room    chan struct{} // a token when in-flight room was freed
}

// process runs the pipeline over events until ctx is done, the relay
// stops, or an error. It returns after every dispatched batch was recorded
// (or could not be), errStopped when the relay was aborted.
func (r *Relay) process(ctx context.Context, events <-chan event, confirmed *atomic.Uint64, bud *budget) error {
	p := &pipeline{r: r, events: events, confirmed: confirmed, budget: bud,
		queue: make(chan *batchRun, 1024), tails: map[aggregate]*node{}, room: make(chan struct{}, 1)}
	// The publishers also stop waiting once the session's lead is lost.
	p.ctx, p.cancel = context.WithCancel(r.leadContext())
	defer p.cancel()
	r.behindNano.Store(0)
	r.batchesInFlight.Store(0)
	finished := make(chan error, 1)
	go func() { finished <- p.finish() }()
	err := p.dispatch(ctx)
	close(p.queue)
	ferr := <-finished
	// Publishers of batches the finisher will not record stop waiting.
	p.cancel()
	p.wg.Wait()
	if ferr != nil {
		return ferr
	}
	if err == nil && r.aborted.Load() {
		err = errStopped
	}
	return err
}

// dispatch reads batches and starts them, while there is room in flight.
func (p *pipeline) dispatch(ctx context.Context) error {
	r := p.r
	heartbeat := time.NewTimer(r.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	lagTick := time.NewTicker(r.cfg.LagLogInterval)
	defer lagTick.Stop()
	batchSize := min(r.cfg.BatchSize, r.cfg.MaxInFlight)
	for {
		// Without room for a batch, wait for room, not for messages or the
		// heartbeat's turn (a nil channel is not waited for).
		events, beat, room := p.events, heartbeat.C, (<-chan struct{})(nil)
		if !p.roomForBatch(batchSize) {
			events, beat, room = nil, nil, p.room
		}
		var first event
		select {
		case <-ctx.Done():
			return nil
		case <-r.stopping.C():
			return nil
		case <-p.ctx.Done():
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
			case ev := <-p.events:
				b.add(ev)
			default:
				break fill
			}
		}
		run, err := p.start(b)
		if err != nil {
			return err
		}
		select {
		case p.queue <- run:
		case <-p.ctx.Done():
			return nil
		}
		heartbeat.Reset(r.cfg.HeartbeatInterval)
	}
}

// roomForBatch reports whether a batch may start: when a full one fits
// under MaxInFlight, or nothing is in flight, so that MaxInFlight =
// BatchSize means one batch at a time. The bytes need no check here: every
// message the reader handed on holds its share of the budget already.
func (p *pipeline) roomForBatch(batchSize int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inMsgs == 0 || p.r.cfg.MaxInFlight-p.inMsgs >= batchSize
}

// start takes b's share of the bounds, checks b, links its messages into
// their aggregates' chains and starts publishing them.
func (p *pipeline) start(b batch) (*batchRun, error) {
	run := &batchRun{end: b.end, msgs: b.records, bytes: b.bytes, done: make(chan struct{}),
		out: outcome{deferAggs: map[aggregate]string{}}}
	p.mu.Lock()
	p.inMsgs += run.msgs
	p.mu.Unlock()
	if b.records == 0 {
		close(run.done)
		return run, nil
	}
	p.r.batchesInFlight.Add(1)
	epoch := p.checks.Add(1)
	var toCheck []event
	for _, ev := range b.items {
		if ev.decodeErr == nil {
			toCheck = append(toCheck, ev)
		}
	}
	verdicts, err := p.r.check(toCheck)
	if err != nil {
		p.r.batchesInFlight.Add(-1)
		return nil, err
	}
	p.mu.Lock()
	for _, ev := range b.items {
		agg := aggOf(ev.rec)
		if ev.decodeErr != nil {
			run.out.failed = append(run.out.failed, p.r.decide(ev.rec, permanent(ev.decodeErr)))
			p.link(run, agg, false)
			continue
		}
		switch verdicts[ev.rec.Seq].action() {
		case actPublish:
			n := newNode(agg)
			run.recs = append(run.recs, ev.rec)
			run.prevs = append(run.prevs, p.tails[agg])
			run.own = append(run.own, n)
			run.nodes = append(run.nodes, n)
			p.tails[agg] = n
		case actDefer:
			run.out.deferred = append(run.out.deferred, ev.rec)
			p.link(run, agg, false)
		case actSkip:
			p.r.log.Debug("message already handled; skipped", recAttrs(ev.rec, "status", verdicts[ev.rec.Seq].status)...)
		}
	}
	// Every check up to this one is linked: unacknowledged nodes recorded
	// before it started are known to the table now.
	kept := p.retired[:0]
	for _, rn := range p.retired {
		if rn.epoch > epoch {
			kept = append(kept, rn)
		} else if p.tails[rn.n.agg] == rn.n {
			delete(p.tails, rn.n.agg)
		}
	}
	clear(p.retired[len(kept):])
	p.retired = kept
	p.mu.Unlock()
	p.wg.Add(1)
	go p.publish(run)
	return run, nil
}

// link appends a node with a known outcome to agg's chain. p.mu is held.
func (p *pipeline) link(run *batchRun, agg aggregate, sent bool) {
	n := newNode(agg)
	n.resolve(sent)
	run.nodes = append(run.nodes, n)
	p.tails[agg] = n
}

// publish publishes run's messages, then resolves what is unresolved
// (stopped) as not sent, and marks the run done.
func (p *pipeline) publish(run *batchRun) {
	defer p.wg.Done()
	err := p.r.publish(p.ctx, run)
	for _, n := range run.own {
		n.resolve(false)
	}
	run.err = err
	close(run.done)
}

// maxRecords is how many records (one statement each) may run at once.
// They touch different rows and may commit in any order, except that a
// record that hands aggregates to the table path starts only after the
// earlier ones committed; positions are confirmed in stream order.
const maxRecords = 2

// pendingRecord is a group of consecutive published batches whose record
// runs.
type pendingRecord struct {
	group []*batchRun
	done  chan struct{} // closed when the record returned
	err   error
	epoch uint64 // checks started when the record committed
}

// finish records the dispatched batches in stream order, several at once
// when they are published already, with up to maxRecords records running,
// and confirms their positions in stream order.
func (p *pipeline) finish() error {
	f := &finisher{p: p, open: true}
	for {
		if err := f.completeReturned(); err != nil {
			return f.stop(err)
		}
		if f.head == nil {
			if !f.open && len(f.outstanding) == 0 {
				return nil
			}
			if !f.takeHead() {
				continue
			}
		}
		select {
		case <-f.head.done:
		case <-f.front():
			continue
		}
		if f.head.err != nil {
			return f.stop(f.head.err)
		}
		if len(f.outstanding) >= maxRecords {
			<-f.front()
			continue
		}
		group, stopErr := f.gather()
		if handsOver(group) {
			// A record that defers aggregates to the table path must not
			// commit before the records of earlier batches: the table path
			// would take over an aggregate whose earlier failure is not yet
			// recorded (and send it without counting that attempt).
			if err := f.drain(); err != nil {
				return f.stop(err)
			}
		}
		f.outstanding = append(f.outstanding, p.startRecord(group))
		if stopErr != nil {
			return f.stop(stopErr)
		}
	}
}

// finisher is the state of finish: the records running, oldest first, and
// the next batch to record once it is published.
type finisher struct {
	p           *pipeline
	outstanding []*pendingRecord
	head        *batchRun // the oldest dispatched batch not recording yet
	open        bool      // p.queue is not closed
}

// front is closed when the oldest running record returned; with none
// running it is nil, which blocks forever in a select.
func (f *finisher) front() <-chan struct{} {
	if len(f.outstanding) == 0 {
		return nil
	}
	return f.outstanding[0].done
}

// completeReturned completes the oldest records, in order, as long as
// they have returned. On an error the failed record stays outstanding.
func (f *finisher) completeReturned() error {
	for len(f.outstanding) > 0 && isClosed(f.outstanding[0].done) {
		if err := f.p.complete(f.outstanding[0]); err != nil {
			return err
		}
		f.outstanding = f.outstanding[1:]
	}
	return nil
}

// drain waits for every outstanding record and completes them in order, up
// to the first that failed, whose error it returns.
func (f *finisher) drain() error {
	var first error
	for _, pr := range f.outstanding {
		<-pr.done
		if first == nil {
			first = f.p.complete(pr)
		}
	}
	f.outstanding = nil
	return first
}

// stop ends finish on err (or on the error of an outstanding record, which
// it waits for): it stops the pipeline and returns the error.
func (f *finisher) stop(err error) error {
	if derr := f.drain(); derr != nil {
		err = derr
	}
	f.p.cancel()
	return err
}

// takeHead waits for the next dispatched batch, or for the oldest running
// record to return (after the queue closed, only for that); it reports
// whether a batch became the head.
func (f *finisher) takeHead() bool {
	if !f.open {
		<-f.front()
		return false
	}
	select {
	case b, ok := <-f.p.queue:
		if !ok {
			f.open = false
			return false
		}
		f.head = b
		return true
	case <-f.front():
		return false
	}
}

// gather takes the published head and the dispatched batches after it
// that are published already, up to the first that is not, which becomes
// the head. It returns them as one group, and the error of a batch whose
// publishing failed, which ends the group (it is not in it).
func (f *finisher) gather() ([]*batchRun, error) {
	group := []*batchRun{f.head}
	f.head = nil
	for f.open {
		select {
		case next, ok := <-f.p.queue:
			if !ok {
				f.open = false
				return group, nil
			}
			select {
			case <-next.done:
				if next.err != nil {
					return group, next.err
				}
				group = append(group, next)
			default:
				f.head = next
				return group, nil
			}
		default:
			return group, nil
		}
	}
	return group, nil
}

// handsOver reports whether a group's record defers aggregates to the
// table path (failures or deferred messages).
func handsOver(group []*batchRun) bool {
	for _, b := range group {
		if len(b.out.failed) > 0 || len(b.out.deferred) > 0 {
			return true
		}
	}
	return false
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// startRecord records the outcome of a group of consecutive published
// batches on its own goroutine.
func (p *pipeline) startRecord(group []*batchRun) *pendingRecord {
	pr := &pendingRecord{group: group, done: make(chan struct{})}
	out := outcome{deferAggs: map[aggregate]string{}}
	for _, b := range group {
		out.sent = append(out.sent, b.out.sent...)
		out.failed = append(out.failed, b.out.failed...)
		out.deferred = append(out.deferred, b.out.deferred...)
	}
	go func() {
		defer close(pr.done)
		pr.err = p.r.record(&out)
		pr.epoch = p.checks.Load()
	}()
	return pr
}

// complete takes a recorded group, in stream order: it confirms the
// group's end position, takes its nodes out of the chains and frees its
// room.
func (p *pipeline) complete(pr *pendingRecord) error {
	r := p.r
	if pr.err != nil {
		return pr.err
	}
	if r.aborted.Load() {
		return errStopped
	}
	var end pglogrepl.LSN
	msgs, bytes, batches := 0, int64(0), int64(0)
	for _, b := range pr.group {
		if b.msgs > 0 {
			batches++
		}
		end = max(end, b.end)
		msgs += b.msgs
		bytes += b.bytes
	}
	if end > 0 && uint64(end) > p.confirmed.Load() {
		p.confirmed.Store(uint64(end))
	}
	p.mu.Lock()
	for _, b := range pr.group {
		for _, n := range b.nodes {
			switch {
			case p.tails[n.agg] != n:
			case n.sent:
				delete(p.tails, n.agg)
			default:
				p.retired = append(p.retired, retiredNode{n: n, epoch: pr.epoch})
			}
		}
	}
	p.inMsgs -= msgs
	r.batchesInFlight.Add(-batches)
	idle := p.inMsgs == 0
	p.mu.Unlock()
	p.budget.give(bytes)
	select {
	case p.room <- struct{}{}:
	default:
	}
	if idle && len(p.events) == 0 {
		r.behindNano.Store(0)
	}
	return nil
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
