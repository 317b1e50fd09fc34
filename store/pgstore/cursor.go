package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/failpoint"
	"github.com/outbox-dev/outbox/internal/rowheaders"
	"github.com/outbox-dev/outbox/store"
)

// Cursor mode
//
// In the default claim mode every message is claimed (an UPDATE) and
// marked SENT (another UPDATE): two new row versions, their index entries
// and their WAL for every message, which on a small machine cost the
// writers a third of their throughput. In cursor mode ([EnableCursor]) the
// outbox is read like a log: one relay, the leader, reads the QUEUED
// messages in seq order, publishes them, and keeps its place in the single
// row of outbox_cursor. A message's row is written only if its publish
// fails. The rest of the contract is the same: the relay's loop, its
// batches, retries and dead letters do not change, and Store implements
// store.Queue in both modes.
//
// # Not passing a message that is still committing
//
// seqs are taken at INSERT but become visible at COMMIT, so a reader can
// see seq 11 while seq 10 is still uncommitted. The leader therefore keeps
// a window (cursorwin.go) over the seqs between its saved position and the
// highest seq it read, with the gaps it saw there, and reads the gaps again
// with every read. A gap is closed (its seqs will never commit: the
// transaction rolled back, or the seq was never used) only when
//
//  1. a read's snapshot has an xmin at least the bound of the read that
//     found the gap: a transaction id that read took after its snapshot
//     (queries/cursor_read.sql). Every seq of the gap was taken before that
//     snapshot (a higher seq was already visible in it), by a transaction
//     that had an id then, because enqueue.sql takes the transaction id
//     before the seqs. Such a transaction was either finished then, so its
//     rows were visible, or running, so its id was below the bound; once a
//     snapshot's xmin reached the bound, it has ended (every transaction
//     running in that snapshot has an id at or above xmin), and a read after
//     that sees its rows if it committed. The snapshot's own xmax is not
//     such a bound: it is the newest ended id plus one, and a transaction
//     running with a newer id is counted neither there nor in xmin.
//  2. at least cursorGapGrace passed since the gap was found, for writers
//     that insert rows in other ways than Enqueue (their first INSERT may
//     take a seq a few microseconds before the transaction gets its id).
//
// The position only moves over handled messages and closed gaps. A long
// transaction anywhere on the server holds xmin back, and with it the
// saved position, but not publishing: messages are published as soon as
// they are visible.
//
// # What a new leader publishes again
//
// With the position, a save records the leader's head and the ranges at or
// below it that it has not handled (open records and gaps, migration 011);
// every other seq above the position was handled. A new leader starts
// with those ranges as gaps, so it publishes again only what its
// predecessor had not had acknowledged at its last save: what was in
// flight, and what was acknowledged in the last CursorSaveInterval. A save
// is due when the position moved or anything was handled since the last
// one.
//
// # One leader, and the table path
//
// The leader holds a lease on the cursor row (its token fences every write
// it makes, as claims are fenced): Config.LeaderLease, 5 s by default, of
// its own and not the claims' lease. Its saves renew it, and so does
// Store.KeepLease, which relay.Relay runs for as long as it runs, every
// third of the lease whatever the relay does: an idle leader, or one whose
// publishes wait for a broker that does not answer, keeps the lead. Other
// relays are standbys: they try to lead at least five times per lease and
// take over when the lease has expired (a leader that hangs, is stopped or
// cut off renews nothing), or at once when the leader resigned
// (relay.Relay.Stop). A leader that resumes after its lease ran out finds
// that before anything it does (checkLease), and a write already under way
// changes nothing once another relay took the lease (its token is not the
// cursor row's): it saves no position, moves no message to the table path,
// and its acknowledgements in memory are dropped with its window. The next
// leader publishes again what the old one had not saved as handled, and
// the old one's publishes that were in flight when it hung may still reach
// the broker: duplicates, which at-least-once allows; each of those was
// published after the earlier messages of its aggregate were acknowledged,
// so the first copies stay in order. Any relay, leader
// or standby, also runs the table path: the claim of claim mode, over the
// messages that are not QUEUED (PENDING, FAILED, IN_FLIGHT, whatever was
// in the table before cursor mode was turned on, and replayed dead
// letters). A cursor message whose publish failed becomes FAILED (or
// DEAD_LETTER) and enters the table path, which retries it; the later
// messages of its aggregate follow it there as PENDING, and so does every
// message read later while an earlier message of its aggregate is in the
// table path. Order per aggregate holds across both paths.

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

