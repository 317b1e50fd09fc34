package cursor

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// aggKey identifies an aggregate: the unit of ordering.
type aggKey struct{ typ, id string }

// recState is where an open record is.
type recState uint8

const (
	recBuffered recState = iota // read, waiting to be handed out
	recLeased                   // handed out to a claim, not acknowledged yet
	recTabling                  // to be moved to the table path (PENDING), not committed yet
)

// cursorRec is an open record.
type cursorRec struct {
	rec      outbox.Record
	key      aggKey
	state    recState
	token    uuid.UUID // the claim that holds it (recLeased)
	leaseEnd time.Time // when that claim's lease ends (recLeased)
}

// cursorGap is a range of seqs that were not visible when a higher seq was
// read.
type cursorGap struct {
	lo, hi int64
	// xmax is the bound of the read that found the gap, a transaction id
	// given out after that read's snapshot was taken: every transaction
	// that could hold one of its seqs has a lower xid (see the package
	// documentation), so once a snapshot's xmin reaches
	// xmax they have all ended.
	xmax uint64
	// at is when the read that found the gap returned.
	at time.Time
}

// cursorWindow is the leader's view of the cursor, the in-memory half of
// cursor mode (see the package documentation): what the
// leading relay knows about the messages between the saved position and
// the highest seq it has read. It does no I/O, so that its rules can be
// tested on their own (window_internal_test.go). It is not safe for
// concurrent use; cursorState guards it.
//
// The window covers (pos, head]. Every seq in it is in one of three
// states:
//
//   - open: a record that was read and is not handled yet (buffered,
//     leased to a claim, or being moved to the table path);
//   - in a gap: not visible when a higher seq was read, so its transaction
//     may still commit (or it rolled back, or the seq was never used);
//   - handled: acknowledged, moved to the table path, or not a cursor
//     message at all (a row the table path owns).
//
// pos only moves over handled seqs and finalized gaps, so no message that
// may still commit is ever passed.
type cursorWindow struct {
	pos  int64 // every seq <= pos is handled
	head int64 // the highest seq read
	// grace is how long a gap stays open at least, whatever the snapshots
	// say (see the package documentation).
	grace time.Duration
	// handled counts the records handled and the gaps closed: a save is
	// due when it changed, even if pos did not move (see unhandled).
	handled uint64

	recs  map[int64]*cursorRec
	order []int64 // seqs of the open records, ascending
	gaps  []cursorGap
	aggs  map[aggKey][]int64 // open records per aggregate, ascending
	// leased counts the leased records per aggregate: an aggregate with
	// one is busy. They are all under one token, the claim of their run.
	leased map[aggKey]int
	tokens map[uuid.UUID][]int64
}

func newCursorWindow(pos int64, grace time.Duration) *cursorWindow {
	return &cursorWindow{
		pos: pos, head: pos, grace: grace,
		recs:   map[int64]*cursorRec{},
		aggs:   map[aggKey][]int64{},
		leased: map[aggKey]int{},
		tokens: map[uuid.UUID][]int64{},
	}
}

// open is the number of open records.
func (w *cursorWindow) open() int { return len(w.order) }

// gapRanges returns the gaps to ask a read about.
func (w *cursorWindow) gapRanges() (lo, hi []int64) {
	lo = make([]int64, len(w.gaps))
	hi = make([]int64, len(w.gaps))
	for i, g := range w.gaps {
		lo[i], hi[i] = g.lo, g.hi
	}
	return lo, hi
}

// apply adds what a read found: rows inside gaps fill them, rows above the
// head extend the window (with a gap for every seq skipped), and gaps that
// can no longer be filled are closed.
func (w *cursorWindow) apply(r pgstore.CursorRead) {
	for i := range w.gaps {
		if w.gaps[i].xmax == unsetXmax {
			w.gaps[i].xmax = r.Xmax // restored: see restore
		}
	}
	if !r.GapsComplete {
		// Rows of the gaps the read left out may be earlier messages of
		// the aggregates of the rows above the head: take those next time.
		r.HeadRows = nil
	}
	for _, row := range r.GapRows {
		if !w.fillGap(row.Record.Seq) {
			continue // not in a gap (any more): already known
		}
		w.add(row)
	}
	for _, row := range r.HeadRows {
		s := row.Record.Seq
		if s <= w.head {
			continue
		}
		if s > w.head+1 {
			w.gaps = append(w.gaps, cursorGap{lo: w.head + 1, hi: s - 1, xmax: r.Xmax, at: r.Returned})
		}
		w.head = s
		w.add(row)
	}
	if r.GapsComplete {
		w.closeGaps(r.Xmin, r.Sent)
	}
	w.advance()
}

