package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
)

var _ sink.RunSink = (*Sink)(nil)

// PublishRuns is [Sink.Publish] for recs that may hold a run: several
// consecutive records of one aggregate (an aggregate is an aggregate type
// and id). It returns one error per record, in the order of recs, passed
// through [ClassifyError] like Publish's, and keeps each aggregate's order
// without a gap: a record never reaches the topic ahead of, or without, an
// earlier record of its aggregate in recs. When a record fails, the later
// records of its aggregate fail too, with the error the broker gave them
// (it refused them together) or one wrapping [sink.ErrNotSent] (they were
// not handed to the broker).
//
// A run is kept whole within one partition only, so it is cut where it
// leaves its first record's topic: the records from there on get an
// [sink.ErrNotSent] error and follow in a later call. So do the records
// after one that fails before it is produced (a topic known to be missing,
// headers [Record] refuses, a record larger than Config.MaxMessageBytes),
// and the records after one whose copy from an earlier call is still in the
// producer: that record waits for the copy's outcome (see Publish), or,
// behind an earlier record of its aggregate in recs, is not sent either,
// since the copy could overtake that record.
//
// How: each call takes a producer client of its own from a pool, configured
// like the one Publish uses but sending only while flushed. The call hands it
// a record only once the previous record of the same aggregate is in its
// partition's buffer, checks that no record failed before a later record of
// its aggregate joined the buffer (it takes the records back and produces
// them again if one did), and then flushes. While the client flushes, no
// other record enters it, so when a batch fails, the records behind it in
// the partition fail with it. When the flush ends, the client goes back to
// the pool, unless a record of the call failed: then it is closed, and a
// later call opens a new one. The pool holds at most Config.MaxRunClients
// clients, one per call in progress (or still flushing, below): a call
// waits while all are busy, so MaxRunClients should be at least the
// number of calls the relay makes at once (its workers). This costs one
// more producer client, with its connections and producer id, per
// concurrent call.
//
// A limit of the producer library: "sending only while flushed" holds for
// the start of a send, and a send loop of the previous call that is still
// running when its flush returned can send the next call's first records
// before that call flushes. The call's checks before its flush (above) then
// still stop a later record behind a failed one; a record the loop already
// sent cannot be taken back.
//
// When ctx ends first, the records not yet acknowledged get an
// [sink.ErrUnavailable] error, but those already sent stay in the call's
// client, which keeps flushing them in the background until they have an
// outcome and is then closed; a later call publishing one of them waits
// for that copy's outcome, as with Publish. A record refused as too large
// for its batch is sent again alone, in order, as with Publish; after one
// that stays refused, the later records of its aggregate get an
// [sink.ErrNotSent] error.
func (s *Sink) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	errs := make([]error, len(recs))
	if len(recs) == 0 {
		return errs
	}
	c := s.planRuns(recs, errs, time.Now())
	c.publish(ctx)
	sent := c.finish(ctx)
	s.retryTooLarge(ctx, recs, c.topics, errs)
	s.settleTopics(recs, c.topics, sent, errs)
	return errs
}

// aggregateKey identifies an aggregate.
type aggregateKey struct{ typ, id string }

// runAggregate is the state of one aggregate in a PublishRuns call.
type runAggregate struct {
	topic string
	// from and why are set once the aggregate stops: its records at index
	// from in recs and later are not handed to the producer (see gated).
	stopped bool
	from    int
	why     string
	// partition is the partition its flushed records went to; -1 before.
	partition int32
	// handed is set once a record of it was handed to the producer.
	handed bool
}

// stop gates the aggregate's records from index from on, for why; an
// earlier stop wins.
func (a *runAggregate) stop(from int, why string) {
	if !a.stopped || from < a.from {
		a.stopped, a.from, a.why = true, from, why
	}
}

