package pgstore

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// claimFloor is where claims start their scan of the due messages, shared
// by every claim of a Store.
//
// Marking a message leaves index entries behind in outbox_messages_due (the
// versions it had while PENDING and IN_FLIGHT) until VACUUM removes them.
// A claim that scanned from the lowest seq would walk all of them, and visit
// the table for each, so that its cost grew with the messages marked since
// the last VACUUM rather than with the backlog. So a claim starts at the
// floor, below which every message is known to be sent, leased, not due, or
// waiting behind a dead letter:
//
//	floor = min(low, bound)
//
// where low is the lowest due seq at or above the old floor that does not
// wait behind a dead letter (queries/claim_floor.sql, in the claim's round
// trip) and bound is one more than the highest committed seq seen at least
// FullClaimInterval ago. The bound keeps the floor below every message of
// a transaction that is still committing: seqs are taken
// at INSERT, so a message may become visible after messages with a higher
// seq. Only a transaction that takes longer than FullClaimInterval from its
// INSERT to its commit can end up below the floor.
//
// A new Store does not know the floor yet. Before its first claim it seeds
// the floor with the seq of the message marked SENT last
// (queries/seed_floor.sql, a scan of live index entries), so that a relay
// restarted right after a large batch was marked does not walk that batch's
// dead entries in its first claims. The first claim also starts the probe
// below, which finds whatever is due below the seed; until it has, such
// messages wait (for the probe's duration, milliseconds on a vacuumed
// table). A seeded floor moves up with the claims' low before the bound is
// known: one that stayed at the seed for the first FullClaimInterval would
// have every claim walk the entries the claims before it marked, and while
// the first probe walks the dead entries below (on a single snapshot) those
// cannot be marked dead in the index, so each costs those claims a visit to
// the table. The price is that a message whose transaction commits after the claims
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
// message or reaches the floor, where a last piece without end looks at and
// above the floor as a whole probe does. It begins once the claim that
// started it has returned, so that a relay's first claim does not share the
// machine with its first piece. A new Store cannot know how much lies below
// its seed: one statement over many dead entries (each a visit to the
// table, which the walk prunes and dirties) would slow the claims beside it
// for as long as it runs, while the pieces and their rests leave the claims
// close to their usual latency (docs/performance-history.md holds the
// measurements behind these numbers). That walk marks the entries dead in
// the index, and each later probe, one statement, walks only what the
// claims marked since the one before. The price is the sweep's length: a
// message below the seed waits for it (tens of seconds behind millions of
// just-marked, unvacuumed rows; on a vacuumed table one piece per million
// seqs or so, in milliseconds). What lies below the seed is late commits,
// retries and the leases of a relay that stopped, which wait for their
// lease (30 s by default) anyway.
//
// The probe walks the dead index entries below the floor, so that the
// claims do not have to: with a long-running transaction anywhere in the
// database, those entries cannot even be marked dead, and a scan from seq 0
// visits the table for each of them. Until the floor is known (a new Store,
// or during its first FullClaimInterval), claims scan from seq 0
// themselves.
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
