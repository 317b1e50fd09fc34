package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/errtext"
	"github.com/outbox-dev/outbox/internal/failpoint"
	"github.com/outbox-dev/outbox/internal/rowheaders"
	"github.com/outbox-dev/outbox/store"
)

// DefaultFullClaimInterval is the default of Config.FullClaimInterval.
const DefaultFullClaimInterval = time.Second

// markSentFailpoint names the crash point inside the mark's transaction
// (internal/e2e/crash_test.go).
const markSentFailpoint = "pgstore-mark-sent-before-commit"

// Claim leases up to p.Limit due messages to p.Owner for p.Lease under a
// new random token, with the guarantees of [store.Queue]: only due messages,
// only the head of each aggregate, never a message another claim holds. It is
// one round trip and one short transaction; no transaction stays open
// afterwards. Records are in Seq order; a row whose headers are not a JSON
// object of string values is among them with Invalid set (see
// [store.Queue]). A Limit below 1 claims nothing; a Lease shorter than a
// millisecond is an error, since such a lease would expire at once.
//
// The claim scans the due messages in seq order from the claim floor (see
// Config.FullClaimInterval).
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	_, c, err := s.markAndClaim(ctx, uuid.Nil, nil, &p)
	if err != nil {
		return store.Claim{}, fmt.Errorf("pgstore: claim: %w", s.explain(err))
	}
	return c, nil
}

// MarkSent marks the messages SENT, with PublishedAt the database's now, if
// they are still IN_FLIGHT under token, and returns how many it changed. It
// is one statement in one round trip.
func (s *Store) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, _, err := s.markAndClaim(ctx, token, seqs, nil)
	if err != nil {
		return 0, fmt.Errorf("pgstore: mark sent: %w", s.explain(err))
	}
	return n, nil
}

// MarkSentAndClaim marks seqs SENT like [Store.MarkSent] and claims the
// next batch like [Store.Claim], in one transaction and one round trip
// ([store.MarkClaimer]). The claim sees the mark. With no seqs it is Claim.
func (s *Store) MarkSentAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p store.ClaimParams) (int64, store.Claim, error) {
	n, c, err := s.markAndClaim(ctx, token, seqs, &p)
	if err != nil {
		return 0, store.Claim{}, fmt.Errorf("pgstore: mark sent and claim: %w", s.explain(err))
	}
	return n, c, nil
}

// markAndClaim sends one pgx batch: the relay's session settings, the mark
// of seqs (if any), and the claim floor query and the claim (if p is not
// nil). A batch is one round trip and runs in one implicit transaction,
// committed at its end. In cursor mode it is cursorTrip.
func (s *Store) markAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams) (int64, store.Claim, error) {
	m, err := s.detectMode(ctx, p)
	if err != nil {
		return 0, store.Claim{}, err
	}
	if m == modeCursor {
		return s.cursorTrip(ctx, token, seqs, p)
	}
	var c store.Claim
	claiming := p != nil
	if claiming {
		if p.Lease < time.Millisecond {
			return 0, c, fmt.Errorf("pgstore: claim: ClaimParams.Lease %v must be at least 1ms", p.Lease)
		}
		claimToken, err := uuid.NewRandom()
		if err != nil {
			return 0, c, fmt.Errorf("new token: %w", err)
		}
		c.Token = claimToken
		claiming = p.Limit >= 1
	}
	marking := len(seqs) > 0
	if !marking && !claiming {
		return 0, c, nil
	}
	pause := marking && failpoint.Enabled && failpoint.Armed(markSentFailpoint)

	b := s.relayBatch()
	var marked int64
	if marking {
		b.Queue(s.q.markSent, seqs, token).Exec(func(tag pgconn.CommandTag) error {
			marked = tag.RowsAffected()
			return nil
		})
		if pause {
			b.Queue(s.q.failpointWatch)
			b.Queue(s.q.failpointPause)
		}
	}
	var scan *claimScan
	if claiming {
		scan = s.queueClaim(ctx, b, p, c.Token, &c.Records, false)
		defer scan.done()
	}
	// Now and then, whether cursor mode was turned on (EnableCursor): the
	// next claim then follows it.
	checking := claiming && s.cursor.claimModeCheckDue()
	var active bool
	if checking {
		b.Queue(s.q.cursorMode).QueryRow(func(row pgx.Row) error { return row.Scan(&active) })
	}
	br := s.pool.SendBatch(ctx, b)
	if pause {
		// The batch is on the wire: the server runs the UPDATE and then
		// pauses before the commit. A crash test kills the process now.
		failpoint.Announce(markSentFailpoint)
	}
	// The transaction commits at the batch's end: only then do the results
	// count.
	if err := br.Close(); err != nil {
		return 0, store.Claim{}, err
	}
	if claiming {
		s.floor.end(*scan)
	}
	if checking {
		s.cursor.claimModeChecked(active)
	}
	return marked, c, nil
}

