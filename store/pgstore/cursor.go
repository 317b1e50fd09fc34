package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

// minLeaderLease is the shortest lease of the cursor's leader: the claims'
// lease (store.ClaimParams.Lease) if longer. A lead is renewed a third of
// its lease before it ends, by the round trips that read anyway.
const minLeaderLease = time.Second

func leaderLease(claimLease time.Duration) time.Duration { return max(claimLease, minLeaderLease) }

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

// modeCheckInterval is how often a store in claim mode checks whether
// cursor mode was turned on, and a standby tries to lead.
const modeCheckInterval = 5 * time.Second

// ErrCursorMode is wrapped by the errors of [EnableCursor] and
// [DisableCursor] when the outbox cannot switch.
var ErrCursorMode = errors.New("pgstore: cursor mode")

// mode is what a Store knows about the outbox's relay mode.
type mode uint8

const (
	modeUnknown mode = iota
	modeClaim
	modeCursor
)

// cursorState is a Store's cursor-mode state. db serialises the round
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

// cursorTrip is markAndClaim in cursor mode: the marks of seqs under token
// (in memory for cursor messages, in the table for table-path ones) and,
// if p is not nil, a claim: cursor messages from the leader's window
// (after a read if it holds too few) and due table-path messages (every
// FullClaimInterval), in one round trip with whatever the cursor needs to
// write (its position and lease, messages moving to the table path).
func (s *Store) cursorTrip(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams) (int64, store.Claim, error) {
	var c store.Claim
	if p != nil {
		if p.Lease < time.Millisecond {
			return 0, c, fmt.Errorf("pgstore: claim: ClaimParams.Lease %v must be at least 1ms", p.Lease)
		}
		var err error
		if c.Token, err = uuid.NewRandom(); err != nil {
			return 0, c, fmt.Errorf("new token: %w", err)
		}
	}
	cs := &s.cursor
	if p == nil {
		// A mark alone: cursor messages are acknowledged in memory, without
		// waiting for a round trip another claim may have under way.
		cs.mu.Lock()
		var marked int64
		cs.checkLease(s, time.Now())
		if cs.leader {
			marked = cs.win.ack(token, seqs)
		}
		done := !cs.holdsTable(token) && (!cs.leader || s.cursorSaveInterval() >= 0)
		cs.mu.Unlock()
		if done {
			return marked, c, nil
		}
		// Table-path messages to mark, or a save with every mark: a round
		// trip (which finds the cursor messages acknowledged already).
		cs.db.Lock()
		defer cs.db.Unlock()
		n, c, _, err := s.cursorRoundTrip(ctx, token, seqs, p, c)
		return marked + n, c, err
	}
	cs.db.Lock()
	defer cs.db.Unlock()
	marked, c, won, err := s.cursorRoundTrip(ctx, token, seqs, p, c)
	if err == nil && won && p != nil {
		// Just became the leader: read at once rather than at the next
		// claim.
		_, c, _, err = s.cursorRoundTrip(ctx, uuid.Nil, nil, p, c)
	}
	return marked, c, err
}