// runRecord is a record of a PublishRuns call on its way to the producer.
type runRecord struct {
	i     int
	agg   *runAggregate
	kr    *kgo.Record // as built; each attempt hands the producer a copy
	key   copyKey
	keyed bool
	size  int64 // what franz-go counts against MaxBufferedBytes

	// p is the outcome of the copy in the producer: this call's (owned)
	// or an earlier call's that the record attached to.
	p     *pending
	owned bool
	att   *attempt // the last attempt to produce it

	// Under runCall.mu.
	pSettled bool
	done     bool // its outcome is known: err
	gated    bool // not handed to the producer: err wraps sink.ErrNotSent
	err      error
}

// runCall is one PublishRuns call.
type runCall struct {
	s      *Sink
	recs   []outbox.Record
	topics []string
	errs   []error
	queue  []*runRecord // the records to produce, in the order of recs
	early  []int        // records refused before producing whose error settleTopics classifies

	// changed is signalled when an attempt is placed or answered, or an
	// awaited outcome arrives.
	changed chan struct{}
	// stopErr is why publish stopped before handing every record over.
	stopErr error

	mu       sync.Mutex
	awaited  int  // records handed over or attached whose outcome is not in
	finished bool // errs is written; later outcomes only settle copies
	// failed is set when a record handed over failed or was withdrawn: the
	// call's client is then retired, not reused (see runClients.retire).
	failed bool
}

func (c *runCall) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// planRuns groups recs by aggregate and refuses, before anything is
// produced, what Publish refuses at once (a topic known to be missing,
// headers Record refuses) and what the producer would refuse alone (a
// record larger than its batch limit). A record refused so stops its
// aggregate; so does a record whose topic is not its aggregate's first
// record's topic (a cut), itself included.
func (s *Sink) planRuns(recs []outbox.Record, errs []error, now time.Time) *runCall {
	c := &runCall{s: s, recs: recs, topics: make([]string, len(recs)), errs: errs, changed: make(chan struct{}, 1)}
	aggs := make(map[aggregateKey]*runAggregate)
	for i, rec := range recs {
		topic := s.Topic(rec)
		c.topics[i] = topic
		ak := aggregateKey{rec.AggregateType, rec.AggregateID}
		agg, ok := aggs[ak]
		if !ok {
			agg = &runAggregate{topic: topic, partition: -1}
			aggs[ak] = agg
		}
		if topic != agg.topic {
			agg.stop(i, fmt.Sprintf("its aggregate's earlier records go to topic %s, and a run keeps its order only within one partition", agg.topic))
		}
		if agg.stopped && i >= agg.from {
			errs[i] = notSent(rec, topic, agg.why)
			continue
		}
		if te := s.topics.blocked(topic, now); te != nil {
			errs[i] = te
			agg.stop(i+1, failedBefore(rec))
			continue
		}
		kr, err := Record(rec, topic, s.cfg.Limits)
		if err != nil {
			errs[i] = fmt.Errorf("%w: kafka: message %s not published to topic %s: %w", sink.ErrPermanent, rec.ID, topic, err)
			agg.stop(i+1, failedBefore(rec))
			continue
		}
		if err := s.checkSize(kr); err != nil {
			errs[i] = err
			c.early = append(c.early, i)
			agg.stop(i+1, failedBefore(rec))
			continue
		}
		key, keyed := keyOf(kr)
		c.queue = append(c.queue, &runRecord{i: i, agg: agg, kr: kr, key: key, keyed: keyed, size: userSize(kr)})
	}
	return c
}

// notSent is the error of rec, not handed to the producer because of why.
func notSent(rec outbox.Record, topic, why string) error {
	return fmt.Errorf("kafka: message %s to topic %s: %w (%s)", rec.ID, topic, sink.ErrNotSent, why)
}

// failedBefore is why the records after rec are not sent when rec failed.
func failedBefore(rec outbox.Record) string {
	return fmt.Sprintf("message %s of its aggregate before it failed", rec.ID)
}

// recordBatchHeader is the size of a Kafka record batch's header (v2, with
// the record count).
const recordBatchHeader = 61

