package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/failpoint"
	"github.com/outbox-dev/outbox/store"
)

// Defaults of the cursor settings of Config.
const (
	// DefaultCursorSaveInterval is the default of Config.CursorSaveInterval.
	DefaultCursorSaveInterval = 100 * time.Millisecond
	// DefaultCursorReadAhead is the default of Config.CursorReadAhead.
	DefaultCursorReadAhead = 1000
)

// DefaultLeaderLease is the default of Config.LeaderLease.
const DefaultLeaderLease = 5 * time.Second

// minLeaderLease is the shortest Config.LeaderLease.
const minLeaderLease = time.Second

// leaderLease is the lease of the cursor's leader (Config.LeaderLease).
func (s *Store) leaderLease() time.Duration {
	if s.cfg.LeaderLease == 0 {
		return DefaultLeaderLease
	}
	return s.cfg.LeaderLease
}

// cursorSaveFailpoint names the crash point inside the transaction of a
// round trip that saves the position (internal/e2e/cursor_test.go).
const cursorSaveFailpoint = "pgstore-cursor-save-before-commit"

// cursorGapGrace is the shortest time a gap stays open (see the package
// documentation, "Cursor mode").
const cursorGapGrace = time.Second

// cursorMaxGaps bounds the gaps the leader tracks: beyond it, it reads no
// further until some closed (a long transaction holds xmin back while many
// seqs are rolled back).
const cursorMaxGaps = 10000

// ErrCursorMode is wrapped by the errors of [EnableCursor] and
// [DisableCursor] when the outbox cannot switch.
var ErrCursorMode = errors.New("pgstore: cursor mode")

// mode is what a Cursor knows about the outbox's relay mode.
type mode uint8

const (
	modeUnknown mode = iota
	modeClaim
	modeCursor
)

// cursorState is a Cursor's state. db serialises the round
// trips that read or change the cursor's messages, so that each sees the
// effects of the one before (a read after a failure sees the failed
// message in the table path); mu guards the fields, and is never held
// during a round trip.
type cursorState struct {
	db sync.Mutex
	mu sync.Mutex

	mode      mode
	checkedAt time.Time // when the mode was last read (claim mode), or leading last tried (standby)

	leader     bool
	owner      string
	token      uuid.UUID // the lease token of the cursor row
	leaseUntil time.Time // the lease ends no earlier than this
	lease      time.Duration
	win        *cursorWindow
	saved      int64
	savedAt    time.Time
	// savedHandled is the window's handled count at the last save.
	savedHandled uint64
	// keepStop ends the goroutine that renews the lead's lease (nil when
	// none runs); keepDone is closed when the last one started returned
	// (cursorlease.go).
	keepStop context.CancelFunc
	keepDone chan struct{}
	// claimed is when a claim last came in (UnixNano): a lead whose Cursor
	// gets no claim for leadIdleLimit is given up (cursorlease.go).
	claimed atomic.Int64

	lastTable time.Time // the last claim of the table path
	tableMore bool      // it found messages: claim again at once
	// tableTok holds the claims that hold table-path messages, with the end
	// of their lease: marks under other tokens need no round trip.
	tableTok map[uuid.UUID]time.Time
}

// rememberTableClaim records that claim token holds table-path messages
// until leaseEnd, and forgets claims whose lease ended a while ago (their
// marks change nothing in the table any more). cs.mu is held.
func (cs *cursorState) rememberTableClaim(token uuid.UUID, leaseEnd time.Time) {
	if cs.tableTok == nil {
		cs.tableTok = map[uuid.UUID]time.Time{}
	}
	now := time.Now()
	for t, end := range cs.tableTok {
		if now.Sub(end) > time.Minute {
			delete(cs.tableTok, t)
		}
	}
	cs.tableTok[token] = leaseEnd
}

// holdsTable reports whether claim token may hold table-path messages.
// cs.mu is held.
func (cs *cursorState) holdsTable(token uuid.UUID) bool {
	_, ok := cs.tableTok[token]
	return ok
}

