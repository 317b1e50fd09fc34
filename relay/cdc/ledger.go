package cdc

import (
	"container/heap"

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
	// queue holds the aggregate's messages that wait to be published, in
	// stream order: the head is ready or leased, the others wait for it.
	queue []*entry
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
//   - claim hands out ready messages oldest first, at most one per
//     aggregate: a message is ready only once every earlier message of its
//     aggregate was acknowledged, so order per aggregate holds whatever
//     order the claims are published in.
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

// ready is the number of messages claim would hand out now.
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
// added), the others are deferred.
func (l *ledger) failQueue(ln *lane, out *toRecord) {
	q := ln.queue
	ln.queue = nil
	for _, e := range q {
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

// claim hands out up to limit ready messages under token, in stream
// order: at most one per aggregate, each only after every earlier message
// of its aggregate was acknowledged.
func (l *ledger) claim(token uuid.UUID, limit int) []outbox.Record {
	var recs []outbox.Record
	for len(recs) < limit && l.heads.Len() > 0 {
		e := heap.Pop(&l.heads).(*entry)
		e.state, e.token = entryLeased, token
		l.leasedBy[e.rec.Seq] = e
		recs = append(recs, e.rec)
	}
	return recs
}

// take returns the leased message seq if token's claim holds it, and
// forgets the lease.
func (l *ledger) take(token uuid.UUID, seq int64) *entry {
	e := l.leasedBy[seq]
	if e == nil || e.token != token {
		return nil
	}
	delete(l.leasedBy, seq)
	return e
}

// ack records that seqs of token's claim were acknowledged: the next
// message of each of their aggregates becomes ready (or fails, if it
// cannot be published). The messages that were token's are in the
// returned sent.
func (l *ledger) ack(token uuid.UUID, seqs []int64) toRecord {
	var out toRecord
	for _, seq := range seqs {
		e := l.take(token, seq)
		if e == nil {
			continue
		}
		e.state = entrySent
		out.sent = append(out.sent, e)
		l.advance(e.agg, &out)
	}
	return out
}

// advance moves agg's lane on after its head was acknowledged: the next
// message becomes ready, or, if it cannot be published, fails.
func (l *ledger) advance(agg aggregate, out *toRecord) {
	ln := l.lanes[agg]
	ln.queue = ln.queue[1:]
	switch {
	case len(ln.queue) == 0:
		ln.queue = nil
		l.drop(agg, ln)
	case ln.queue[0].doomed:
		l.failQueue(ln, out)
	default:
		l.makeReady(ln.queue[0])
	}
}

// fail records the failures of token's claim. A failure that found the
// broker unavailable (store.Failure.Unavailable) gives its message back,
// ready again, first in line; any other fails its message, which blocks
// its aggregate: the messages queued behind it are deferred. n counts the
// failures that were token's.
func (l *ledger) fail(token uuid.UUID, fs []store.Failure) (n int, out toRecord) {
	for _, f := range fs {
		e := l.take(token, f.Seq)
		if e == nil {
			continue
		}
		n++
		if f.Unavailable {
			l.makeReady(e)
			continue
		}
		e.failure = f
		ln := l.lanes[e.agg]
		ln.queue = ln.queue[1:]
		l.block(e, entryFailed, &out)
		l.failQueue(ln, &out)
	}
	return n, out
}

// release gives seqs of token's claim back, ready again. It returns how
// many were token's.
func (l *ledger) release(token uuid.UUID, seqs []int64) int {
	n := 0
	for _, seq := range seqs {
		if e := l.take(token, seq); e != nil {
			l.makeReady(e)
			n++
		}
	}
	return n
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