// cursorGapGrace is the shortest time a gap stays open (see above).
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

// cursorRead builds and reads one leader read (queries/cursor_read.sql).
func (s *Store) queueCursorRead(b *pgx.Batch, from int64, limit int, gapLo, gapHi []int64, gapLimit int, read *cursorRead) {
	b.Queue(s.q.cursorRead, from, limit, gapLo, gapHi, gapLimit).Query(func(rows pgx.Rows) error {
		read.gapsComplete = true
		nGap := 0
		var (
			snapshot   bool
			xmin, xmax *string
			gap        *bool
			status     *string
			headers    *string
			version    *int32
			created    *time.Time
			seq        *int64
			id         pgtype.UUID // not *uuid.UUID: see scanRecordAnd
			blocked    *bool
			at, ai, et *string
			topic, ct  *string
			cor, cau   *string
			tp         *string
		)
		for rows.Next() {
			var row cursorRow
			r := &row.rec
			if err := rows.Scan(&snapshot, &xmin, &xmax, &gap, &seq, &status, &id, &at, &ai, &et, &version, &topic,
				&r.Payload, &ct, &headers, &cor, &cau, &tp, &created, &blocked); err != nil {
				return err
			}
			if snapshot {
				var err error
				if read.xmin, err = strconv.ParseUint(deref(xmin), 10, 64); err != nil {
					return fmt.Errorf("snapshot xmin %q: %w", deref(xmin), err)
				}
				if read.xmax, err = strconv.ParseUint(deref(xmax), 10, 64); err != nil {
					return fmt.Errorf("gap bound %q: %w", deref(xmax), err)
				}
				continue
			}
			r.Seq, r.ID = deref(seq), id.Bytes
			r.AggregateType, r.AggregateID, r.EventType = deref(at), deref(ai), deref(et)
			r.EventVersion = int(deref(version))
			r.Topic, r.ContentType = deref(topic), deref(ct)
			r.CorrelationID, r.CausationID, r.TraceParent = deref(cor), deref(cau), deref(tp)
			r.CreatedAt = deref(created)
			r.Status = outbox.StatusPending
			r.NextAttemptAt = r.CreatedAt
			if headers != nil {
				// A row whose headers break the rule is handed out with
				// Invalid set, for the relay to dead-letter: it must not
				// fail the read of the rows beside it.
				r.Headers, r.Invalid = rowheaders.Decode([]byte(*headers))
			}
			row.queued = deref(status) == statusQueued
			row.blocked = deref(blocked)
			if deref(gap) {
				read.gapRows = append(read.gapRows, row)
				nGap++
			} else {
				read.headRows = append(read.headRows, row)
			}
		}
		if nGap >= gapLimit {
			read.gapsComplete = false
		}
		read.returned = time.Now()
		return rows.Err()
	})
}

// statusQueued is the stored status of a cursor message (migration 010).
const statusQueued = "QUEUED"

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
		cs.lease = s.leaderLease()
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

// cursorSaveArgs is what a save writes (queries/cursor_save.sql): the
// position, and the head and unhandled ranges (head nil: too many ranges,
// keep what was saved).
type cursorSaveArgs struct {
	pos     int64
	head    *int64
	lo, hi  []int64
	handled uint64 // the window's handled count then
}

// saveArgs returns what a save of the window writes now.
func (w *cursorWindow) saveArgs() cursorSaveArgs {
	a := cursorSaveArgs{pos: w.pos, handled: w.handled}
	if head, lo, hi, ok := w.unhandled(maxSavedRanges); ok {
		a.head, a.lo, a.hi = &head, lo, hi
	}
	return a
}