// cursorTrip is a Cursor's marks and claims: the marks of seqs under token
// (in memory for cursor messages, in the table for table-path ones) and,
// if p is not nil, a claim: cursor messages from the leader's window
// (after a read if it holds too few) and due table-path messages (every
// FullClaimInterval), in one round trip with whatever the cursor needs to
// write (its position and lease, messages moving to the table path).
func (c *Cursor) cursorTrip(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams) (int64, store.Claim, error) {
	var cl store.Claim
	if p != nil {
		if p.Lease < time.Millisecond {
			return 0, cl, fmt.Errorf("pgstore: claim: ClaimParams.Lease %v must be at least 1ms", p.Lease)
		}
		var err error
		if cl.Token, err = uuid.NewRandom(); err != nil {
			return 0, cl, fmt.Errorf("new token: %w", err)
		}
	}
	cs := &c.cs
	if p == nil {
		// A mark alone: cursor messages are acknowledged in memory, without
		// waiting for a round trip another claim may have under way.
		cs.mu.Lock()
		var marked int64
		c.checkLease(time.Now())
		if cs.leader {
			marked = cs.win.ack(token, seqs)
		}
		done := !cs.holdsTable(token) && (!cs.leader || c.s.cursorSaveInterval() >= 0)
		cs.mu.Unlock()
		if done {
			return marked, cl, nil
		}
		// Table-path messages to mark, or a save with every mark: a round
		// trip (which finds the cursor messages acknowledged already).
		cs.db.Lock()
		defer cs.db.Unlock()
		n, cl, _, err := c.cursorRoundTrip(ctx, token, seqs, p, cl)
		return marked + n, cl, err
	}
	cs.db.Lock()
	defer cs.db.Unlock()
	marked, cl, won, err := c.cursorRoundTrip(ctx, token, seqs, p, cl)
	if err == nil && won && p != nil {
		// Just became the leader: read at once rather than at the next
		// claim.
		_, cl, _, err = c.cursorRoundTrip(ctx, uuid.Nil, nil, p, cl)
	}
	return marked, cl, err
}

// cursorRoundTrip is one round trip of cursorTrip; it reports whether the
// Cursor became the leader in it. cs.db is held.
func (c *Cursor) cursorRoundTrip(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams, cl store.Claim) (int64, store.Claim, bool, error) {
	plan := c.planCursorTrip(token, seqs, p, time.Now())
	return c.runCursorPlan(ctx, &plan, p, cl)
}

// runCursorPlan sends what plan holds, if anything, in one round trip and
// takes its result into the cursor's state, as cursorRoundTrip. What the
// leader writes is fenced by plan.leaderTok in the database, whatever the
// Cursor learnt since it planned. cs.db is held.
func (c *Cursor) runCursorPlan(ctx context.Context, plan *cursorPlan, p *store.ClaimParams, cl store.Claim) (int64, store.Claim, bool, error) {
	if !plan.sends() {
		// Nothing to send: the marks were in memory, and the window holds
		// enough for the claim.
		cs := &c.cs
		cs.mu.Lock()
		defer cs.mu.Unlock()
		marked := cs.ackLeading(plan.leaderTok, plan.token, plan.seqs)
		return marked, c.cursorHandOut(cl, p, plan.leaderTok, nil), false, nil
	}
	b := c.s.relayBatch()
	reply := c.queueCursorTrip(b, plan, p, cl.Token)
	if reply.scan != nil {
		defer reply.scan.done()
	}
	if err := c.sendCursorTrip(ctx, b, reply); err != nil {
		// Nothing of the round trip counts, not even the marks of cursor
		// messages (a caller treats the batch as not marked and marks it
		// again). A lost reply may hide a committed save or takeover; the
		// lease then simply runs out.
		return 0, cl, false, err
	}
	marked, cl, won := c.applyCursorTrip(plan, reply, p, cl)
	return marked, cl, won, nil
}

// cursorPlan is what one round trip of cursorTrip sends, decided from the
// cursor's state before it is sent (planCursorTrip).
type cursorPlan struct {
	token     uuid.UUID // the claim whose seqs are marked
	seqs      []int64   // the seqs to mark
	tableSeqs []int64   // seqs, when token holds table-path messages: marked in the table
	leaderTok uuid.UUID // the lead's token when planned

	read      bool // the leader reads (queueCursorRead)
	readFrom  int64
	headLimit int
	gapLo     []int64
	gapHi     []int64
	gapLimit  int

	save     bool // the leader saves its position and renews its lease
	saveArgs cursorSaveArgs
	tabling  []int64 // the window's records that move to the table path

	tryLead   bool // a standby tries to lead under leadToken
	leadToken uuid.UUID

	tableClaim bool // a claim of the table path
}

// sends reports whether the round trip has anything to send.
func (pl *cursorPlan) sends() bool {
	return pl.read || pl.save || pl.tryLead || pl.tableClaim || len(pl.tableSeqs) > 0
}

