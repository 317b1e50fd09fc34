package cdc

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

// entryState is where a message of the ledger is.
type entryState uint8

const (
	entryWaiting  entryState = iota // behind an unacknowledged message of its aggregate
	entryReady                      // may be handed out
	entryLeased                     // handed out to a claim
	entrySent                       // acknowledged; its record has not committed
	entryFailed                     // failed; its record has not committed
	entryDeferred                   // handed to the table path; its record has not committed
	entryDone                       // recorded, or skipped: nothing more to do
)

// entry is one message of the stream in the ledger, or a position
// (pos): everything before it in the stream was received.
type entry struct {
	rec   outbox.Record
	agg   aggregate
	ord   uint64 // place in the stream
	bytes int64  // share of the budget
	state entryState
	token uuid.UUID // the claim that holds it (entryLeased)
	// failure is what the relay decided for a failed message, err why it
	// failed when that happened before it was handed out (add).
	failure store.Failure
	err     error
	pos     bool // a position, no message
	end     pglogrepl.LSN
	// doomed: the message cannot be published (it could not be decoded);
	// it fails when it reaches the head of its lane.
	doomed bool
}

// item is one message of a checked batch, for ledger.add.
type item struct {
	rec   outbox.Record
	bytes int64 // its share of the budget (recordBytes)
	// act is the check's verdict; ignored when fail is set.
	act action
	// fail, when not nil, says the message cannot be published (it could
	// not be decoded): it fails, for err, once no earlier message of its
	// aggregate waits to be published (addUnpublishable).
	fail *store.Failure
	err  error
}

// toRecord is what a ledger change leaves to record (record.sql).
type toRecord struct {
	sent     []*entry // acknowledged
	failed   []*entry // failed: FAILED with a delay, or DEAD_LETTER (entry.failure)
	deferred []*entry // handed to the table path unpublished
}

func (t toRecord) empty() bool { return len(t.sent) == 0 && !t.handsOver() }

// handsOver reports whether recording t hands aggregates to the table
// path: it holds failed or deferred messages.
func (t toRecord) handsOver() bool { return len(t.failed) > 0 || len(t.deferred) > 0 }

func (t *toRecord) merge(o toRecord) {
	t.sent = append(t.sent, o.sent...)
	t.failed = append(t.failed, o.failed...)
	t.deferred = append(t.deferred, o.deferred...)
}

// lane is one aggregate's place in the ledger.
type lane struct {
	// queue holds the aggregate's messages that wait to be published or
	// are being published, in stream order: first those leased to a claim
	// (the head, or a run: the head and the messages after it), then those
	// that wait. When none is leased, the head is ready.
	queue []*entry
	// leased counts the messages of queue handed out and not returned.
	leased int
	// unsent counts the aggregate's failed and deferred messages whose
	// record has not committed.
	unsent int
	// blocked: the aggregate's messages added from now on are deferred to
	// the table path. Set by a failure or a deferral; lifted, once unsent
	// is 0, by the first add whose epoch is above until (its check started
	// after the last of those records committed).
	blocked bool
	until   uint64
}

// ledger is the stream's messages between the confirmed position and the
// last one read, the in-memory half of the CDC strategy. It does no I/O,
// so that its rules can be tested on their own; it is not safe for
// concurrent use.
//
// Its rules:
//   - claim hands out ready messages oldest first, one per aggregate, or,
//     with runs (runLimits), a run per aggregate: the ready message and
//     the messages right after it, in stream order, in the same claim. An
//     aggregate's message is ready only once every earlier message of it
//     was acknowledged and none of it is handed out, so order per
//     aggregate holds whatever order the claims are published in. A
//     message given back (released, or its broker unreachable) returns to
//     its place at the front of its aggregate's queue.
//   - A failed message, and a message the check deferred, blocks its
//     aggregate: the aggregate's messages behind it are deferred to the
//     table path, which publishes them in order after the failed one.
//     The block stays until the failure or deferral is recorded and a
//     check that started after that record committed (epoch) was added:
//     that check, and every later one, sees the aggregate deferred in the
//     table itself. A message that cannot be published (it could not be
//     decoded) fails only once the earlier messages of its aggregate were
//     acknowledged, so that the table path never takes over a message the
//     stream still publishes.
//   - The confirmed position moves only over messages whose outcome was
//     recorded (or that were skipped), in stream order, so a restart from
//     it re-reads every message that is not recorded.
type ledger struct {
	log      []*entry // messages and positions not yet passed, in stream order
	next     uint64   // the ord of the next entry
	msgs     int      // messages in log
	lanes    map[aggregate]*lane
	heads    readyHeap        // the ready messages
	leasedBy map[int64]*entry // leased messages by seq
	lifting  map[aggregate]*lane
}