// checkSize refuses kr, with the producer's error, when a record batch of kr
// alone is larger than the producer's batch limit (Config.MaxMessageBytes,
// or ExtraOpts' ProducerBatchMaxBytes): the producer fails such a record
// before buffering it. The size counted is a lower bound of franz-go's, so
// checkSize refuses no record that the producer takes; the producer refuses
// the few bytes between them itself.
func (s *Sink) checkSize(kr *kgo.Record) error {
	n := recordBatchHeader + recordBytes(kr)
	if limit := int(s.batchMax(kr.Topic)); n > limit {
		return fmt.Errorf("%w (a record batch of it alone takes at least %d bytes, more than the producer's limit of %d)",
			kerr.MessageTooLarge, n, limit)
	}
	return nil
}

// recordBytes is kr's size in a v2 record batch as its first record, length
// prefix included.
func recordBytes(kr *kgo.Record) int {
	l := 1 + kbin.VarlongLen(0) + kbin.VarintLen(0) + // attributes, timestamp and offset deltas
		kbin.VarintLen(int32(len(kr.Key))) + len(kr.Key) +
		kbin.VarintLen(int32(len(kr.Value))) + len(kr.Value) +
		kbin.VarintLen(int32(len(kr.Headers)))
	for _, h := range kr.Headers {
		l += kbin.VarintLen(int32(len(h.Key))) + len(h.Key) + kbin.VarintLen(int32(len(h.Value))) + len(h.Value)
	}
	return kbin.VarintLen(int32(l)) + l
}