// queueClaim queues the claim floor query and the claim (claim mode's, or
// the table path's in cursor mode) with token, and returns the floor scan
// to end once the batch committed. The claimed records land in recs, in seq
// order.
//
// With noFloor (the table path of cursor mode) the claim scans from seq 0
// and leaves the floor alone: there the scanned index holds only the table
// path's few messages, and its claims, once a second, would always run
// beside the probe below the floor.
func (s *Store) queueClaim(ctx context.Context, b *pgx.Batch, p *store.ClaimParams, token uuid.UUID, recs *[]outbox.Record, noFloor bool) *claimScan {
	sc := &claimScan{full: true, interval: -1}
	if !noFloor {
		if s.floor.needsSeed(s.fullClaimInterval()) {
			s.seedFloor(ctx)
		}
		*sc = s.floor.begin(s.fullClaimInterval())
		if sc.probe {
			sc.claimDone = make(chan struct{})
			go s.probeBelowFloor(*sc)
		}
	}
	b.Queue(s.q.claimFloor, sc.from, noEnd).QueryRow(func(row pgx.Row) error { return row.Scan(&sc.low, &sc.top) })
	start := s.rotation.get()
	b.Queue(s.q.claim, p.Limit, p.Owner, token, p.Lease.Milliseconds(), sc.from,
		claimSpan(p.Limit), start.aggregateType, start.aggregateID).Query(func(rows pgx.Rows) error {
		var last aggregateKey
		var lastPos int64
		got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (outbox.Record, error) {
			var pos *int64
			rec, err := scanRecordAnd(row, &pos)
			if err == nil && pos != nil && *pos > lastPos {
				last, lastPos = aggregateKey{rec.AggregateType, rec.AggregateID}, *pos
			}
			return rec, err
		})
		if err != nil {
			return err
		}
		if lastPos > 0 {
			s.rotation.advance(start, last)
		}
		sortBySeq(got)
		*recs = got
		sc.claimed, sc.counted = len(got), true
		return nil
	})
	return sc
}

// claimSpan is how many seqs past the first due message the claim's scan
// in seq order looks at before the scan by aggregate takes over
// (claim.sql): enough for a claim of limit when the backlog spreads over
// many aggregates, and a bounded walk when it does not.
func claimSpan(limit int) int64 {
	return int64(max(4*limit, 256))
}

// aggregateKey names an aggregate.
type aggregateKey struct{ aggregateType, aggregateID string }

// claimRotation is where the claim's scan by aggregate starts: after the
// last aggregate the previous one claimed from, so that successive claims
// go round the aggregates instead of always serving the first ones in key
// order (claim.sql). It only spreads the work: any start is correct.
type claimRotation struct {
	mu    sync.Mutex
	start aggregateKey // the zero key: from the first aggregate
}

func (r *claimRotation) get() aggregateKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start
}

// advance moves the start to last, the last aggregate a claim that started
// at from claimed from in its scan by aggregate, unless another claim moved
// the start meanwhile.
func (r *claimRotation) advance(from, last aggregateKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.start == from {
		r.start = last
	}
}

func sortBySeq(recs []outbox.Record) {
	slices.SortFunc(recs, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) })
}

// relayBatch returns a batch that starts with the relay's session settings
// (queries/relay_settings.sql); every statement of the relay travels in one,
// so that it runs, and is planned, with them.
func (s *Store) relayBatch() *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(s.q.relaySettings, s.synchronousCommit())
	return b
}

