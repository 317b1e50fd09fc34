package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
)

// floorFixture is a migrated store whose claims use a short
// FullClaimInterval, so that the floor moves within a test's time.
type floorFixture struct {
	t     *testing.T
	ctx   context.Context
	store *Store
	p     store.ClaimParams
	n     int
}

func newFloorFixture(t *testing.T, interval time.Duration) *floorFixture {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	s, err := New(pool, Config{Schema: schema, FullClaimInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return &floorFixture{t: t, ctx: ctx, store: s,
		p: store.ClaimParams{Owner: "floor-test", Limit: 100, Lease: time.Minute}}
}

func (f *floorFixture) message(aggregateID string) outbox.Message {
	f.n++
	return outbox.Message{ID: uuid.New(), AggregateType: "Order", AggregateID: aggregateID,
		EventType: "Happened", Payload: []byte(fmt.Sprintf(`{"n":%d}`, f.n))}
}

// enqueue commits one message of its own aggregate.
func (f *floorFixture) enqueue() {
	f.t.Helper()
	m := f.message(uuid.NewString())
	if err := pgx.BeginFunc(f.ctx, f.store.pool, func(tx pgx.Tx) error { return f.store.Enqueue(f.ctx, tx, m) }); err != nil {
		f.t.Fatal(err)
	}
}

// claimAndMark claims once, marks everything claimed SENT, and returns the
// claimed ids.
func (f *floorFixture) claimAndMark() []uuid.UUID {
	f.t.Helper()
	c, err := f.store.Claim(f.ctx, f.p)
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []uuid.UUID
	var seqs []int64
	for _, r := range c.Records {
		ids = append(ids, r.ID)
		seqs = append(seqs, r.Seq)
	}
	if _, err := f.store.MarkSent(f.ctx, c.Token, seqs); err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// sentAroundOne commits n messages of aggregates of their own and marks
// all SENT but the one at index keep, which stays due: a message below the
// seed of the next Store. It returns that message and its seq.
func (f *floorFixture) sentAroundOne(n, keep int) (outbox.Message, int64) {
	f.t.Helper()
	var below outbox.Message
	for i := range n {
		m := f.message(fmt.Sprintf("agg-%d", i))
		if i == keep {
			below = m
		}
		if err := pgx.BeginFunc(f.ctx, f.store.pool, func(tx pgx.Tx) error { return f.store.Enqueue(f.ctx, tx, m) }); err != nil {
			f.t.Fatal(err)
		}
	}
	c, err := f.store.Claim(f.ctx, f.p)
	if err != nil {
		f.t.Fatal(err)
	}
	var sent, held []int64
	for _, r := range c.Records {
		if r.ID == below.ID {
			held = append(held, r.Seq)
		} else {
			sent = append(sent, r.Seq)
		}
	}
	if len(c.Records) != n || len(held) != 1 {
		f.t.Fatalf("claimed %d messages (the one to hold back among them: %v); want %d", len(c.Records), held, n)
	}
	if _, err := f.store.MarkSent(f.ctx, c.Token, sent); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.store.Release(f.ctx, c.Token, held); err != nil {
		f.t.Fatal(err)
	}
	return below, held[0]
}

// claimOnlyBelowTheSeed claims with s until it claims the message id, alone,
// failing if a claim takes anything else or 30 s pass.
func (f *floorFixture) claimOnlyBelowTheSeed(s *Store, id uuid.UUID) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := s.Claim(f.ctx, f.p)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(c.Records) == 1 && c.Records[0].ID == id {
			return
		}
		if len(c.Records) != 0 {
			f.t.Fatalf("claimed %v; want only the message below the seed", ids(c.Records))
		}
		if time.Now().After(deadline) {
			f.t.Fatal("the message below the seeded floor was not claimed within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// restartedStore is a new Store on the fixture's schema, as a restarted
// relay has, on a pool of its own whose backends carry the returned
// application_name, with sweep pieces of 4 seqs and no probe by itself.
func (f *floorFixture) restartedStore(name string) (*Store, string) {
	f.t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		f.t.Fatal(err)
	}
	app := name + "-" + uuid.NewString()[:8]
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(pool.Close)
	s, err := New(pool, Config{Schema: f.store.cfg.Schema, FullClaimInterval: time.Hour})
	if err != nil {
		f.t.Fatal(err)
	}
	s.sweepPiece = 4
	return s, app
}

// runUntilFloorPasses keeps enqueueing, claiming and marking until the
// claim floor is above seq, so that the claims that follow start their scan
// above it.
func (f *floorFixture) runUntilFloorPasses(seq int64) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.store.floor.mu.Lock()
		floor := f.store.floor.seq
		f.store.floor.mu.Unlock()
		if floor > seq {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the claim floor is %d after 30 s; want above %d", floor, seq)
		}
		f.enqueue()
		f.claimAndMark()
		time.Sleep(20 * time.Millisecond)
	}
}

// openLate enqueues a message of the aggregate "late-aggregate" in a
// transaction on pool that it leaves open (rolled back when the test ends,
// unless committed), and returns the transaction, the message and its seq.
func (f *floorFixture) openLate(pool *pgxpool.Pool) (pgx.Tx, outbox.Message, int64) {
	f.t.Helper()
	late := f.message("late-aggregate")
	tx, err := pool.Begin(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if err := f.store.Enqueue(f.ctx, tx, late); err != nil {
		f.t.Fatal(err)
	}
	return tx, late, seqOf(f.t, f.ctx, tx, f.store, late.ID)
}

// seqOf reads a message's seq, committed or not, from its own transaction.
func seqOf(t *testing.T, ctx context.Context, tx pgx.Tx, s *Store, id uuid.UUID) int64 {
	t.Helper()
	var seq int64
	if err := tx.QueryRow(ctx, s.render("SELECT seq FROM {{schema}}.outbox_messages WHERE id = $1"), id).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

// A message whose transaction commits long after messages with higher seqs
// were committed, claimed and marked lies below the claim floor. The
// periodic full claim must still deliver it, and its aggregate's next
// message must still wait for it.
func TestClaim_LateCommitBelowFloorIsClaimed(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond
	f := newFloorFixture(t, interval)

	tx, late, lateSeq := f.openLate(f.store.pool)

	// Others commit, are claimed and marked, past several full claims.
	f.runUntilFloorPasses(lateSeq)

	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	// The aggregate's next message, committed after the late one: it must
	// not overtake it, floor or not.
	next := f.message("late-aggregate")
	if err := pgx.BeginFunc(f.ctx, f.store.pool, func(tx pgx.Tx) error { return f.store.Enqueue(f.ctx, tx, next) }); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(20 * time.Second)
	claims := 0
	for {
		ids := f.claimAndMark()
		claims++
		for _, id := range ids {
			if id == next.ID {
				t.Fatalf("the aggregate's next message was claimed before the late one")
			}
			if id == late.ID {
				t.Logf("late commit below the floor claimed after %d claims", claims)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a late commit below the claim floor was not claimed within 20 s (%d claims)", claims)
		}
		time.Sleep(interval / 10)
	}
}

// A new Store's claims move its seeded floor on before it knows the bound
// (the highest seq committed a FullClaimInterval ago), so a message whose
// transaction commits after the claims passed its seq lies below the
// floor. The next look below the floor must still deliver it, before its
// aggregate's next message.
func TestClaim_LateCommitPastASeededFloorIsClaimed(t *testing.T) {
	t.Parallel()
	const interval = 2 * time.Second
	f := newFloorFixture(t, interval)
	f.enqueue()
	f.claimAndMark() // a SENT message to seed from

	// A relay restarts: a new Store, whose floor is seeded at its first claim.
	s, err := New(f.store.pool, Config{Schema: f.store.cfg.Schema, FullClaimInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	f.store = s
	tx, late, lateSeq := f.openLate(s.pool)
	deadline := time.Now().Add(interval / 2)
	for {
		f.enqueue()
		f.claimAndMark()
		s.floor.mu.Lock()
		floor, bound := s.floor.seq, s.floor.bound
		s.floor.mu.Unlock()
		if bound != 0 {
			t.Fatalf("the bound is known (%d) before the floor passed the open message's seq %d", bound, lateSeq)
		}
		if floor > lateSeq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the seeded floor is %d after %v of claims; want it past %d", floor, interval/2, lateSeq)
		}
	}

	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	next := f.message("late-aggregate")
	if err := pgx.BeginFunc(f.ctx, s.pool, func(tx pgx.Tx) error { return s.Enqueue(f.ctx, tx, next) }); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		for _, id := range f.claimAndMark() {
			if id == next.ID {
				t.Fatal("the aggregate's next message was claimed before the late one")
			}
			if id == late.ID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("a late commit past the seeded floor was not claimed within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A retry that becomes due below the claim floor is claimed again.
func TestClaim_RetryBelowFloorIsClaimed(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond
	f := newFloorFixture(t, interval)

	f.enqueue()
	c, err := f.store.Claim(f.ctx, f.p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 1 {
		t.Fatalf("claimed %d messages; want 1", len(c.Records))
	}
	failed := c.Records[0]
	if _, err := f.store.MarkFailed(f.ctx, c.Token, []store.Failure{{Seq: failed.Seq, Error: "boom",
		Delay: 2 * interval, CountAttempt: true}}); err != nil {
		t.Fatal(err)
	}
	f.runUntilFloorPasses(failed.Seq)

	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, id := range f.claimAndMark() {
			if id == failed.ID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("a retry due below the claim floor was not claimed within 20 s")
		}
		time.Sleep(interval / 10)
	}
}

// With a negative FullClaimInterval every claim is a full one: the floor
// never moves.
func TestClaim_NegativeFullClaimIntervalKeepsFloorAtZero(t *testing.T) {
	t.Parallel()
	f := newFloorFixture(t, -1)
	for range 5 {
		f.enqueue()
		if ids := f.claimAndMark(); len(ids) != 1 {
			t.Fatalf("claimed %d messages; want 1", len(ids))
		}
	}
	f.store.floor.mu.Lock()
	defer f.store.floor.mu.Unlock()
	if f.store.floor.seq != 0 {
		t.Fatalf("floor %d; want 0", f.store.floor.seq)
	}
}

// MarkSentAndClaim marks and claims in one transaction: the claim sees the
// mark, so the aggregate's next message is claimed at once; a mark under a
// token that no longer holds the messages changes nothing (the fence), and
// the claim still happens.
func TestMarkSentAndClaim_ClaimSeesMarkAndMarkIsFenced(t *testing.T) {
	t.Parallel()
	f := newFloorFixture(t, 0)
	a1, a2, b1 := f.message("A"), f.message("A"), f.message("B")
	if err := pgx.BeginFunc(f.ctx, f.store.pool, func(tx pgx.Tx) error { return f.store.Enqueue(f.ctx, tx, a1, a2, b1) }); err != nil {
		t.Fatal(err)
	}
	first, err := f.store.Claim(f.ctx, f.p)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(first.Records); !slices.Equal(got, []uuid.UUID{a1.ID, b1.ID}) {
		t.Fatalf("first claim %v; want the heads %v", got, []uuid.UUID{a1.ID, b1.ID})
	}

	// A stale token marks nothing, but the claim runs: a2 is still blocked.
	n, c, err := f.store.MarkSentAndClaim(f.ctx, uuid.New(), seqs(first.Records), f.p)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || len(c.Records) != 0 {
		t.Fatalf("with a stale token: marked %d, claimed %v; want 0 and nothing", n, ids(c.Records))
	}

	n, c, err = f.store.MarkSentAndClaim(f.ctx, first.Token, seqs(first.Records), f.p)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("marked %d; want 2", n)
	}
	if got := ids(c.Records); !slices.Equal(got, []uuid.UUID{a2.ID}) {
		t.Fatalf("claim in the mark's round trip got %v; want the aggregate's next message %s", got, a2.ID)
	}
	for _, m := range []outbox.Message{a1, b1} {
		if rec, err := f.store.Get(f.ctx, m.ID); err != nil || rec.Status != outbox.StatusSent {
			t.Fatalf("message %s: %v, %v; want SENT", m.ID, rec.Status, err)
		}
	}
	if rec, err := f.store.Get(f.ctx, a2.ID); err != nil || rec.Status != outbox.StatusInFlight || rec.LeaseOwner != f.p.Owner {
		t.Fatalf("message %s: %v owned by %q, %v; want IN_FLIGHT under the new claim", a2.ID, rec.Status, rec.LeaseOwner, err)
	}
}

func ids(recs []outbox.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func seqs(recs []outbox.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// A new Store seeds its claim floor from the message marked SENT last, so
// that its first claims do not walk the dead index entries that marking
// left behind. A message that is due below the seed (here one given back
// by a relay that stopped) is still claimed: the probe below the floor,
// started by the first claim, finds it.
func TestClaim_NewStoreSeedsFloorAndStillClaimsBelowIt(t *testing.T) {
	t.Parallel()
	f := newFloorFixture(t, time.Hour) // no second probe within the test
	below := f.message("below-the-seed")
	if err := pgx.BeginFunc(f.ctx, f.store.pool, func(tx pgx.Tx) error { return f.store.Enqueue(f.ctx, tx, below) }); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		f.enqueue()
	}
	c, err := f.store.Claim(f.ctx, f.p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 21 || c.Records[0].ID != below.ID {
		t.Fatalf("claimed %d messages, first %v; want 21, first the one enqueued first", len(c.Records), c.Records[0].ID)
	}
	sent := seqs(c.Records[1:])
	if _, err := f.store.MarkSent(f.ctx, c.Token, sent); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Release(f.ctx, c.Token, []int64{c.Records[0].Seq}); err != nil {
		t.Fatal(err)
	}

	// A relay restarts: a new Store on the same table.
	s, err := New(f.store.pool, Config{Schema: f.store.cfg.Schema, FullClaimInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !s.floor.needsSeed(time.Hour) {
		t.Fatal("a new Store does not want its floor seeded")
	}
	s.seedFloor(f.ctx)
	if s.floor.needsSeed(time.Hour) {
		t.Fatal("a seeded Store wants its floor seeded again")
	}
	if !slices.Contains(sent, s.floor.seq) {
		t.Fatalf("floor seeded at %d; want the seq of a SENT message, one of %v", s.floor.seq, sent)
	}

	// The first claims start at the seed; the probe they start finds the
	// message below it.
	f.claimOnlyBelowTheSeed(s, below.ID)
}

// Without a SENT message there is nothing to seed from: claims scan from
// seq 0 as before.
func TestClaim_NoSentMessageNoSeed(t *testing.T) {
	t.Parallel()
	f := newFloorFixture(t, time.Hour)
	f.enqueue()
	if ids := f.claimAndMark(); len(ids) != 1 {
		t.Fatalf("claimed %d; want 1", len(ids))
	}
	s, err := New(f.store.pool, Config{Schema: f.store.cfg.Schema})
	if err != nil {
		t.Fatal(err)
	}
	f.store.floor.mu.Lock()
	seeded := f.store.floor.seeded
	f.store.floor.mu.Unlock()
	if !seeded {
		t.Fatal("the first Store did not record its (empty) seeding")
	}
	if _, err := f.store.pool.Exec(f.ctx, f.store.render("UPDATE {{schema}}.outbox_messages SET status = 'PENDING', published_at = NULL, next_attempt_at = now()")); err != nil {
		t.Fatal(err)
	}
	s.seedFloor(f.ctx)
	if s.floor.seq != 0 {
		t.Fatalf("floor seeded at %d with no SENT message; want 0", s.floor.seq)
	}
	c, err := s.Claim(f.ctx, f.p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 1 {
		t.Fatalf("claimed %d; want the one message", len(c.Records))
	}
}

// A seeding that fails (here: its context is already over) leaves the
// floor unknown and lets the next claim seed again; claims meanwhile scan
// from seq 0.
func TestSeedFloor_FailureLeavesTheFloorToSeedAgain(t *testing.T) {
	t.Parallel()
	f := newFloorFixture(t, time.Hour)
	f.enqueue()
	if ids := f.claimAndMark(); len(ids) != 1 {
		t.Fatalf("claimed %d; want 1", len(ids))
	}
	s, err := New(f.store.pool, Config{Schema: f.store.cfg.Schema, FullClaimInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !s.floor.needsSeed(time.Hour) {
		t.Fatal("a new Store does not want its floor seeded")
	}
	done, cancel := context.WithCancel(f.ctx)
	cancel()
	s.seedFloor(done)
	if s.floor.seq != 0 || s.floor.seeded {
		t.Fatalf("after a failed seeding: floor %d, seeded %v; want 0, false", s.floor.seq, s.floor.seeded)
	}
	if !s.floor.needsSeed(time.Hour) {
		t.Fatal("after a failed seeding the next claim does not seed again")
	}
	s.seedFloor(f.ctx)
	if s.floor.seq == 0 || !s.floor.seeded {
		t.Fatalf("after a seeding that worked: floor %d, seeded %v", s.floor.seq, s.floor.seeded)
	}
}

// tripCounter counts what a pool sends in round trips of its own: each
// batch, and each statement outside a batch.
type tripCounter struct{ n *atomic.Int64 }

func (c tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// An idle relay's claims look below the claim floor themselves: one round
// trip per claim, not a probe on a second connection beside each poll (an
// idle relay polled with two round trips a second). A message committed
// late below the floor is still claimed by them.
func TestClaim_IdleClaimsLookBelowTheFloorInTheirOwnRoundTrip(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	f := newFloorFixture(t, interval)
	untraced := f.store.pool
	var trips atomic.Int64
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tripCounter{&trips}
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if f.store, err = New(pool, Config{Schema: f.store.cfg.Schema, FullClaimInterval: interval}); err != nil {
		t.Fatal(err)
	}

	tx, late, lateSeq := f.openLate(untraced)
	f.runUntilFloorPasses(lateSeq)

	// Idle: claims that find nothing, for longer than the interval, and no
	// probe still running from before.
	idleClaim := func() {
		t.Helper()
		c, err := f.store.Claim(f.ctx, f.p)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Records) != 0 {
			t.Fatalf("an idle claim took %d messages", len(c.Records))
		}
		time.Sleep(interval / 5)
	}
	for range 10 {
		idleClaim()
	}
	for probing := true; probing; time.Sleep(time.Millisecond) {
		f.store.floor.mu.Lock()
		probing = f.store.floor.probing
		f.store.floor.mu.Unlock()
	}
	before, claims := trips.Load(), 25 // five intervals
	for range claims {
		idleClaim()
	}
	if n := trips.Load() - before; n != int64(claims) {
		t.Errorf("%d idle claims over five intervals made %d round trips; want one each", claims, n)
	}
	f.store.floor.mu.Lock()
	floor := f.store.floor.seq
	f.store.floor.mu.Unlock()
	if floor <= lateSeq {
		t.Fatalf("the floor is %d, not above the late message's seq %d", floor, lateSeq)
	}

	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ids := f.claimAndMark()
		if slices.Contains(ids, late.ID) {
			return
		}
		if len(ids) != 0 {
			t.Fatalf("claimed %v; want only the late message", ids)
		}
		if time.Now().After(deadline) {
			t.Fatal("a late commit below the floor of an idle store was not claimed within 20 s")
		}
		time.Sleep(interval / 5)
	}
}

// A Store's first probe walks below the seeded floor in pieces, each a
// statement of its own, so that a relay started beside millions of dead
// index entries (a mass mark, unvacuumed) does not walk them in one
// statement for a second or more beside its claims; it still finds the
// message below the seed. Later probes are one statement again.
func TestClaim_FirstProbeSweepsInPiecesAndFindsWhatIsBelowTheSeed(t *testing.T) {
	t.Parallel()
	f := newFloorFixture(t, time.Hour) // no second probe by itself
	below, belowSeq := f.sentAroundOne(40, 29)

	// A relay restarts: a new Store, whose sweep starts with pieces of 4 seqs.
	s, err := New(f.store.pool, Config{Schema: f.store.cfg.Schema, FullClaimInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	type piece struct{ from, to, floor int64 }
	var mu sync.Mutex
	var pieces []piece
	s.sweepPiece = 4
	s.onProbePiece = func(from, to int64) {
		s.floor.mu.Lock()
		floor := s.floor.seq
		s.floor.mu.Unlock()
		mu.Lock()
		pieces = append(pieces, piece{from, to, floor})
		mu.Unlock()
	}
	f.claimOnlyBelowTheSeed(s, below.ID)

	mu.Lock()
	got := slices.Clone(pieces)
	mu.Unlock()
	if len(got) < 3 {
		t.Fatalf("the first probe ran %d statement(s) %v; want the walk below the floor in pieces", len(got), got)
	}
	for i, p := range got {
		switch {
		case i == 0 && p.from != 0:
			t.Errorf("the sweep began at seq %d; want 0", p.from)
		case i > 0 && p.from != got[i-1].to:
			t.Errorf("piece %d begins at %d, the one before ended at %d: %v", i, p.from, got[i-1].to, got)
		case i < len(got)-1 && (p.to == noEnd || p.to >= p.floor):
			t.Errorf("piece %d of %d ends at %d, floor %d; want only the last to reach the floor: %v", i, len(got), p.to, p.floor, got)
		}
	}
	if last := got[len(got)-1]; last.to != noEnd && last.to <= belowSeq {
		t.Errorf("the sweep ended with %v, below the message at %d", last, belowSeq)
	}

	// Swept: the next probe is one statement from seq 0.
	s.floor.mu.Lock()
	swept, floor := s.floor.swept, s.floor.seq
	s.floor.probing = true
	s.floor.mu.Unlock()
	if !swept {
		t.Fatal("the Store does not know that its first probe ended")
	}
	mu.Lock()
	pieces = nil
	mu.Unlock()
	s.probeBelowFloor(claimScan{from: floor, at: time.Now(), interval: time.Hour})
	mu.Lock()
	defer mu.Unlock()
	if len(pieces) != 1 || pieces[0].from != 0 || pieces[0].to != noEnd {
		t.Errorf("a later probe ran %v; want one statement from seq 0 without end", pieces)
	}
}

// A sweep whose connection is cut (the server ends the backend mid-sweep)
// changes nothing: the floor stays at the seed, the Store does not count
// itself swept, and the next probe sweeps again from seq 0 and finds the
// message below the seed, which is then claimed.
func TestClaim_SweepCutOffByTheServerSweepsAgain(t *testing.T) {
	t.Parallel()
	f := newFloorFixture(t, time.Hour)
	below, belowSeq := f.sentAroundOne(40, 29)

	s, app := f.restartedStore("sweep")
	s.seedFloor(f.ctx)
	seed := s.floor.seq
	if seed <= belowSeq {
		t.Fatalf("floor seeded at %d; want above the held message's seq %d", seed, belowSeq)
	}
	var pieces atomic.Int64
	s.onProbePiece = func(from, to int64) {
		if pieces.Add(1) == 2 {
			if _, err := f.store.pool.Exec(f.ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app); err != nil {
				t.Error(err)
			}
		}
	}
	probe := func() {
		s.floor.mu.Lock()
		s.floor.probing = true
		from := s.floor.seq
		s.floor.mu.Unlock()
		s.probeBelowFloor(claimScan{from: from, at: time.Now(), interval: time.Hour})
	}
	probe()
	s.floor.mu.Lock()
	floor, swept, probing := s.floor.seq, s.floor.swept, s.floor.probing
	s.floor.mu.Unlock()
	if n := pieces.Load(); n != 2 {
		t.Fatalf("the cut sweep ran %d pieces; want it to end at the second", n)
	}
	if floor != seed || swept || probing {
		t.Fatalf("after the cut sweep: floor %d (seed %d), swept %v, probing %v; want the seed, false, false", floor, seed, swept, probing)
	}

	s.onProbePiece = nil
	probe()
	s.floor.mu.Lock()
	floor, swept = s.floor.seq, s.floor.swept
	s.floor.mu.Unlock()
	if floor > belowSeq || !swept {
		t.Fatalf("after the second sweep: floor %d, swept %v; want at most %d, true", floor, swept, belowSeq)
	}
	f.claimOnlyBelowTheSeed(s, below.ID)
}

// A Store's first probe, the sweep, begins only once the claim that started
// it has returned, so that a relay's first claim does not share the machine
// with the sweep's first piece (over the dead entries of two million rows
// just marked, 100-250 ms of a core on the 2-core bench machine). The
// claim's UPDATE is held with a SHARE lock on the table, which lets the
// sweep's reads through: no piece may run until the claim returned, and
// then the sweep runs and finds the message below the seed.
func TestClaim_SweepBeginsAfterTheClaimThatStartedIt(t *testing.T) {
	t.Parallel()
	f := newFloorFixture(t, time.Hour)
	below, _ := f.sentAroundOne(40, 29)

	s, app := f.restartedStore("first-claim")
	var pieces atomic.Int64
	s.onProbePiece = func(from, to int64) { pieces.Add(1) }

	tx, err := f.store.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)
	table := pgx.Identifier{f.store.cfg.Schema, "outbox_messages"}.Sanitize()
	if _, err := tx.Exec(f.ctx, "LOCK TABLE "+table+" IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		_, err := s.Claim(f.ctx, f.p)
		claimed <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		err := f.store.pool.QueryRow(f.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock')`, app).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first claim did not reach the locked table within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The claim is inside its round trip. A sweep beside it would have run
	// its first piece (a read the lock lets through) by now.
	time.Sleep(300 * time.Millisecond)
	if n := pieces.Load(); n != 0 {
		t.Fatalf("the sweep ran %d piece(s) while the claim that started it was still running; want none", n)
	}
	if err := tx.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatal(err)
	}
	f.claimOnlyBelowTheSeed(s, below.ID)
	if pieces.Load() < 2 {
		t.Fatalf("the sweep ran %d piece(s) after the claim; want it walked in pieces", pieces.Load())
	}
}