// maxSavedRanges bounds the unhandled ranges a save records: beyond it, it
// records none and the last ones saved stay (they stay true).
const maxSavedRanges = 1000

// unsetXmax is the bound of a restored gap until the next read gives it
// one.
const unsetXmax = math.MaxUint64

// unhandled returns what a successor would have to read again: the seqs in
// (pos, head] that are open records or in gaps, as ascending, disjoint
// ranges; every other seq in (pos, head] was handled. ok is false when
// there are more than max ranges.
func (w *cursorWindow) unhandled(max int) (head int64, lo, hi []int64, ok bool) {
	add := func(l, h int64) bool {
		if n := len(hi); n > 0 && hi[n-1]+1 >= l {
			hi[n-1] = h
			return true
		}
		if len(lo) == max {
			return false
		}
		lo, hi = append(lo, l), append(hi, h)
		return true
	}
	// Open records and gaps are disjoint (a gap row leaves its gap before
	// it becomes a record): merge the two ascending lists.
	i, j := 0, 0
	for i < len(w.order) || j < len(w.gaps) {
		var l, h int64
		if j == len(w.gaps) || (i < len(w.order) && w.order[i] < w.gaps[j].lo) {
			l, h = w.order[i], w.order[i]
			i++
		} else {
			l, h = w.gaps[j].lo, w.gaps[j].hi
			j++
		}
		if !add(l, h) {
			return 0, nil, nil, false
		}
	}
	return w.head, lo, hi, true
}

// restore takes over what a predecessor saved with its position (see
// unhandled): every seq in (pos, head] outside the ranges was handled, and
// the seqs inside them become gaps found at `at`, so that the next reads
// fill them with what committed (the predecessor's open records are
// committed rows) and close the rest as any gap closes. Their bound is that
// of the next read: every transaction that may hold one of their seqs took
// it before the predecessor's save, so before that read's snapshot.
func (w *cursorWindow) restore(head int64, lo, hi []int64, at time.Time) {
	if head <= w.pos || len(lo) != len(hi) || w.head != w.pos {
		return
	}
	w.head = head
	for i := range lo {
		l, h := max(lo[i], w.pos+1), min(hi[i], head)
		if l > h || (len(w.gaps) > 0 && w.gaps[len(w.gaps)-1].hi >= l) {
			continue // outside the window, or not ascending: not from a save
		}
		w.gaps = append(w.gaps, cursorGap{lo: l, hi: h, xmax: unsetXmax, at: at})
	}
	w.advance()
}

// fillGap removes seq from the gap that holds it, reporting whether one
// did.
func (w *cursorWindow) fillGap(seq int64) bool {
	i, found := slices.BinarySearchFunc(w.gaps, seq, func(g cursorGap, s int64) int {
		switch {
		case g.hi < s:
			return -1
		case g.lo > s:
			return 1
		}
		return 0
	})
	if !found {
		return false
	}
	g := w.gaps[i]
	switch {
	case g.lo == seq && g.hi == seq:
		w.gaps = slices.Delete(w.gaps, i, i+1)
	case g.lo == seq:
		w.gaps[i].lo++
	case g.hi == seq:
		w.gaps[i].hi--
	default:
		right := g
		right.lo = seq + 1
		w.gaps[i].hi = seq - 1
		w.gaps = slices.Insert(w.gaps, i+1, right)
	}
	return true
}