// synchronousCommit is the synchronous_commit of the relay's transactions.
func (s *Store) synchronousCommit() string {
	if s.cfg.SynchronousRelayCommits {
		return "on"
	}
	return "off"
}

func (s *Store) fullClaimInterval() time.Duration {
	if s.cfg.FullClaimInterval == 0 {
		return DefaultFullClaimInterval
	}
	return s.cfg.FullClaimInterval
}

// claimFloor is where claims start their scan of the due messages, shared
// by every claim of a Store.
//
// Marking a message leaves index entries behind in outbox_messages_due (the
// versions it had while PENDING and IN_FLIGHT) until VACUUM removes them.
// A claim that scanned from the lowest seq would walk all of them: after two
// million messages were marked, more than a second for the first such
// claim (which also has to visit the table for each entry), and tens of
// milliseconds for each later one. So a claim starts at the floor, below
// which every message is known to be sent, leased, not due, or waiting
// behind a dead letter:
//
//	floor = min(low, bound)
//
// where low is the lowest due seq at or above the old floor that does not
// wait behind a dead letter (queries/claim_floor.sql, in the claim's round
// trip) and bound is one more than the highest committed seq seen at least
// FullClaimInterval ago. The bound keeps the floor below
// every message of a transaction that is still committing: seqs are taken
// at INSERT, so a message may become visible after messages with a higher
// seq. Only a transaction that takes longer than FullClaimInterval from its
// INSERT to its commit can end up below the floor.
//
// A new Store does not know the floor yet. Before its first claim it seeds
// the floor with the seq of the message marked SENT last
// (queries/seed_floor.sql, a scan of live index entries), so that a relay
// restarted right after a large batch was marked does not walk that batch's
// dead entries in its first claims: the first claim after two million rows
// were marked took 1.4 s from seq 0. The first claim also starts the probe
// below, which finds whatever is due below the seed; until it has, such
// messages wait (for the probe's duration, milliseconds on a vacuumed
// table). A seeded floor moves up with the claims' low before the bound is
// known: one that stayed at the seed for the first FullClaimInterval would
// have every claim walk the entries the claims before it marked, and while
// the first probe walks two million dead entries (seconds, on a single
// snapshot) those cannot be marked dead in the index, so each costs a
// visit to the table: claims grew from 5 to 17 ms over that second. The
// price is that a message whose transaction commits after the claims
// passed its seq, in a Store's first FullClaimInterval, waits for the next
// probe, as a transaction slower than FullClaimInterval always does. With
// no SENT message there is no seed, and claims scan from seq 0 until the
// floor is known.
//
// Every FullClaimInterval a probe (probeBelowFloor) runs claim_floor.sql
// from seq 0, on a connection of its own while the claims go on, and finds
// what lies below the floor: such late commits, retries that became due,
// leases that expired, a replayed dead letter. The floor drops to its low,
// and the next claim takes them. A probe that found nothing due below the
// floor it began at leaves the floor where the claims beside it moved it
// (its low is as old as its snapshot).
//
// A Store's first probe walks in pieces (sweep): statements over a span of
// seqs each (65,536 at first; doubled after a piece under a millisecond,
// up to 1,048,576; halved after one over 10 ms), resting twenty times as
// long as each piece took (about 5% of a core), until a piece finds a due
// message or reaches the
// floor, where a last piece without end looks at and above the floor as a
// whole probe does. It begins once the claim that started it has returned,
// so that a relay's first claim does not share the machine with its first
// piece. A new Store cannot know how much lies below its seed:
// right after two million rows were marked in one statement, unvacuumed,
// one statement walked their dead entries for about a second (each a visit
// to the table, which the walk prunes and dirties), and the claims beside
// it, on two cores, took 1.4-1.9x their usual p99; in pieces resting three
// times as long as each took, 1.1-1.3x on one machine and 1.33-1.70x on a
// slower one; resting twenty times as long, 0.90-1.26x on that slower
// machine (docs/performance-history.md). That walk marks the entries dead in
// the index, and each later probe, one statement, walks only what the
// claims marked since the one before. The price is the sweep's length: a
// message below the seed waits for it (over those two million rows 7 s
// with the shorter rest and 38 s with this one, on the slower machine; on a
// vacuumed table one piece per million seqs or so, in milliseconds). What
// lies below the seed is late commits, retries and the leases of a relay
// that stopped, which wait for their lease (30 s by default) anyway.
//
// The probe walks the dead index entries
// below the floor, so that the claims do not have to: with a long-running
// transaction anywhere in the database, those entries cannot even be marked
// dead, and a scan from seq 0 visits the table for each of them. Until the
// floor is known (a new Store, or during its first FullClaimInterval),
// claims scan from seq 0 themselves.
//
// An idle relay needs no probe beside its claims: once the Store's claims
// have found nothing for a FullClaimInterval, a claim that is due to look
// below the floor scans from seq 0 itself, in its own round trip. Otherwise
// every poll of an idle relay (one a second by default) would start a probe
// on a second connection: two round trips a second where one does.
//
// The floor bounds only the scan for candidates. Whether a candidate is the
// head of its aggregate is still decided against every earlier unsent
// message (the NOT EXISTS in queries/claim.sql), so order per aggregate
// does not depend on it. Races between concurrent claims only make a floor
// a little lower or older than it could be.
type claimFloor struct {
	mu       sync.Mutex
	seq      int64     // claims start here
	bound    int64     // 0 until known; the floor never passes it
	cand     int64     // highest committed seq seen at candAt; becomes bound
	candAt   time.Time // zero when there is no candidate
	lastFull time.Time // when the last probe (or full claim) started
	probing  bool      // a probe runs
	fullEnds uint64    // counts the probes and full claims that set the floor from below
	seeded   bool      // seedFloor ran (successfully) or a claim moved the floor
	seeding  bool      // seedFloor runs
	swept    bool      // a probe (the first, in pieces) ended without error

	// emptySince is when the Store's claims began to find nothing; zero
	// before the first claim and after one that found messages.
	emptySince time.Time
}