// cursorRoundTrip is one round trip of cursorTrip; it reports whether the
// store became the leader in it. cs.db is held.
func (s *Store) cursorRoundTrip(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams, c store.Claim) (int64, store.Claim, bool, error) {
	cs := &s.cursor
	claiming := p != nil && p.Limit >= 1
	now := time.Now()

	cs.mu.Lock()
	var (
		marked     int64
		tableSeqs  = seqs
		leading    = cs.leader
		leaderTok  = cs.token
		doRead     bool
		headLimit  int
		readFrom   int64
		gapLo      []int64
		gapHi      []int64
		tabling    []int64
		doSave     bool
		save       cursorSaveArgs
		tryLead    bool
		leadToken  uuid.UUID
		tableClaim bool
	)
	if p != nil {
		cs.lease = leaderLease(p.Lease)
	}
	if cs.owner == "" && p != nil {
		cs.owner = p.Owner
	}
	cs.checkLease(s, now)
	leading = cs.leader
	if !cs.holdsTable(token) {
		tableSeqs = nil // no table-path message was claimed under token
	}
	if claiming {
		if leading {
			cs.win.expire(now)
			if cs.win.eligible(p.Limit) < p.Limit {
				// Read above the head only while the window has room; the
				// gaps are read in any case, so that they can close.
				if cs.win.open() < s.cursorReadAhead() && len(cs.win.gaps) < cursorMaxGaps {
					headLimit = p.Limit
				}
				doRead = headLimit > 0 || len(cs.win.gaps) > 0
				readFrom = cs.win.head
				gapLo, gapHi = cs.win.gapRanges()
			}
		} else if now.Sub(cs.checkedAt) >= s.standbyInterval() {
			tryLead = true
			cs.checkedAt = now
			leadToken = uuid.New()
		}
		tableClaim = cs.tableMore || now.Sub(cs.lastTable) >= s.fullClaimInterval()
	}
	if leading {
		tabling = cs.win.tablingSeqs()
		doSave = len(tabling) > 0 || cs.leaseUntil.Sub(now) < cs.lease*2/3 ||
			((cs.win.pos > cs.saved || cs.win.handled != cs.savedHandled) &&
				(s.cursorSaveInterval() < 0 || now.Sub(cs.savedAt) >= s.cursorSaveInterval()))
		if doSave {
			save = cs.win.saveArgs()
		}
	}
	cs.mu.Unlock()

	if !doRead && !doSave && !tryLead && !tableClaim && len(tableSeqs) == 0 {
		// Nothing to send: the marks were in memory, and the window holds
		// enough for the claim.
		cs.mu.Lock()
		defer cs.mu.Unlock()
		marked += cs.ackLeading(leaderTok, token, seqs)
		return marked, s.cursorHandOut(c, p, leaderTok, nil), false, nil
	}

	b := s.relayBatch()
	// The read comes first: the bound of the gaps it finds is a
	// transaction id it takes after its snapshot (queries/cursor_read.sql),
	// and any write before it in the round trip's transaction (the save,
	// a mark, a claim) would have taken the id already, before writers
	// that took theirs while it ran. Such a bound could close the gap of a
	// writer still open, and lose its message.
	var read cursorRead
	if doRead {
		read.sent = time.Now()
		s.queueCursorRead(b, readFrom, headLimit, gapLo, gapHi, 4*p.Limit, &read)
	}
	var saveTag, tableTag pgconn.CommandTag
	pauseSave := doSave && failpoint.Enabled && failpoint.Armed(cursorSaveFailpoint)
	if doSave {
		b.Queue(s.q.cursorSave, leaderTok, save.pos, cs.lease.Milliseconds(), save.head, save.lo, save.hi).
			Exec(func(t pgconn.CommandTag) error { saveTag = t; return nil })
		if pauseSave {
			b.Queue(s.q.failpointWatch)
			b.Queue(s.q.failpointPause)
		}
	}
	if len(tabling) > 0 {
		b.Queue(s.q.cursorTable, leaderTok, tabling).Exec(func(t pgconn.CommandTag) error { tableTag = t; return nil })
	}
	if len(tableSeqs) > 0 {
		b.Queue(s.q.markSent, tableSeqs, token).Exec(func(t pgconn.CommandTag) error { marked += t.RowsAffected(); return nil })
	}
	var (
		active bool
		lead   leadResult
	)
	if tryLead {
		b.Queue(s.q.cursorState, p.Owner, leadToken, cs.lease.Milliseconds(), true).QueryRow(func(row pgx.Row) error {
			return lead.scan(row, &active)
		})
	}
	var (
		scan      *claimScan
		tableRecs []outbox.Record
	)
	if tableClaim {
		scan = s.queueClaim(ctx, b, p, c.Token, &tableRecs, true)
		defer scan.done()
	}
	sent := time.Now()
	br := s.pool.SendBatch(ctx, b)
	if pauseSave {
		// The batch is on the wire: the server runs the save's UPDATE and
		// then pauses before the commit. A crash test kills the process now.
		failpoint.Announce(cursorSaveFailpoint)
	}
	err := br.Close()
	_ = tableTag

	cs.mu.Lock()
	defer cs.mu.Unlock()
	if err != nil {
		// Nothing of the round trip counts, not even the marks of cursor
		// messages (a caller treats the batch as not marked and marks it
		// again). A lost reply may hide a committed save or takeover; the
		// lease then simply runs out.
		return 0, c, false, err
	}
	// The marks of cursor messages count once the round trip did: then the
	// read below may hand out the next message of their aggregates.
	marked += cs.ackLeading(leaderTok, token, seqs)
	if tableClaim {
		cs.lastTable = sent
		cs.tableMore = len(tableRecs) > 0
		s.floor.end(*scan)
	}
	if len(tableSeqs) > 0 {
		// Marking table-path messages sent makes the next message of each
		// of their aggregates the head: claim again at once. (A claim of
		// the table path that found nothing meanwhile, because those
		// messages were still in flight, must not hold it back for a
		// FullClaimInterval.)
		cs.tableMore = true
	}
	if doSave {
		if saveTag.RowsAffected() == 0 {
			s.cfg.Logger.Warn("pgstore: cursor lease taken over; no longer leading", slog.String("schema", s.cfg.Schema))
			cs.dropLead()
			return marked, s.cursorHandOut(c, p, uuid.Nil, tableRecs), false, nil
		}
		cs.saved = max(cs.saved, save.pos)
		cs.savedAt = sent
		cs.savedHandled = save.handled
		cs.leaseUntil = sent.Add(cs.lease)
		if doRead && cs.leader && cs.token == leaderTok {
			// The read came first in the round trip, before the save moved
			// tabling to the table path, so its blocked flags do not know
			// of that move. Applied while those records are still in the
			// window (as on their way to the table path), a later message
			// of their aggregates that the read found follows them there.
			// Applied after tabled, it stayed a cursor message and was
			// published before them (chaos --cursor --seed 12).
			cs.win.apply(read)
			doRead = false
		}
		if len(tabling) > 0 {
			cs.win.tabled(tabling)
		}
	}
	won := false
	if tryLead {
		switch {
		case !active:
			cs.mode = modeClaim // cursor mode was turned off (or never on)
			cs.checkedAt = sent
		case lead.pos != nil:
			cs.takeLead(s, p.Owner, leadToken, lead, sent)
			won = true
		}
	}
	if doRead && cs.leader && cs.token == leaderTok {
		cs.win.apply(read)
	}
	return marked, s.cursorHandOut(c, p, cs.token, tableRecs), won, nil
}