// planCursorTrip decides what a round trip of cursorTrip sends: the marks
// of table-path messages under token; with a claim (p.Limit at least 1), a
// read of the leader's window or a standby's attempt to lead, and the
// table path's claim when due; and the leader's save when due. It takes
// cs.mu.
func (c *Cursor) planCursorTrip(token uuid.UUID, seqs []int64, p *store.ClaimParams, now time.Time) cursorPlan {
	cs := &c.cs
	cs.mu.Lock()
	defer cs.mu.Unlock()
	plan := cursorPlan{token: token, seqs: seqs, tableSeqs: seqs, leaderTok: cs.token}
	if p != nil {
		cs.lease = c.s.leaderLease()
	}
	if cs.owner == "" && p != nil {
		cs.owner = p.Owner
	}
	c.checkLease(now)
	if !cs.holdsTable(token) {
		plan.tableSeqs = nil // no table-path message was claimed under token
	}
	if p != nil && p.Limit >= 1 {
		if cs.leader {
			c.planRead(&plan, p.Limit, now)
		} else if now.Sub(cs.checkedAt) >= c.s.standbyInterval() {
			plan.tryLead, plan.leadToken = true, uuid.New()
			cs.checkedAt = now
		}
		plan.tableClaim = cs.tableMore || now.Sub(cs.lastTable) >= c.s.fullClaimInterval()
	}
	if cs.leader {
		c.planSave(&plan, now)
	}
	return plan
}

// planRead plans the leader's read when its window holds fewer eligible
// records than a claim of limit: above the head only while the window has
// room, the gaps in any case, so that they can close. cs.mu is held.
func (c *Cursor) planRead(plan *cursorPlan, limit int, now time.Time) {
	w := c.cs.win
	w.expire(now)
	if w.eligible(limit) >= limit {
		return
	}
	if w.open() < c.s.cursorReadAhead() && len(w.gaps) < cursorMaxGaps {
		plan.headLimit = limit
	}
	plan.read = plan.headLimit > 0 || len(w.gaps) > 0
	plan.readFrom = w.head
	plan.gapLo, plan.gapHi = w.gapRanges()
	plan.gapLimit = 4 * limit
}

// cursorReply is what a round trip of cursorTrip returned, filled in as
// the batch's results arrive.
type cursorReply struct {
	marked    int64 // table-path messages marked SENT
	read      cursorRead
	saveTag   pgconn.CommandTag
	pauseSave bool // the save's failpoint is armed
	active    bool // cursor mode is on (from an attempt to lead)
	lead      leadResult
	scan      *claimScan // the table path's claim
	tableRecs []outbox.Record
	sent      time.Time
}

// queueCursorTrip queues what plan sends into b, the leader's read first;
// the table path's claim is made under claimTok.
func (c *Cursor) queueCursorTrip(b *pgx.Batch, plan *cursorPlan, p *store.ClaimParams, claimTok uuid.UUID) *cursorReply {
	r := &cursorReply{}
	// The read comes first: the bound of the gaps it finds is a
	// transaction id it takes after its snapshot (queries/cursor_read.sql),
	// and any write before it in the round trip's transaction (the save,
	// a mark, a claim) would have taken the id already, before writers
	// that took theirs while it ran. Such a bound could close the gap of a
	// writer still open, and lose its message.
	if plan.read {
		r.read.sent = time.Now()
		c.s.queueCursorRead(b, plan.readFrom, plan.headLimit, plan.gapLo, plan.gapHi, plan.gapLimit, &r.read)
	}
	if plan.save {
		c.queueCursorSave(b, plan, r)
	}
	if len(plan.tabling) > 0 {
		b.Queue(c.s.q.cursorTable, plan.leaderTok, plan.tabling)
	}
	if len(plan.tableSeqs) > 0 {
		b.Queue(c.s.q.markSent, plan.tableSeqs, plan.token).Exec(func(t pgconn.CommandTag) error { r.marked += t.RowsAffected(); return nil })
	}
	if plan.tryLead {
		b.Queue(c.s.q.cursorState, p.Owner, plan.leadToken, c.cs.lease.Milliseconds(), true).QueryRow(func(row pgx.Row) error {
			return r.lead.scan(row, &r.active)
		})
	}
	if plan.tableClaim {
		r.scan = c.s.queueTableClaim(b, p, claimTok, &r.tableRecs)
	}
	return r
}

// sendCursorTrip sends the round trip b and waits until it committed, or
// failed; r.sent is when it was sent.
func (c *Cursor) sendCursorTrip(ctx context.Context, b *pgx.Batch, r *cursorReply) error {
	r.sent = time.Now()
	br := c.s.pool.SendBatch(ctx, b)
	if r.pauseSave {
		// The batch is on the wire: the server runs the save's UPDATE and
		// then pauses before the commit. A crash test kills the process now.
		failpoint.Announce(cursorSaveFailpoint)
	}
	return br.Close()
}