// needsSeed reports whether the floor should be seeded before a claim, and
// if so marks the seeding as running: only the first claims of a Store seed,
// one at a time.
func (f *claimFloor) needsSeed(interval time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if interval < 0 || f.seeded || f.seeding || f.seq != 0 {
		return false
	}
	f.seeding = true
	return true
}

// seedFloor seeds the claim floor (see claimFloor). A failure only means
// that the claims scan from seq 0 until the floor is known; the next claim
// tries again.
func (s *Store) seedFloor(ctx context.Context) {
	var seed *int64
	b := s.relayBatch()
	b.Queue(s.q.seedFloor).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&seed)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	err := s.pool.SendBatch(ctx, b).Close()
	s.floor.mu.Lock()
	defer s.floor.mu.Unlock()
	s.floor.seeding = false
	if err != nil {
		s.cfg.Logger.Debug("pgstore: seeding the claim floor failed", slog.String("schema", s.cfg.Schema), slog.Any("error", err))
		return
	}
	s.floor.seeded = true
	if seed != nil && s.floor.seq == 0 {
		s.floor.seq = *seed
	}
}

// claimScan is one claim's view of the floor.
type claimScan struct {
	gen      uint64 // claimFloor.fullEnds when the scan began
	from     int64  // the scan starts here; 0 for a full claim
	below    int64  // for a full scan: the floor when it began (0: none)
	full     bool   // from seq 0 (a full claim or the probe)
	probe    bool   // start the probe below the floor too
	claimed  int    // messages the claim took, once counted
	counted  bool   // claimed is set: a claim, not the probe
	at       time.Time
	interval time.Duration
	low, top *int64 // from claim_floor.sql
	// claimDone is closed when the claim that started the probe has
	// returned (done); a Store's first probe, the sweep, waits for it.
	claimDone chan struct{}
}

// done tells a probe this claim started that the claim has returned.
func (sc *claimScan) done() {
	if sc.claimDone != nil {
		close(sc.claimDone)
		sc.claimDone = nil
	}
}

// begin returns where a claim starting now scans from.
func (f *claimFloor) begin(interval time.Duration) claimScan {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	sc := claimScan{at: now, interval: interval, gen: f.fullEnds}
	if interval < 0 || f.seq == 0 {
		sc.full = true
		f.lastFull = now
		return sc
	}
	sc.from = f.seq
	if !f.probing && now.Sub(f.lastFull) >= interval {
		if !f.emptySince.IsZero() && now.Sub(f.emptySince) >= interval {
			// Idle: this claim looks below the floor itself.
			sc.full, sc.from, sc.below, f.lastFull = true, 0, f.seq, now
			return sc
		}
		f.probing, f.lastFull, sc.probe = true, now, true
	}
	return sc
}