// add makes a read row an open record, unless it is not a cursor message.
// A record whose aggregate has an earlier message in the table path, or an
// open record on its way there, goes to the table path too.
func (w *cursorWindow) add(row pgstore.CursorRow) {
	if !row.Queued {
		return
	}
	key := aggKey{row.Record.AggregateType, row.Record.AggregateID}
	cr := &cursorRec{rec: row.Record, key: key}
	if row.Blocked || w.aggregateTabling(key) {
		cr.state = recTabling
	}
	s := row.Record.Seq
	w.recs[s] = cr
	w.order = insertSorted(w.order, s)
	w.aggs[key] = insertSorted(w.aggs[key], s)
}

// aggregateTabling reports whether an open record of the aggregate is on
// its way to the table path.
func (w *cursorWindow) aggregateTabling(key aggKey) bool {
	for _, s := range w.aggs[key] {
		if w.recs[s].state == recTabling {
			return true
		}
	}
	return false
}

// closeGaps drops the gaps that no transaction can fill any more: found
// by a read whose snapshot had an xmin of at least their xmax, at least
// grace before that read was sent.
func (w *cursorWindow) closeGaps(xmin uint64, sent time.Time) {
	n := len(w.gaps)
	w.gaps = slices.DeleteFunc(w.gaps, func(g cursorGap) bool {
		return xmin >= g.xmax && sent.Sub(g.at) >= w.grace
	})
	w.handled += uint64(n - len(w.gaps))
}

// advance moves pos up to just below the first open record or gap.
func (w *cursorWindow) advance() {
	next := w.head
	if len(w.order) > 0 {
		next = min(next, w.order[0]-1)
	}
	if len(w.gaps) > 0 {
		next = min(next, w.gaps[0].lo-1)
	}
	w.pos = max(w.pos, next)
}

// expire returns leased records whose claim's lease ended to the buffer,
// as if released.
func (w *cursorWindow) expire(now time.Time) {
	for token, seqs := range w.tokens {
		if len(seqs) == 0 {
			delete(w.tokens, token)
			continue
		}
		if cr := w.recs[seqs[0]]; cr != nil && now.Before(cr.leaseEnd) {
			continue
		}
		w.unlease(token, seqs, func(*cursorRec) {})
		delete(w.tokens, token)
	}
}

// claimLimits bounds a hand-out: limit records in all, and per aggregate
// a run of at most maxRun records (0 and 1: its head alone) whose payload
// stays within maxRunBytes (0: no bound; the head is handed out whatever
// its size).
type claimLimits struct {
	limit, maxRun, maxRunBytes int
}

// claimLimitsOf returns the limits of a claim with p.
func claimLimitsOf(p *store.ClaimParams) claimLimits {
	return claimLimits{limit: p.Limit, maxRun: p.MaxRun, maxRunBytes: p.MaxRunBytes}
}

// eligible is the number of records handOut could give now.
func (w *cursorWindow) eligible(l claimLimits) int {
	return len(w.pick(l))
}

// isEligible: buffered, the lowest open record of its aggregate, and its
// aggregate has nothing leased.
func (w *cursorWindow) isEligible(seq int64) bool {
	cr := w.recs[seq]
	if cr.state != recBuffered {
		return false
	}
	if w.leased[cr.key] > 0 {
		return false
	}
	return w.aggs[cr.key][0] == seq
}

// pick returns the records a hand-out within l leases, not in seq order:
// the eligible records (the heads) in seq order, then, rank by rank, the
// next record of each head's run, so that every run gets its second
// record before any gets its third (see follower).
func (w *cursorWindow) pick(l claimLimits) []int64 {
	var out []int64
	for _, s := range w.order {
		if len(out) >= l.limit {
			return out
		}
		if w.isEligible(s) {
			out = append(out, s)
		}
	}
	if l.maxRun <= 1 || len(out) == 0 || len(out) >= l.limit {
		return out
	}
	runs := make([]pickRun, len(out))
	for i, s := range out {
		runs[i] = pickRun{last: s, bytes: len(w.recs[s].rec.Payload)}
	}
	for rank := 2; rank <= l.maxRun; rank++ {
		grown := false
		for i := range runs {
			if len(out) >= l.limit {
				return out
			}
			if s, ok := w.grow(&runs[i], l.maxRunBytes); ok {
				out = append(out, s)
				grown = true
			}
		}
		if !grown {
			break
		}
	}
	return out
}

// pickRun is a run being picked: its last record so far and its payload
// bytes.
type pickRun struct {
	last  int64
	bytes int
	ended bool
}