// ackLeading acknowledges seqs under token in the window, if the store
// still leads under leaderTok, and returns how many. cs.mu is held.
func (cs *cursorState) ackLeading(leaderTok, token uuid.UUID, seqs []int64) int64 {
	if len(seqs) == 0 || !cs.leader || cs.token != leaderTok {
		return 0
	}
	return cs.win.ack(token, seqs)
}

// checkLease gives up the lead if nothing renewed its lease in time:
// another relay may lead by now (a tenth of the lease before it ends, so
// that the database, which counts from a later moment, has not let anyone
// take over yet). cs.mu is held.
func (cs *cursorState) checkLease(s *Store, now time.Time) {
	if cs.leader && now.After(cs.leaseUntil.Add(-cs.lease/10)) {
		s.cfg.Logger.Warn("pgstore: cursor lease not renewed in time; no longer leading", slog.String("schema", s.cfg.Schema))
		cs.dropLead()
	}
}

// dropLead forgets the lead and everything in the window: claims that hold
// cursor messages are fenced from now on (their marks change nothing).
// cs.mu is held.
func (cs *cursorState) dropLead() {
	cs.leader = false
	cs.token = uuid.Nil
	cs.win = nil
	cs.checkedAt = time.Time{}
}

// cursorMarkFailed is MarkFailed in cursor mode: failures of cursor
// messages move them (and the later messages of their aggregates) to the
// table path; failures of table-path messages are recorded as in claim
// mode. One round trip.
func (s *Store) cursorMarkFailed(ctx context.Context, token uuid.UUID, f failureArgs) (int64, error) {
	cs := &s.cursor
	cs.db.Lock()
	defer cs.db.Unlock()

	cs.mu.Lock()
	var (
		mine, behind []int64
		leaderTok    = cs.token
		save         cursorSaveArgs
	)
	if cs.leader {
		mine, behind = cs.win.failing(token, f.seqs)
		save = cs.win.saveArgs()
	}
	table := cs.holdsTable(token)
	cs.mu.Unlock()
	for i, seq := range f.seqs {
		f.queued[i] = containsInt64(mine, seq)
	}
	if len(mine) == 0 && !table {
		return 0, nil
	}

	var saveTag pgconn.CommandTag
	b := s.relayBatch()
	if len(mine) > 0 {
		// Fences the cursor's writes below (the row stays locked until the
		// round trip commits).
		b.Queue(s.q.cursorSave, leaderTok, save.pos, cs.lease.Milliseconds(), save.head, save.lo, save.hi).
			Exec(func(t pgconn.CommandTag) error { saveTag = t; return nil })
	}
	var changed int64
	b.Queue(s.q.markFailed, token, f.seqs, f.errs, f.delays, f.counts, f.deads, f.queued, nullToken(leaderTok, len(mine) > 0)).
		QueryRow(func(row pgx.Row) error { return row.Scan(&changed) })
	if len(behind) > 0 {
		b.Queue(s.q.cursorTable, leaderTok, behind)
	}
	sent := time.Now()
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(mine) > 0 {
		if saveTag.RowsAffected() == 0 {
			cs.dropLead()
			return changed, nil
		}
		cs.saved, cs.savedAt, cs.leaseUntil = max(cs.saved, save.pos), sent, sent.Add(cs.lease)
		cs.savedHandled = save.handled
		if cs.leader && cs.token == leaderTok {
			cs.win.failed(token, mine, behind)
		}
	}
	// The failed messages are the table path's now, maybe due at once.
	cs.tableMore = true
	return changed, nil
}

// cursorRelease is Release in cursor mode: cursor messages go back to the
// leader's window, table-path ones to the table.
func (s *Store) cursorRelease(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	cs := &s.cursor
	cs.mu.Lock()
	var n int64
	if cs.leader {
		n = cs.win.release(token, seqs)
	}
	table := cs.holdsTable(token)
	cs.mu.Unlock()
	if !table {
		return n, nil
	}
	m, err := s.releaseTable(ctx, token, seqs)
	cs.mu.Lock()
	cs.tableMore = true // due at once
	cs.mu.Unlock()
	return n + m, err
}