// userSize is what franz-go counts of kr against MaxBufferedBytes.
func userSize(kr *kgo.Record) int64 {
	n := len(kr.Key) + len(kr.Value)
	for _, h := range kr.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// publish produces the call's records on a client of its own, a chunk at a
// time (as many as the client buffers), each chunk placed, checked and
// flushed before the next. When ctx ends, the client goes to a drainer.
func (c *runCall) publish(ctx context.Context) {
	if len(c.queue) == 0 {
		return
	}
	cl, err := c.s.runs.take(ctx)
	if err != nil {
		c.stopErr = err
		return
	}
	queue := c.queue
	for len(queue) > 0 {
		chunk, rest := c.chunk(queue)
		redo, flushed := c.place(ctx, cl, chunk)
		if !flushed {
			c.stopErr = ctx.Err()
			c.s.runs.drain(cl)
			return
		}
		queue = append(redo, rest...)
	}
	c.mu.Lock()
	failed := c.failed
	c.mu.Unlock()
	if failed {
		c.s.runs.retire(cl)
		return
	}
	c.s.runs.put(cl)
}

// chunk splits off the records of queue that the client buffers at once: at
// most MaxBufferedRecords, and MaxBufferedBytes if that is set; at least one.
// A record larger than MaxBufferedBytes counts for nothing: the client
// refuses it before buffering it.
func (c *runCall) chunk(queue []*runRecord) (chunk, rest []*runRecord) {
	maxBytes := c.s.maxBufferedBytes
	var bytes int64
	for n, rr := range queue {
		fits := maxBytes <= 0 || rr.size <= maxBytes
		full := int64(n) >= c.s.maxBufferedRecords || maxBytes > 0 && fits && bytes+rr.size > maxBytes
		if n > 0 && full {
			return queue[:n], queue[n:]
		}
		if fits {
			bytes += rr.size
		}
	}
	return queue, nil
}

// placement is one try at putting a chunk into a client's partition
// buffers.
type placement struct {
	// ctx is the records' context: cancelled with errWithdrawn, it makes the
	// client fail the records it has not sent, so that they can be
	// produced again.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	attempts []*attempt // in the order they were handed over
}

// errWithdrawn is the cause of a placement's cancellation when its records
// are taken back.
var errWithdrawn = errors.New("kafka: records taken back to be produced again")

// States of an attempt.
const (
	attemptHanded    int32 = iota // handed to the client
	attemptPlaced                 // in its partition's buffer
	attemptAnswered               // its promise gave its outcome
	attemptWithdrawn              // failed unsent because the placement was withdrawn
)

// attempt is one record handed to a client.
type attempt struct {
	c         *runCall
	pl        *placement
	rr        *runRecord
	state     atomic.Int32
	partition atomic.Int32 // -1 until placed
	err       error        // the outcome; written before state becomes attemptAnswered
}

// attemptKey is the context key under which a record handed to a run
// client carries its attempt.
type attemptKey struct{}

// placedHook tells an attempt that franz-go put its record into its
// partition's buffer. Run clients use it (kgo.WithHooks).
type placedHook struct{}

var _ kgo.HookProduceRecordPartitioned = placedHook{}

func (placedHook) OnProduceRecordPartitioned(r *kgo.Record, _ int32) {
	if r.Context == nil {
		return
	}
	if a, ok := r.Context.Value(attemptKey{}).(*attempt); ok {
		a.partition.Store(r.Partition)
		a.state.CompareAndSwap(attemptHanded, attemptPlaced)
		a.c.signal()
	}
}

// promise takes the client's outcome of a's record.
func (a *attempt) promise(r *kgo.Record, err error) {
	c, rr := a.c, a.rr
	if err != nil && errors.Is(err, context.Canceled) && context.Cause(a.pl.ctx) == errWithdrawn {
		c.withdrawn(a)
		return
	}
	a.err = err
	a.state.Store(attemptAnswered)
	if err == nil {
		c.s.acknowledged(r, rr.key.id)
	}
	c.outcome(rr, err)
}

// place hands chunk to cl, checks that no record could reach the topic
// without an earlier record of its aggregate, and flushes cl. If the check
// fails, it takes the chunk's unsent records back instead and returns those
// to produce again (redo). flushed is false when ctx ended first.
func (c *runCall) place(ctx context.Context, cl *kgo.Client, chunk []*runRecord) (redo []*runRecord, flushed bool) {
	if ctx.Err() != nil {
		return nil, false
	}
	pctx, cancel := context.WithCancelCause(ctx)
	pl := &placement{ctx: pctx, cancel: cancel}
	defer cancel(nil) // every record has its outcome, or ctx ended
	if !c.handOver(ctx, cl, pl, chunk) || !c.waitPlaced(ctx, pl) || !barrier(ctx, cl) {
		return nil, false
	}
	if conflicts := c.conflicts(pl); len(conflicts) > 0 {
		pl.cancel(errWithdrawn)
		if cl.Flush(ctx) != nil {
			return nil, false
		}
		return c.withdraw(pl, conflicts), true
	}
	if cl.Flush(ctx) != nil {
		return nil, false
	}
	c.flushed(pl)
	return nil, true
}

// handOver hands the records of chunk to cl, each only once the previous
// record of its aggregate is in its partition's buffer; a record whose
// aggregate stopped is not handed. It returns false when ctx ended first.
func (c *runCall) handOver(ctx context.Context, cl *kgo.Client, pl *placement, chunk []*runRecord) bool {
	type lane struct {
		recs []*runRecord
		last *attempt
	}
	var lanes []*lane
	byAgg := make(map[*runAggregate]*lane)
	for _, rr := range chunk {
		l, ok := byAgg[rr.agg]
		if !ok {
			l = &lane{}
			byAgg[rr.agg] = l
			lanes = append(lanes, l)
		}
		l.recs = append(l.recs, rr)
	}
	for {
		waiting := false
		for _, l := range lanes {
			for len(l.recs) > 0 {
				if last := l.last; last != nil {
					st := last.state.Load()
					if st == attemptHanded {
						waiting = true
						break
					}
					if st == attemptAnswered && last.err != nil {
						last.rr.agg.stop(last.rr.i+1, failedBefore(c.recs[last.rr.i]))
					}
				}
				rr := l.recs[0]
				l.recs = l.recs[1:]
				if a := c.hand(cl, pl, rr); a != nil {
					l.last = a
				}
			}
		}
		if !waiting {
			return true
		}
		select {
		case <-c.changed:
		case <-ctx.Done():
			return false
		}
	}
}

// hand hands rr to cl and returns its attempt; nil when rr's aggregate
// stopped, or rr attached to a copy already in the producer.
func (c *runCall) hand(cl *kgo.Client, pl *placement, rr *runRecord) *attempt {
	agg := rr.agg
	if agg.stopped && rr.i >= agg.from {
		c.gate(rr, agg.why)
		return nil
	}
	if rr.p == nil {
		p, attached := c.s.track(rr.key, rr.keyed)
		if attached {
			if agg.handed {
				// Waiting for that copy would let it overtake this call's
				// earlier records of the aggregate.
				agg.stop(rr.i, fmt.Sprintf("a copy of message %s from an earlier publish is still in the producer", rr.key.id))
				c.gate(rr, agg.why)
				return nil
			}
			agg.handed = true
			agg.stop(rr.i+1, fmt.Sprintf("message %s of its aggregate before it waits for its copy from an earlier publish", rr.key.id))
			rr.p = p
			c.attach(rr)
			return nil
		}
		rr.p, rr.owned = p, true
	}
	agg.handed = true
	a := &attempt{c: c, pl: pl, rr: rr}
	a.partition.Store(-1)
	rr.att = a
	pl.attempts = append(pl.attempts, a)
	kr := *rr.kr
	kr.Context = context.WithValue(pl.ctx, attemptKey{}, a)
	c.mu.Lock()
	c.awaited++
	c.mu.Unlock()
	// The chunk fits the client's buffer, which holds nothing else, so the
	// client refuses before buffering only a record it refuses alone.
	cl.TryProduce(pl.ctx, &kr, a.promise)
	return a
}

// attach makes rr's outcome that of the copy it attached to.
func (c *runCall) attach(rr *runRecord) {
	c.mu.Lock()
	c.awaited++
	c.mu.Unlock()
	go func() {
		<-rr.p.done
		c.outcome(rr, rr.p.err)
	}()
}

// waitPlaced waits until every record pl handed over is in its partition's
// buffer or has failed; false when ctx ended first.
func (c *runCall) waitPlaced(ctx context.Context, pl *placement) bool {
	for _, a := range pl.attempts {
		for a.state.Load() == attemptHanded {
			select {
			case <-c.changed:
			case <-ctx.Done():
				return false
			}
		}
	}
	return true
}

// barrier returns once every promise cl had queued has been called: it
// produces a record without a topic, which the client fails before
// buffering it, and franz-go calls promises one at a time in the order they
// were queued. Run clients have no default topic. False when ctx ended
// first.
func barrier(ctx context.Context, cl *kgo.Client) bool {
	done := make(chan struct{})
	cl.TryProduce(ctx, &kgo.Record{}, func(*kgo.Record, error) { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// conflicts returns the attempts of pl that could reach the topic without
// an earlier record of their aggregate, with why: in their partition's
// buffer (not failed) after a record of their aggregate failed (it failed
// before they joined the buffer, or they would have failed with it), or in
// another partition than their aggregate's (the topic's partition count
// changed). Called after barrier, so that every failure of a record placed
// so far is known.
func (c *runCall) conflicts(pl *placement) map[*attempt]string {
	out := make(map[*attempt]string)
	failed := make(map[*runAggregate]*runRecord)
	partition := make(map[*runAggregate]int32)
	for _, a := range pl.attempts {
		agg := a.rr.agg
		p := a.partition.Load() // -1 if it failed before it was placed
		want, ok := partition[agg]
		if !ok && p >= 0 {
			want = agg.partition
			if want < 0 {
				want = p
			}
			partition[agg] = want
		}
		switch a.state.Load() {
		case attemptAnswered:
			if a.err != nil && failed[agg] == nil {
				failed[agg] = a.rr
			}
		case attemptPlaced:
			if f := failed[agg]; f != nil {
				out[a] = failedBefore(c.recs[f.i])
			} else if p != want {
				out[a] = fmt.Sprintf("its aggregate's earlier records went to partition %d, and the topic's partitions changed", want)
			}
		}
	}
	return out
}

// withdraw sorts the records of pl after it was cancelled and its client
// flushed: each has failed unsent (withdrawn) or has its outcome. It stops
// the aggregates at the conflicts and at the failures, gates the withdrawn
// records they stop, and returns the others, to produce again.
func (c *runCall) withdraw(pl *placement, conflicts map[*attempt]string) (redo []*runRecord) {
	for _, a := range pl.attempts {
		agg := a.rr.agg
		if why, ok := conflicts[a]; ok {
			agg.stop(a.rr.i, why)
		}
		if a.state.Load() == attemptAnswered && a.err != nil {
			agg.stop(a.rr.i+1, failedBefore(c.recs[a.rr.i]))
		}
	}
	for _, a := range pl.attempts {
		if a.state.Load() != attemptWithdrawn {
			continue
		}
		if agg := a.rr.agg; agg.stopped && a.rr.i >= agg.from {
			c.gate(a.rr, agg.why)
			continue
		}
		redo = append(redo, a.rr)
	}
	return redo
}

// flushed notes the outcomes of a flushed placement: each aggregate's
// partition, and the aggregates stopped by a failure.
func (c *runCall) flushed(pl *placement) {
	for _, a := range pl.attempts {
		agg := a.rr.agg
		if p := a.partition.Load(); agg.partition < 0 && p >= 0 {
			agg.partition = p
		}
		if a.state.Load() == attemptAnswered && a.err != nil {
			agg.stop(a.rr.i+1, failedBefore(c.recs[a.rr.i]))
		}
	}
}

// gate gives rr, which is not handed to the producer, an error wrapping
// sink.ErrNotSent for why; a copy it tracked gets the same outcome.
func (c *runCall) gate(rr *runRecord, why string) {
	err := notSent(c.recs[rr.i], c.topics[rr.i], why)
	c.mu.Lock()
	defer c.mu.Unlock()
	rr.gated, rr.done, rr.err = true, true, err
	c.settleCopy(rr, err)
}

// outcome records err as rr's outcome.
func (c *runCall) outcome(rr *runRecord, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settleCopy(rr, err)
	if !c.finished && !rr.done {
		rr.done, rr.err = true, err
	}
	c.failed = c.failed || err != nil
	c.awaited--
	c.signal()
}

// withdrawn notes that a's record failed unsent because its placement was
// withdrawn. Once the call finished, it is not produced again, and the copy
// it tracked gets the record's error.
func (c *runCall) withdrawn(a *attempt) {
	a.state.Store(attemptWithdrawn)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed = true
	if c.finished {
		c.settleCopy(a.rr, a.rr.err)
	}
	c.awaited--
	c.signal()
}

// settleCopy settles the copy rr tracked, if it owns one that is not
// settled yet; c.mu is held.
func (c *runCall) settleCopy(rr *runRecord, err error) {
	if !rr.owned || rr.pSettled {
		return
	}
	rr.pSettled = true
	c.s.settle(rr.key, rr.keyed, rr.p, err)
}

// finish waits for the outcomes still awaited, until ctx ends, writes the
// errors of the records produced to c.errs and returns their indices, with
// those refused early whose errors settleTopics classifies. A record without
// an outcome gets the error that stopped the call; the copy it tracked gets
// it too unless the record is still in the producer, whose outcome settles
// it.
func (c *runCall) finish(ctx context.Context) (sent []int) {
	for {
		c.mu.Lock()
		n := c.awaited
		c.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-c.changed:
			continue
		case <-ctx.Done():
		}
		break
	}
	stopErr := c.stopErr
	switch {
	case ctx.Err() != nil:
		stopErr = fmt.Errorf("no acknowledgement before the context ended: %w", ctx.Err())
	case stopErr == nil: // every record handed over has its outcome
		stopErr = errors.New("kafka: record not produced")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finished = true
	sent = slices.Clone(c.early)
	for _, rr := range c.queue {
		if !rr.done {
			rr.done, rr.err = true, stopErr
			if rr.att == nil || rr.att.state.Load() == attemptWithdrawn {
				c.settleCopy(rr, stopErr)
			}
		}
		c.errs[rr.i] = rr.err
		if !rr.gated {
			sent = append(sent, rr.i)
		}
	}
	return sent
}