// grow adds the follower of r's last record to r if its payload fits in
// maxBytes (0: no bound), and returns it; a run that cannot grow ends.
func (w *cursorWindow) grow(r *pickRun, maxBytes int) (int64, bool) {
	if r.ended {
		return 0, false
	}
	s, ok := w.follower(r.last)
	if ok {
		n := len(w.recs[s].rec.Payload)
		if maxBytes > 0 && r.bytes+n > maxBytes {
			ok = false
		} else {
			r.last, r.bytes = s, r.bytes+n
		}
	}
	r.ended = !ok
	return s, ok
}

// follower returns the record that may follow prev in a run: the next
// open record of prev's aggregate, if it is buffered and no gap lies
// between them (a seq there may still commit as a message of the
// aggregate).
func (w *cursorWindow) follower(prev int64) (int64, bool) {
	list := w.aggs[w.recs[prev].key]
	i, found := slices.BinarySearch(list, prev)
	if !found || i+1 == len(list) {
		return 0, false
	}
	next := list[i+1]
	if w.recs[next].state != recBuffered || w.gapBetween(prev, next) {
		return 0, false
	}
	return next, true
}

// gapBetween reports whether a gap holds a seq strictly between lo and hi.
func (w *cursorWindow) gapBetween(lo, hi int64) bool {
	i, _ := slices.BinarySearchFunc(w.gaps, lo, func(g cursorGap, s int64) int {
		return cmp.Compare(g.hi, s+1) // the first gap whose hi is above lo
	})
	return i < len(w.gaps) && w.gaps[i].lo < hi
}