func newLedger() *ledger {
	return &ledger{lanes: map[aggregate]*lane{}, leasedBy: map[int64]*entry{}, lifting: map[aggregate]*lane{}}
}

// held is the number of messages added and not yet passed by the
// confirmed position (Config.MaxInFlight bounds it).
func (l *ledger) held() int { return l.msgs }

// leased is the number of messages handed out and not yet returned.
func (l *ledger) leased() int { return len(l.leasedBy) }

// holds reports whether rec is handed out and not yet returned.
func (l *ledger) holds(rec outbox.Record) bool {
	e := l.leasedBy[rec.Seq]
	return e != nil && e.rec.ID == rec.ID
}

// ready is the number of aggregates of which claim would hand out a
// message (or a run) now.
func (l *ledger) ready() int { return l.heads.Len() }

// add appends a checked batch in stream order. end (0: none) is the
// position after which nothing of the batch is pending; an add without
// items and with end > 0 records an idle position. epoch is the check's
// number (1, 2, ... in the order the checks started; 0 for an idle
// position, which unblocks nothing). It returns what must
// be recorded now: the deferred messages (the verdict said so, or their
// aggregate is blocked) and the failed ones (fail set). Skipped messages
// are done at once; when the returned toRecord is empty, call recorded
// with it all the same, so that the position moves.
func (l *ledger) add(epoch uint64, items []item, end pglogrepl.LSN) toRecord {
	var out toRecord
	l.lift(epoch)
	for _, it := range items {
		l.addItem(it, &out)
	}
	if end > 0 {
		l.push(&entry{pos: true, end: end, state: entryDone})
	}
	return out
}

// addItem appends one message, as its verdict says.
func (l *ledger) addItem(it item, out *toRecord) {
	e := &entry{rec: it.rec, agg: aggOf(it.rec), bytes: it.bytes}
	l.push(e)
	l.msgs++
	switch {
	case it.fail != nil:
		e.failure, e.err = *it.fail, it.err
		l.addUnpublishable(e, out)
	case it.act == actSkip:
		e.state = entryDone
	case it.act == actDefer:
		l.block(e, entryDeferred, out)
	default:
		ln := l.lane(e.agg)
		if ln.blocked {
			l.block(e, entryDeferred, out)
			return
		}
		ln.queue = append(ln.queue, e)
		if len(ln.queue) == 1 {
			l.makeReady(e)
		}
	}
}

// addUnpublishable adds a message that cannot be published. It fails at
// once when no earlier message of its aggregate waits to be published;
// otherwise it waits at the end of its lane and fails when it reaches the
// head, so that its record, which hands the aggregate to the table path,
// never commits while an earlier message of the aggregate is still being
// published. Either way its aggregate is blocked from now on.
func (l *ledger) addUnpublishable(e *entry, out *toRecord) {
	ln := l.lane(e.agg)
	if len(ln.queue) == 0 {
		l.block(e, entryFailed, out)
		return
	}
	e.doomed = true
	ln.queue = append(ln.queue, e)
	l.hold(e.agg, ln)
}

func (l *ledger) push(e *entry) {
	e.ord = l.next
	l.next++
	l.log = append(l.log, e)
}

func (l *ledger) lane(agg aggregate) *lane {
	ln := l.lanes[agg]
	if ln == nil {
		ln = &lane{}
		l.lanes[agg] = ln
	}
	return ln
}

func (l *ledger) makeReady(e *entry) {
	e.state = entryReady
	heap.Push(&l.heads, e)
}

// block gives e the state (failed or deferred), appends it to out, and
// blocks its aggregate: the messages queued behind e (none when e is the
// head) and those added later are deferred.
func (l *ledger) block(e *entry, state entryState, out *toRecord) {
	e.state = state
	if state == entryFailed {
		out.failed = append(out.failed, e)
	} else {
		out.deferred = append(out.deferred, e)
	}
	l.hold(e.agg, l.lane(e.agg))
}

// hold counts one more unrecorded failure or deferral of agg and blocks it.
func (l *ledger) hold(agg aggregate, ln *lane) {
	ln.unsent++
	ln.blocked = true
	delete(l.lifting, agg)
}

// failQueue empties ln's queue, whose head failed or cannot be published:
// the messages that cannot be published fail (they were counted when
// added), the others are deferred, a message still handed out too (its
// claim's marks then change nothing).
func (l *ledger) failQueue(ln *lane, out *toRecord) {
	q := ln.queue
	ln.queue = nil
	for _, e := range q {
		if e.state == entryLeased {
			delete(l.leasedBy, e.rec.Seq)
			ln.leased--
		}
		if e.doomed {
			e.state = entryFailed
			out.failed = append(out.failed, e)
			continue
		}
		l.block(e, entryDeferred, out)
	}
}