// probeTimeout bounds one probe below the floor (each piece of the sweep).
const probeTimeout = time.Minute

// noEnd is claim_floor.sql's end for a scan that has none.
const noEnd = int64(math.MaxInt64)

// The sweep: how a Store's first probe walks below the floor (see
// claimFloor). A piece covers sweepPiece seqs at first; the span doubles
// after a piece that took under sweepFast, up to sweepPieceMax, and halves
// after one that took over sweepSlow. After each piece the sweep rests
// sweepRest times as long as the piece took.
const (
	sweepPiece    = int64(1 << 16)
	sweepPieceMax = int64(1 << 20)
	sweepFast     = time.Millisecond
	sweepSlow     = 10 * time.Millisecond
	sweepRest     = 20
)

// probeBelowFloor looks for the lowest due message from seq 0 and moves the
// floor to it (see claimFloor). It runs in a goroutine of its own, one at a
// time per Store; a failure only delays the next probe.
func (s *Store) probeBelowFloor(claim claimScan) {
	sc := claimScan{full: true, below: claim.from, at: claim.at, interval: claim.interval}
	s.floor.mu.Lock()
	swept := s.floor.swept
	s.floor.mu.Unlock()
	var err error
	if swept {
		err = s.probePiece(0, noEnd, &sc.low, &sc.top)
	} else {
		if claim.claimDone != nil {
			<-claim.claimDone
		}
		err = s.sweep(&sc)
	}
	if err != nil {
		s.cfg.Logger.Debug("pgstore: probe below the claim floor failed", slog.String("schema", s.cfg.Schema), slog.Any("error", err))
	} else {
		s.floor.end(sc)
	}
	s.floor.mu.Lock()
	s.floor.probing = false
	s.floor.swept = s.floor.swept || err == nil
	s.floor.mu.Unlock()
}

// probePiece runs claim_floor.sql over the seqs in [from, to).
func (s *Store) probePiece(from, to int64, low, top **int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if s.onProbePiece != nil {
		s.onProbePiece(from, to)
	}
	b := s.relayBatch()
	b.Queue(s.q.claimFloor, from, to).QueryRow(func(row pgx.Row) error { return row.Scan(low, top) })
	return s.pool.SendBatch(ctx, b).Close()
}

// sweep is a Store's first probe: the walk from seq 0 in pieces, each a
// statement of its own, with a rest after each (see claimFloor). It ends at
// the first piece that finds a due message, or with a piece without end
// once it reaches the floor, which looks at and above the floor as the
// whole probe does. sc.below is the floor when the last piece began.
func (s *Store) sweep(sc *claimScan) error {
	span := s.sweepPiece
	if span <= 0 {
		span = sweepPiece
	}
	for from := int64(0); ; {
		s.floor.mu.Lock()
		floor := s.floor.seq
		s.floor.mu.Unlock()
		// What a piece finds lies below the floor it compares with (a
		// bounded piece ends below it), so end drops the floor to it.
		to := from + span
		if to >= floor || to < from {
			to = noEnd
		}
		sc.below = floor
		var low, top *int64
		start := time.Now()
		if err := s.probePiece(from, to, &low, &top); err != nil {
			return err
		}
		took := time.Since(start)
		if sc.top == nil {
			sc.top = top
		}
		if low != nil || to == noEnd {
			sc.low = low
			return nil
		}
		from = to
		switch {
		case took < sweepFast && span < sweepPieceMax:
			span *= 2
		case took > sweepSlow && span > sweepPiece:
			span /= 2
		}
		time.Sleep(sweepRest * took)
	}
}