// Resign implements [store.Resigner]: a leader saves its position and gives
// up its lease, so that a standby leads at once. Messages it still holds
// unacknowledged are read again by the next leader. In claim mode, or on a
// standby, it does nothing.
func (s *Store) Resign(ctx context.Context) error {
	cs := &s.cursor
	cs.db.Lock()
	defer cs.db.Unlock()
	cs.mu.Lock()
	if !cs.leader {
		cs.mu.Unlock()
		return nil
	}
	tok, save := cs.token, cs.win.saveArgs()
	cs.dropLead()
	cs.mu.Unlock()
	b := s.relayBatch()
	b.Queue(s.q.cursorResign, tok, save.pos, save.head, save.lo, save.hi)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgstore: resign the cursor: %w", err)
	}
	s.cfg.Logger.Info("pgstore: resigned the cursor", slog.String("schema", s.cfg.Schema), slog.Int64("position", save.pos))
	return nil
}

// MarksInMemory implements [store.MemoryMarker]: true while the store leads
// the cursor, whose MarkSent of cursor messages is answered from memory.
func (s *Store) MarksInMemory() bool {
	leading, _ := s.Leading()
	return leading
}

// Leading reports whether this store leads the outbox's cursor (cursor
// mode), and the position it has reached: every QUEUED message at or below
// it is published or in the table path.
func (s *Store) Leading() (bool, int64) {
	cs := &s.cursor
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.checkLease(s, time.Now())
	if !cs.leader {
		return false, 0
	}
	return true, cs.win.pos
}

// detectMode reads whether the outbox is in cursor mode, once, before the
// store's first claim or mark. An outbox whose migrations predate cursor
// mode is in claim mode. Before a claim (p not nil) it also tries to lead,
// in the same round trip, so that a new relay's first claim is one round
// trip shorter.
func (s *Store) detectMode(ctx context.Context, p *store.ClaimParams) (mode, error) {
	cs := &s.cursor
	cs.mu.Lock()
	m := cs.mode
	cs.mu.Unlock()
	if m != modeUnknown {
		return m, nil // claims in claim mode check again now and then
	}
	cs.db.Lock()
	defer cs.db.Unlock()
	var (
		active bool
		won    leadResult
		try    = p != nil && p.Limit >= 1 && p.Lease >= time.Millisecond
		token  = uuid.New()
		lease  time.Duration
	)
	b := s.relayBatch()
	if try {
		lease = s.leaderLease()
		b.Queue(s.q.cursorState, p.Owner, token, lease.Milliseconds(), true).QueryRow(func(row pgx.Row) error {
			return won.scan(row, &active)
		})
	} else {
		b.Queue(s.q.cursorMode).QueryRow(func(row pgx.Row) error { return row.Scan(&active) })
	}
	sent := time.Now()
	err := s.pool.SendBatch(ctx, b).Close()
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: before migration 010
		active = false
	case errors.As(err, &pgErr) && pgErr.Code == "42703": // undefined_column: before migration 011
		if err := s.pool.QueryRow(ctx, s.q.cursorMode).Scan(&active); err != nil {
			return modeUnknown, fmt.Errorf("read the relay mode: %w", err)
		}
		if active {
			return modeUnknown, fmt.Errorf("read the relay mode: %w: %s.outbox_cursor is older than migration 011; run Migrate ('outbox migrate')",
				ErrCursorMode, s.cfg.Schema)
		}
	case err != nil:
		return modeUnknown, fmt.Errorf("read the relay mode: %w", err)
	}
	if active {
		s.warnUnmigrated(ctx)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mode != modeUnknown {
		return cs.mode, nil
	}
	cs.checkedAt = time.Now()
	if !active {
		cs.mode = modeClaim
		return cs.mode, nil
	}
	s.cfg.Logger.Info("pgstore: the outbox is in cursor mode", slog.String("schema", s.cfg.Schema))
	cs.mode = modeCursor
	if try {
		cs.lease = lease
		if cs.owner == "" {
			cs.owner = p.Owner
		}
	}
	if won.pos != nil {
		cs.takeLead(s, p.Owner, token, won, sent)
	} else {
		cs.checkedAt = time.Time{} // a standby tries to lead at its first claim
	}
	return cs.mode, nil
}