// lift unblocks the aggregates whose failures and deferrals were recorded
// before the check numbered epoch started: that check saw them deferred
// in the table.
func (l *ledger) lift(epoch uint64) {
	for agg, ln := range l.lifting {
		if ln.until >= epoch {
			continue
		}
		delete(l.lifting, agg)
		ln.blocked = false
		l.drop(agg, ln)
	}
}

// drop forgets agg's lane when nothing of it is left.
func (l *ledger) drop(agg aggregate, ln *lane) {
	if len(ln.queue) == 0 && !ln.blocked && ln.unsent == 0 {
		delete(l.lanes, agg)
	}
}

// runLimits bounds the runs a claim hands out (store.ClaimParams.MaxRun
// and MaxRunBytes).
type runLimits struct {
	// max is the most messages of one aggregate per claim; below 2, one.
	max int
	// bytes bounds a run's payload bytes, head included: a message joins
	// the run only while they stay within it. 0: no bound. The head is
	// handed out whatever its size.
	bytes int
}

// claim hands out up to limit messages under token, in stream order: the
// ready messages, oldest first, each the head of its aggregate's queue
// (every earlier message of its aggregate was acknowledged, none is handed
// out); then, with runs, rank by rank while limit allows, the next message
// of each of those aggregates (a follower), as long as it waits right
// behind the last one handed out, can be published, and fits in runs.
func (l *ledger) claim(token uuid.UUID, limit int, runs runLimits) []outbox.Record {
	var heads []*entry
	for len(heads) < limit && l.heads.Len() > 0 {
		e := heap.Pop(&l.heads).(*entry)
		l.lease(e, token)
		heads = append(heads, e)
	}
	out := heads
	if followers := l.followers(token, heads, limit-len(heads), runs); len(followers) > 0 {
		out = append(slices.Clip(heads), followers...)
		slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.ord, b.ord) })
	}
	recs := make([]outbox.Record, len(out))
	for i, e := range out {
		recs[i] = e.rec
	}
	if len(recs) == 0 {
		return nil
	}
	return recs
}

// run is a run that claim is growing: its lane and its payload bytes.
type run struct {
	ln    *lane
	bytes int
}

// followers leases, under token, up to room followers of the just leased
// heads, rank by rank: the second message of each run in the order of the
// heads, then the third, and so on, up to runs.max messages per run.
func (l *ledger) followers(token uuid.UUID, heads []*entry, room int, runs runLimits) []*entry {
	if runs.max < 2 || room <= 0 || len(heads) == 0 {
		return nil
	}
	growing := make([]run, len(heads))
	for i, e := range heads {
		growing[i] = run{ln: l.lanes[e.agg], bytes: len(e.rec.Payload)}
	}
	var out []*entry
	for rank := 1; rank < runs.max && room > 0 && len(growing) > 0; rank++ {
		next := growing[:0]
		for _, g := range growing {
			if room == 0 {
				break
			}
			e := g.follower(runs)
			if e == nil {
				continue
			}
			l.lease(e, token)
			g.bytes += len(e.rec.Payload)
			out = append(out, e)
			room--
			next = append(next, g)
		}
		growing = next
	}
	return out
}

// follower returns the message that may join g next, or nil: the one
// right after the leased ones, if it waits, can be published and fits in
// runs.bytes.
func (g run) follower(runs runLimits) *entry {
	if g.ln.leased >= len(g.ln.queue) {
		return nil
	}
	e := g.ln.queue[g.ln.leased]
	if e.state != entryWaiting || e.doomed {
		return nil
	}
	if runs.bytes > 0 && g.bytes+len(e.rec.Payload) > runs.bytes {
		return nil
	}
	return e
}

// lease hands e out under token.
func (l *ledger) lease(e *entry, token uuid.UUID) {
	e.state, e.token = entryLeased, token
	l.leasedBy[e.rec.Seq] = e
	l.lanes[e.agg].leased++
}

// take returns the leased message seq if token's claim holds it, and
// forgets the lease.
func (l *ledger) take(token uuid.UUID, seq int64) *entry {
	e := l.leasedBy[seq]
	if e == nil || e.token != token {
		return nil
	}
	delete(l.leasedBy, seq)
	l.lanes[e.agg].leased--
	return e
}