// end moves the floor after a committed claim.
func (f *claimFloor) end(sc claimScan) {
	if sc.interval < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !sc.counted:
	case sc.claimed > 0:
		f.emptySince = time.Time{}
	case f.emptySince.IsZero():
		f.emptySince = sc.at
	}
	if sc.top != nil {
		switch {
		case f.candAt.IsZero():
			f.cand, f.candAt = *sc.top, sc.at
		case sc.at.Sub(f.candAt) >= sc.interval:
			f.bound = max(f.bound, f.cand+1)
			f.cand, f.candAt = *sc.top, sc.at
		}
	}
	var next int64
	switch {
	case f.bound != 0 && sc.low != nil:
		next = min(f.bound, *sc.low)
	case f.bound != 0:
		next = f.bound
	case f.seq == 0 || sc.low == nil:
		// An unseeded floor waits for the bound (its claims scan from seq
		// 0 until then); a seeded one has no due message to move to.
		return
	default:
		// A seeded floor moves with the claims before the bound is known
		// (see claimFloor: a message of a transaction that commits behind
		// it waits for the next look below the floor).
		next = *sc.low
	}
	switch {
	case sc.full && sc.below != 0 && (sc.low == nil || *sc.low >= sc.below):
		// A scan from seq 0 that found nothing due below the floor it
		// began at: its low is as old as the scan, and the claims since
		// may have moved the floor past it. Dropping the floor back there
		// would have the next claim walk what they marked meanwhile. The
		// claims that ran beside it may raise the floor as usual. (A
		// message that became due below the floor in the moment between
		// a claim's read and the scan's waits for the next probe, which
		// finds it below the floor it begins at: later, never lost.)
		f.seq = max(f.seq, next)
	case sc.full:
		f.seq = next
		f.fullEnds++
	case f.fullEnds != sc.gen:
		// A probe (or full claim) ended while this claim ran: it looked
		// below the floor this claim started from, so this claim may only
		// lower the floor, never raise it past what the probe found.
		f.seq = min(f.seq, next)
	case next > f.seq:
		f.seq = next
	}
}

// MarkFailed records failed publishes, if the messages are still IN_FLIGHT
// under token, and returns how many it changed. Each message becomes FAILED
// (or DEAD_LETTER when Dead) with NextAttemptAt = now + Delay (a negative
// Delay counts as zero), LastError = Error (cut to 4,000 bytes), and
// Attempts one higher when CountAttempt. If a Seq appears twice, the last
// Failure for it wins.
//
// Each failure that counts an attempt or dead-letters the message is also
// recorded in the table outbox_attempts (attempt number, error, time), in
// the same statement, for the dead-letter tools of package ops. It is one
// round trip.
func (s *Store) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	if len(failures) == 0 {
		return 0, nil
	}
	f := newFailureArgs(failures)
	if s.cursor.inCursorMode() {
		n, err := s.cursorMarkFailed(ctx, token, f)
		if err != nil {
			return 0, fmt.Errorf("pgstore: mark failed: %w", s.explain(err))
		}
		return n, nil
	}
	var changed int64
	b := s.relayBatch()
	b.Queue(s.q.markFailed, token, f.seqs, f.errs, f.delays, f.counts, f.deads, f.queued, (*uuid.UUID)(nil)).
		QueryRow(func(row pgx.Row) error { return row.Scan(&changed) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("pgstore: mark failed: %w", s.explain(err))
	}
	return changed, nil
}

// failureArgs are the column arrays of mark_failed.sql: one element per
// message, the last Failure of a seq winning.
type failureArgs struct {
	seqs   []int64
	errs   []string
	delays []int64
	counts []bool
	deads  []bool
	queued []bool // a cursor message (cursor mode); false for claimed ones
}

func newFailureArgs(failures []store.Failure) failureArgs {
	visited := make(map[int64]bool, len(failures))
	var f failureArgs
	for i := len(failures) - 1; i >= 0; i-- {
		x := failures[i]
		if visited[x.Seq] {
			continue
		}
		visited[x.Seq] = true
		f.seqs = append(f.seqs, x.Seq)
		f.errs = append(f.errs, errtext.Clean(x.Error))
		f.delays = append(f.delays, max(x.Delay, 0).Milliseconds())
		f.counts = append(f.counts, x.CountAttempt)
		f.deads = append(f.deads, x.Dead)
		f.queued = append(f.queued, false)
	}
	return f
}