// handOut leases the records pick chooses within l to token until
// leaseEnd and returns them in seq order, marked IN_FLIGHT for owner.
func (w *cursorWindow) handOut(l claimLimits, token uuid.UUID, owner string, leaseEnd time.Time) []outbox.Record {
	seqs := w.pick(l)
	slices.Sort(seqs)
	out := make([]outbox.Record, 0, len(seqs))
	for _, s := range seqs {
		cr := w.recs[s]
		cr.state, cr.token, cr.leaseEnd = recLeased, token, leaseEnd
		w.leased[cr.key]++
		w.tokens[token] = append(w.tokens[token], s)
		rec := cr.rec
		rec.Status, rec.LeaseOwner, rec.LeaseExpiresAt = outbox.StatusInFlight, owner, leaseEnd
		out = append(out, rec)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// leasedUnder returns, of seqs, those leased to token, in the order given.
func (w *cursorWindow) leasedUnder(token uuid.UUID, seqs []int64) []int64 {
	var out []int64
	for _, s := range seqs {
		if cr := w.recs[s]; cr != nil && cr.state == recLeased && cr.token == token && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// ack handles the records of seqs leased to token (their broker
// acknowledged them) and returns how many there were.
func (w *cursorWindow) ack(token uuid.UUID, seqs []int64) int64 {
	mine := w.leasedUnder(token, seqs)
	for _, s := range mine {
		w.unleaseOne(token, s)
		w.remove(s)
	}
	w.advance()
	return int64(len(mine))
}

// release returns the records of seqs leased to token to the buffer and
// returns how many there were.
func (w *cursorWindow) release(token uuid.UUID, seqs []int64) int64 {
	mine := w.leasedUnder(token, seqs)
	w.unlease(token, mine, func(*cursorRec) {})
	return int64(len(mine))
}

// unlease ends the lease of seqs under token: the records become buffered
// (fn may change that).
func (w *cursorWindow) unlease(token uuid.UUID, seqs []int64, fn func(*cursorRec)) {
	// A copy: unleaseOne edits w.tokens[token], which seqs may be.
	for _, s := range slices.Clone(seqs) {
		cr := w.recs[s]
		if cr == nil || cr.state != recLeased || cr.token != token {
			continue
		}
		w.unleaseOne(token, s)
		cr.state = recBuffered
		fn(cr)
	}
}

func (w *cursorWindow) unleaseOne(token uuid.UUID, s int64) {
	cr := w.recs[s]
	if w.leased[cr.key]--; w.leased[cr.key] <= 0 {
		delete(w.leased, cr.key)
	}
	cr.token, cr.leaseEnd = uuid.Nil, time.Time{}
	rest := slices.DeleteFunc(w.tokens[token], func(x int64) bool { return x == s })
	if len(rest) == 0 {
		delete(w.tokens, token)
	} else {
		w.tokens[token] = rest
	}
}

// failing prepares a failure of the records of seqs leased to token: it
// returns those seqs, and the other open records of their aggregates
// (later ones, which must now wait in the table path behind the failed
// one). Nothing changes until failed is called with both lists after the
// database committed them.
func (w *cursorWindow) failing(token uuid.UUID, seqs []int64) (mine, behind []int64) {
	mine = w.leasedUnder(token, seqs)
	for _, s := range mine {
		for _, o := range w.aggs[w.recs[s].key] {
			if o != s && !slices.Contains(mine, o) && !slices.Contains(behind, o) {
				behind = append(behind, o)
			}
		}
	}
	slices.Sort(behind)
	return mine, behind
}

// failed handles the records that a committed failure moved to the table
// path: the failed ones (still leased to token) and those behind them,
// also those of the run that token still holds (the relay gives them back
// before it records the failure; if it did not, the table path owns them
// all the same, and the claim's later marks of them change nothing).
func (w *cursorWindow) failed(token uuid.UUID, mine, behind []int64) {
	for _, s := range mine {
		if cr := w.recs[s]; cr != nil && cr.state == recLeased && cr.token == token {
			w.unleaseOne(token, s)
			w.remove(s)
		}
	}
	w.unlease(token, behind, func(*cursorRec) {})
	w.tabled(behind)
}

// tablingSeqs returns the records waiting to be moved to the table path.
func (w *cursorWindow) tablingSeqs() []int64 {
	var out []int64
	for _, s := range w.order {
		if w.recs[s].state == recTabling {
			out = append(out, s)
		}
	}
	return out
}

// tabled handles records that a committed statement moved to the table
// path (or found not QUEUED any more). A leased one is left alone: its
// claim still owns it.
func (w *cursorWindow) tabled(seqs []int64) {
	for _, s := range seqs {
		if cr := w.recs[s]; cr != nil && cr.state != recLeased {
			w.remove(s)
		}
	}
	w.advance()
}

// remove forgets an open record: it is handled.
func (w *cursorWindow) remove(s int64) {
	cr := w.recs[s]
	if cr == nil {
		return
	}
	delete(w.recs, s)
	w.handled++
	w.order = deleteSorted(w.order, s)
	rest := deleteSorted(w.aggs[cr.key], s)
	if len(rest) == 0 {
		delete(w.aggs, cr.key)
	} else {
		w.aggs[cr.key] = rest
	}
}

// holds reports whether the aggregate has a record the leader still has to
// publish itself (buffered or leased), so that a table-path message of it
// must wait. A record on its way to the table path does not count: it
// waits behind the table path's messages.
func (w *cursorWindow) holds(typ, id string) bool {
	for _, s := range w.aggs[aggKey{typ, id}] {
		if w.recs[s].state != recTabling {
			return true
		}
	}
	return false
}

func insertSorted(xs []int64, x int64) []int64 {
	if n := len(xs); n == 0 || xs[n-1] < x {
		return append(xs, x)
	}
	i, found := slices.BinarySearch(xs, x)
	if found {
		return xs
	}
	return slices.Insert(xs, i, x)
}

func deleteSorted(xs []int64, x int64) []int64 {
	i, found := slices.BinarySearch(xs, x)
	if !found {
		return xs
	}
	return slices.Delete(xs, i, i+1)
}

// saveArgs is what a save of the window writes now (CursorSave without
// its lease), and the window's handled count then.
type saveArgs struct {
	pgstore.CursorSave
	handled uint64
}

// saveArgs returns what a save of the window writes now.
func (w *cursorWindow) saveArgs() saveArgs {
	a := saveArgs{CursorSave: pgstore.CursorSave{Pos: w.pos}, handled: w.handled}
	if head, lo, hi, ok := w.unhandled(maxSavedRanges); ok {
		a.Head, a.Lo, a.Hi = &head, lo, hi
	}
	return a
}