// cursorHandOut fills claim c (p nil: no claim) with the table-path
// messages claimed and as many eligible cursor messages as fit, and
// remembers which claims hold table-path messages. cs.mu is held.
func (s *Store) cursorHandOut(c store.Claim, p *store.ClaimParams, leaderTok uuid.UUID, tableRecs []outbox.Record) store.Claim {
	cs := &s.cursor
	if p == nil || p.Limit < 1 {
		return c
	}
	recs := c.Records // from an earlier round trip of the same claim
	for _, r := range tableRecs {
		if cs.leader && cs.win.holds(r.AggregateType, r.AggregateID) {
			// An earlier message of the aggregate is still the leader's to
			// publish. It should not happen (the table path is entered
			// only behind a failure); if it does, the lease of this claim
			// runs out and a later claim takes it in order.
			s.cfg.Logger.Warn("pgstore: table-path message held back behind a cursor message of its aggregate",
				slog.Int64("seq", r.Seq), slog.String("aggregate_id", r.AggregateID))
			continue
		}
		recs = append(recs, r)
	}
	if len(tableRecs) > 0 {
		cs.rememberTableClaim(c.Token, time.Now().Add(p.Lease))
	}
	if cs.leader && cs.token == leaderTok && len(recs) < p.Limit {
		recs = append(recs, cs.win.handOut(p.Limit-len(recs), c.Token, p.Owner, time.Now().Add(p.Lease))...)
	}
	sortBySeq(recs)
	c.Records = recs
	return c
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