// Release gives the messages back, due at once and without counting an
// attempt (PENDING, or FAILED if they had failed before), if they are still
// IN_FLIGHT under token. It returns how many it changed. In cursor mode a
// cursor message goes back to the leader's window instead.
func (s *Store) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	if s.cursor.inCursorMode() {
		n, err := s.cursorRelease(ctx, token, seqs)
		if err != nil {
			return n, fmt.Errorf("pgstore: release: %w", s.explain(err))
		}
		return n, nil
	}
	n, err := s.releaseTable(ctx, token, seqs)
	if err != nil {
		return 0, fmt.Errorf("pgstore: release: %w", s.explain(err))
	}
	return n, nil
}

// releaseTable releases claimed messages in the table (release.sql).
func (s *Store) releaseTable(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	var released int64
	b := s.relayBatch()
	b.Queue(s.q.release, seqs, token).Exec(func(tag pgconn.CommandTag) error {
		released = tag.RowsAffected()
		return nil
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	return released, nil
}

// Get returns the message with the event id, whatever its status. It
// returns an error wrapping [ErrNotFound] when there is none. A row whose
// headers are not a JSON object of string values (written before migration
// 015) is returned with Invalid set and no Headers, not as an error.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (outbox.Record, error) {
	rows, err := s.pool.Query(ctx, s.q.get, id)
	if err != nil {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, s.explain(err))
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanRecord)
	if errors.Is(err, pgx.ErrNoRows) {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, s.explain(err))
	}
	return rec, nil
}

// Counts returns the number of messages in each status. Every status is in
// the map, with 0 when no message has it. It reads the whole table.
func (s *Store) Counts(ctx context.Context) (map[outbox.Status]int64, error) {
	counts := map[outbox.Status]int64{
		outbox.StatusPending:    0,
		outbox.StatusInFlight:   0,
		outbox.StatusSent:       0,
		outbox.StatusFailed:     0,
		outbox.StatusDeadLetter: 0,
	}
	rows, err := s.pool.Query(ctx, s.q.counts)
	if err != nil {
		return nil, fmt.Errorf("pgstore: counts: %w", s.explain(err))
	}
	var (
		status string
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		counts[outbox.Status(status)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: counts: %w", s.explain(err))
	}
	return counts, nil
}

// scanRecord scans the columns that claim.sql returns and get.sql selects,
// in that order. A row whose headers are not a JSON object of string values
// is returned with Invalid set and no Headers, not as an error, so that it
// fails no read of the rows beside it (see outbox.Record.Invalid).
func scanRecord(row pgx.CollectableRow) (outbox.Record, error) {
	return scanRecordAnd(row)
}

// scanRecordAnd scans a record followed by the columns extra points to.
func scanRecordAnd(row pgx.CollectableRow, extra ...any) (outbox.Record, error) {
	var (
		r                                            outbox.Record
		id                                           pgtype.UUID // a uuid.UUID would be scanned through a string pgx formats and it parses
		aggregateType, aggregateID, eventType, ctype *string
		eventVersion                                 *int32
		status                                       string
		leaseOwner                                   *string
		leaseExpiresAt, publishedAt                  *time.Time
		headers                                      []byte // the JSON text, decoded by rowheaders
	)
	dest := append([]any{
		&r.Seq, &id, &aggregateType, &aggregateID, &eventType, &eventVersion,
		&r.Topic, &r.Payload, &ctype, &headers, &r.CorrelationID, &r.CausationID,
		&r.TraceParent, &r.CreatedAt, &status, &r.Attempts, &r.NextAttemptAt, &r.LastError,
		&leaseOwner, &leaseExpiresAt, &publishedAt,
	}, extra...)
	err := row.Scan(dest...)
	if err != nil {
		return outbox.Record{}, err
	}
	r.ID = id.Bytes
	r.AggregateType = deref(aggregateType)
	r.AggregateID = deref(aggregateID)
	r.EventType = deref(eventType)
	r.ContentType = deref(ctype)
	if eventVersion != nil {
		r.EventVersion = int(*eventVersion)
	}
	r.Status = outbox.Status(status)
	r.LeaseOwner = deref(leaseOwner)
	if leaseExpiresAt != nil {
		r.LeaseExpiresAt = *leaseExpiresAt
	}
	if publishedAt != nil {
		r.PublishedAt = *publishedAt
	}
	r.Headers, r.Invalid = rowheaders.Decode(headers)
	return r, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