// applyCursorTrip takes what a committed round trip returned into the
// cursor's state and fills claim cl. It returns how many messages were
// marked and whether the Cursor became the leader. It takes cs.mu.
func (c *Cursor) applyCursorTrip(plan *cursorPlan, r *cursorReply, p *store.ClaimParams, cl store.Claim) (int64, store.Claim, bool) {
	cs := &c.cs
	cs.mu.Lock()
	defer cs.mu.Unlock()
	// The marks of cursor messages count once the round trip did: then the
	// read below may hand out the next message of their aggregates.
	marked := r.marked + cs.ackLeading(plan.leaderTok, plan.token, plan.seqs)
	c.applyTablePath(plan, r)
	if plan.save && !c.applySave(plan, r) {
		return marked, c.cursorHandOut(cl, p, uuid.Nil, r.tableRecs), false
	}
	if plan.read && cs.leader && cs.token == plan.leaderTok {
		// The read came first in the round trip, before the save moved
		// tabling to the table path, so its blocked flags do not know of
		// that move. Applied while those records are still in the window
		// (as on their way to the table path), a later message of their
		// aggregates that the read found follows them there. Applied after
		// tabled, it would stay a cursor message and be published before
		// them (chaos --cursor --seed 12).
		cs.win.apply(r.read)
	}
	if len(plan.tabling) > 0 && cs.leader && cs.token == plan.leaderTok {
		// A lead dropped meanwhile (checkLease, on another goroutine) took
		// its window with it: nothing is left to update.
		cs.win.tabled(plan.tabling)
	}
	won := plan.tryLead && c.applyLeadAttempt(plan.leadToken, p.Owner, r)
	return marked, c.cursorHandOut(cl, p, cs.token, r.tableRecs), won
}

// applyTablePath takes the table path's part of a committed round trip:
// its claim, and its marks, after which the next message of each marked
// message's aggregate is the head. cs.mu is held.
func (c *Cursor) applyTablePath(plan *cursorPlan, r *cursorReply) {
	cs := &c.cs
	if plan.tableClaim {
		cs.lastTable = r.sent
		cs.tableMore = len(r.tableRecs) > 0
		c.s.floor.end(*r.scan)
	}
	if len(plan.tableSeqs) > 0 {
		// Marking table-path messages sent makes the next message of each
		// of their aggregates the head: claim again at once. (A claim of
		// the table path that found nothing meanwhile, because those
		// messages were still in flight, must not hold it back for a
		// FullClaimInterval.)
		cs.tableMore = true
	}
}

// cursorHandOut fills claim cl (p nil: no claim) with the table-path
// messages claimed and as many eligible cursor messages as fit, and
// remembers which claims hold table-path messages. cs.mu is held.
func (c *Cursor) cursorHandOut(cl store.Claim, p *store.ClaimParams, leaderTok uuid.UUID, tableRecs []outbox.Record) store.Claim {
	cs := &c.cs
	if p == nil || p.Limit < 1 {
		return cl
	}
	recs := cl.Records // from an earlier round trip of the same claim
	for _, r := range tableRecs {
		if cs.leader && cs.win.holds(r.AggregateType, r.AggregateID) {
			// An earlier message of the aggregate is still the leader's to
			// publish. It should not happen (the table path is entered
			// only behind a failure); if it does, the lease of this claim
			// runs out and a later claim takes it in order.
			c.s.cfg.Logger.Warn("pgstore: table-path message held back behind a cursor message of its aggregate",
				slog.Int64("seq", r.Seq), slog.String("aggregate_id", r.AggregateID))
			continue
		}
		recs = append(recs, r)
	}
	if len(tableRecs) > 0 {
		cs.rememberTableClaim(cl.Token, time.Now().Add(p.Lease))
	}
	if cs.leader && cs.token == leaderTok && len(recs) < p.Limit {
		recs = append(recs, cs.win.handOut(p.Limit-len(recs), cl.Token, p.Owner, time.Now().Add(p.Lease))...)
	}
	sortBySeq(recs)
	cl.Records = recs
	return cl
}

func (s *Store) cursorSaveInterval() time.Duration {
	if s.cfg.CursorSaveInterval == 0 {
		return DefaultCursorSaveInterval
	}
	return s.cfg.CursorSaveInterval
}

func (s *Store) cursorReadAhead() int {
	if s.cfg.CursorReadAhead == 0 {
		return DefaultCursorReadAhead
	}
	return s.cfg.CursorReadAhead
}