// warnUnmigrated logs a warning when the outbox, in cursor mode, lacks
// migration 012 (an outbox put in cursor mode by an older binary, whose
// relays now run a newer one before 'outbox migrate'): the relay runs, but
// a writer that inserts with its own SQL can lose a message. Once per mode
// detection, so once per Store in cursor mode.
func (s *Store) warnUnmigrated(ctx context.Context) {
	var missing int
	if err := s.pool.QueryRow(ctx, s.q.cursorMigrated).Scan(&missing); err != nil {
		s.cfg.Logger.Warn("pgstore: could not check the outbox's migrations for cursor mode", slog.String("schema", s.cfg.Schema), slog.Any("error", err))
		return
	}
	if missing == 12 {
		s.cfg.Logger.Warn("pgstore: the outbox is in cursor mode without migration 012: a transaction that inserts into outbox_messages with its own SQL, not Enqueue, can lose its message; run Migrate ('outbox migrate')",
			slog.String("schema", s.cfg.Schema))
	}
}

// leadResult is what an attempt to lead returned (queries/cursor_state.sql):
// the position to start from (nil: another relay leads), and what the last
// leader saved as handled above it.
type leadResult struct {
	pos, head *int64
	lo, hi    []int64
}

func (r *leadResult) scan(row pgx.Row, active *bool) error {
	return row.Scan(active, &r.pos, &r.head, &r.lo, &r.hi)
}

// takeLead makes the store the leader under token from what it won at
// sent. cs.mu is held.
func (cs *cursorState) takeLead(s *Store, owner string, token uuid.UUID, won leadResult, sent time.Time) {
	cs.leader, cs.token = true, token
	cs.win = newCursorWindow(*won.pos, cursorGapGrace)
	if won.head != nil {
		// What the predecessor handled above its position is not published
		// again.
		cs.win.restore(*won.head, won.lo, won.hi, sent)
	}
	cs.saved, cs.savedAt, cs.leaseUntil, cs.savedHandled = *won.pos, sent, sent.Add(cs.lease), 0
	s.cfg.Logger.Info("pgstore: leading the cursor", slog.String("schema", s.cfg.Schema),
		slog.String("owner", owner), slog.Int64("position", *won.pos),
		slog.Int64("handled_up_to", cs.win.head), slog.Int("unhandled_ranges", len(cs.win.gaps)))
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

// standbyInterval is how often a standby tries to lead: as often as the
// full claim, so that a relay that resigned is followed within about that,
// and at least five times per leader's lease, so that a hung leader is
// followed within about its lease.
func (s *Store) standbyInterval() time.Duration {
	return min(max(s.fullClaimInterval(), 100*time.Millisecond), s.leaderLease()/5)
}

// inCursorMode reports whether the store follows cursor mode.
func (cs *cursorState) inCursorMode() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mode == modeCursor
}

// standby reports whether the store is in cursor mode without leading.
func (cs *cursorState) standby() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mode == modeCursor && !cs.leader
}

// claimModeCheckDue reports whether a claim in claim mode should check the
// mode again, and if so counts the check as made.
func (cs *cursorState) claimModeCheckDue() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mode != modeClaim || time.Since(cs.checkedAt) < modeCheckInterval {
		return false
	}
	cs.checkedAt = time.Now()
	return true
}

// claimModeChecked takes the result of such a check.
func (cs *cursorState) claimModeChecked(active bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if active && cs.mode == modeClaim {
		cs.mode = modeCursor
		cs.checkedAt = time.Time{}
	}
}

func nullToken(t uuid.UUID, valid bool) *uuid.UUID {
	if !valid {
		return nil
	}
	return &t
}

func containsInt64(xs []int64, x int64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