// ack records that seqs of token's claim were acknowledged: they leave
// their aggregates' queues, and once none of an aggregate is handed out,
// its next message becomes ready (or fails, if it cannot be published).
// The messages that were token's are in the returned sent.
func (l *ledger) ack(token uuid.UUID, seqs []int64) toRecord {
	var out toRecord
	for _, seq := range seqs {
		e := l.take(token, seq)
		if e == nil {
			continue
		}
		e.state = entrySent
		out.sent = append(out.sent, e)
		ln := l.lanes[e.agg]
		ln.remove(e)
		l.resume(e.agg, ln, &out)
	}
	return out
}

// remove takes e out of ln's queue.
func (ln *lane) remove(e *entry) {
	if ln.queue[0] == e {
		ln.queue = ln.queue[1:]
		return
	}
	if i := slices.Index(ln.queue, e); i >= 0 {
		ln.queue = slices.Delete(ln.queue, i, i+1)
	}
}

// resume moves agg's lane on once none of its messages is handed out: its
// head becomes ready or, if it cannot be published, fails with the rest of
// the queue; an empty lane is forgotten.
func (l *ledger) resume(agg aggregate, ln *lane, out *toRecord) {
	switch {
	case len(ln.queue) == 0:
		ln.queue = nil
		l.drop(agg, ln)
	case ln.leased > 0 || ln.queue[0].state != entryWaiting:
		// handed out, or ready already
	case ln.queue[0].doomed:
		l.failQueue(ln, out)
	default:
		l.makeReady(ln.queue[0])
	}
}

// fail records the failures of token's claim. A failure that found the
// broker unavailable (store.Failure.Unavailable) gives its message back,
// to its place at the front of its aggregate's queue; any other fails its
// message, which blocks its aggregate: the messages queued behind it are
// deferred. A failure of a message behind an earlier one of its aggregate
// that is still queued is given back unrecorded and not counted (the relay
// core gives the later messages of a run back, and fails only the first
// that was not acknowledged). n counts the failures that were token's and
// were recorded or given back as said.
func (l *ledger) fail(token uuid.UUID, fs []store.Failure) (n int, out toRecord) {
	for _, f := range fs {
		e := l.take(token, f.Seq)
		if e == nil {
			continue
		}
		ln := l.lanes[e.agg]
		e.state = entryWaiting
		if f.Unavailable {
			n++
			l.resume(e.agg, ln, &out)
			continue
		}
		if ln.queue[0] != e {
			l.resume(e.agg, ln, &out)
			continue
		}
		n++
		e.failure = f
		ln.queue = ln.queue[1:]
		l.block(e, entryFailed, &out)
		l.failQueue(ln, &out)
	}
	return n, out
}

// release gives seqs of token's claim back, each to its place at the front
// of its aggregate's queue; once none of an aggregate is handed out, it
// moves on (resume). It returns how many were token's, and what that
// leaves to record.
func (l *ledger) release(token uuid.UUID, seqs []int64) (n int, out toRecord) {
	for _, seq := range seqs {
		e := l.take(token, seq)
		if e == nil {
			continue
		}
		e.state = entryWaiting
		n++
		l.resume(e.agg, l.lanes[e.agg], &out)
	}
	return n, out
}

// recorded records that the record of out committed, when epoch checks
// had started: an aggregate it leaves without unrecorded failures or
// deferrals is unblocked by the first add with a later epoch.
// It passes the messages that are done from the front of the log and
// returns the new confirmed position (0: unchanged) and the messages and
// bytes passed, to be given back to the in-flight bounds.
func (l *ledger) recorded(out toRecord, epoch uint64) (confirm pglogrepl.LSN, msgs int, bytes int64) {
	for _, e := range out.sent {
		e.state = entryDone
	}
	for _, list := range [][]*entry{out.failed, out.deferred} {
		for _, e := range list {
			e.state = entryDone
			ln := l.lanes[e.agg]
			ln.unsent--
			if ln.unsent == 0 {
				ln.until = epoch
				l.lifting[e.agg] = ln
			}
		}
	}
	return l.pass()
}

// pass drops the done entries from the front of the log.
func (l *ledger) pass() (confirm pglogrepl.LSN, msgs int, bytes int64) {
	i := 0
	for ; i < len(l.log) && l.log[i].state == entryDone; i++ {
		e := l.log[i]
		if e.pos {
			confirm = max(confirm, e.end)
			continue
		}
		msgs++
		bytes += e.bytes
	}
	clear(l.log[:i])
	l.log = l.log[i:]
	l.msgs -= msgs
	return confirm, msgs, bytes
}

// readyHeap orders the ready messages by their place in the stream.
type readyHeap []*entry

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].ord < h[j].ord }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(*entry)) }

func (h *readyHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
