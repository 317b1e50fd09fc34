package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func (b *bundle) claim(t *testing.T, limit int, lease time.Duration) store.Claim {
	t.Helper()
	c, err := b.Store.Claim(pgstoretest.Context(t), store.ClaimParams{Owner: "relay-" + t.Name(), Limit: limit, Lease: lease})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

// expireLeases makes every current lease expired, as if time had passed. A
// leased row is due again at next_attempt_at, which the claim sets to the
// lease's end.
func (b *bundle) expireLeases(t *testing.T) {
	t.Helper()
	b.Exec(t, `UPDATE {{schema}}.outbox_messages
		SET lease_expires_at = now() - interval '1 second', next_attempt_at = now() - interval '1 second'
		WHERE lease_token IS NOT NULL AND status IN ('PENDING', 'FAILED', 'IN_FLIGHT')`)
}

func assertSeqs(t *testing.T, what string, got []outbox.Record, want ...int64) {
	t.Helper()
	if !slices.Equal(pgstoretest.Seqs(got), want) {
		t.Errorf("%s claimed seqs %v, want %v", what, pgstoretest.Seqs(got), want)
	}
}

func TestClaim_LeasesOnlyTheHeadOfEachAggregate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"), pgstoretest.Msg("Order", "a"),
		pgstoretest.Msg("Invoice", "a"), pgstoretest.Msg("Order", "b"))
	// Order/a: s0 s1 s3; Order/b: s2 s5; Invoice/a: s4 (same id, other type).
	before := b.dbNow(t)
	c := b.claim(t, 10, time.Minute)
	assertSeqs(t, "first claim", c.Records, s[0], s[2], s[4])
	if c.Token == uuid.Nil {
		t.Error("claim token is nil")
	}
	for _, r := range c.Records {
		if r.Status != outbox.StatusInFlight || r.LeaseOwner != "relay-"+t.Name() ||
			r.LeaseExpiresAt.Before(before.Add(50*time.Second)) || r.Payload == nil {
			t.Errorf("claimed record %d: status %s owner %q lease until %v (claimed at %v)",
				r.Seq, r.Status, r.LeaseOwner, r.LeaseExpiresAt, before)
		}
	}

	// The heads are IN_FLIGHT and still block their aggregates.
	assertSeqs(t, "claim while heads are in flight", b.claim(t, 10, time.Minute).Records)

	if n, err := b.Store.MarkSent(pgstoretest.Context(t), c.Token, []int64{s[0], s[2]}); err != nil || n != 2 {
		t.Fatalf("MarkSent = %d, %v; want 2", n, err)
	}
	assertSeqs(t, "claim after heads sent", b.claim(t, 10, time.Minute).Records, s[1], s[5])
}

func TestClaim_RespectsLimitInSeqOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var msgs []outbox.Message
	for i := range 5 {
		msgs = append(msgs, pgstoretest.Msg("Order", fmt.Sprint(i)))
	}
	s := b.Enqueue(t, msgs...)
	assertSeqs(t, "limit 2", b.claim(t, 2, time.Minute).Records, s[0], s[1])
	assertSeqs(t, "limit 0", b.claim(t, 0, time.Minute).Records)
	assertSeqs(t, "limit 10", b.claim(t, 10, time.Minute).Records, s[2], s[3], s[4])
}

func TestClaim_FailedNotYetDueBlocksItsAggregateOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"))
	c := b.claim(t, 1, time.Minute)
	assertSeqs(t, "first claim", c.Records, s[0])
	n, err := b.Store.MarkFailed(pgstoretest.Context(t), c.Token, []store.Failure{{Seq: s[0], Error: "boom", Delay: time.Hour, CountAttempt: true}})
	if err != nil || n != 1 {
		t.Fatalf("MarkFailed = %d, %v; want 1", n, err)
	}
	assertSeqs(t, "claim with a+0 failed until later", b.claim(t, 10, time.Minute).Records, s[2])
}

func TestClaim_FailedAndDueIsClaimedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"))
	c := b.claim(t, 10, time.Minute)
	if _, err := b.Store.MarkFailed(pgstoretest.Context(t), c.Token, []store.Failure{{Seq: s[0], Error: "boom", CountAttempt: true}}); err != nil {
		t.Fatal(err)
	}
	c = b.claim(t, 10, time.Minute)
	assertSeqs(t, "claim after a due failure", c.Records, s[0])
	if len(c.Records) == 1 && (c.Records[0].Attempts != 1 || c.Records[0].LastError != "boom") {
		t.Errorf("reclaimed record: attempts %d, last error %q; want 1, boom", c.Records[0].Attempts, c.Records[0].LastError)
	}
}

func TestClaim_DeadLetterBlocksItsAggregateOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"))
	c := b.claim(t, 1, time.Minute)
	if _, err := b.Store.MarkFailed(pgstoretest.Context(t), c.Token, []store.Failure{{Seq: s[0], Error: "poison", Dead: true}}); err != nil {
		t.Fatal(err)
	}
	c = b.claim(t, 10, time.Minute)
	assertSeqs(t, "claim with a+0 dead", c.Records, s[2])
	if _, err := b.Store.MarkSent(pgstoretest.Context(t), c.Token, []int64{s[2]}); err != nil {
		t.Fatal(err)
	}
	assertSeqs(t, "claim with only the dead letter's aggregate left", b.claim(t, 10, time.Minute).Records)
}

func TestClaim_ExpiredLeaseIsReclaimedWithNewToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "a"))
	first := b.claim(t, 10, time.Hour)
	assertSeqs(t, "first claim", first.Records, s[0])
	assertSeqs(t, "claim under an unexpired lease", b.claim(t, 10, time.Hour).Records)

	b.expireLeases(t)
	second := b.claim(t, 10, time.Hour)
	assertSeqs(t, "claim after expiry", second.Records, s[0])
	if second.Token == first.Token {
		t.Error("takeover reused the old token")
	}
}

func TestFencing_OldTokenChangesNothingAfterTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	m := pgstoretest.Msg("Order", "a")
	s := b.Enqueue(t, m)
	a := b.claim(t, 10, time.Minute)
	b.expireLeases(t)
	taker, err := b.Store.Claim(ctx, store.ClaimParams{Owner: "relay-B", Limit: 10, Lease: time.Hour})
	if err != nil || len(taker.Records) != 1 {
		t.Fatalf("takeover claim = %v, %v", taker, err)
	}
	want := b.Get(t, m.ID)

	if n, err := b.Store.MarkSent(ctx, a.Token, s); err != nil || n != 0 {
		t.Errorf("MarkSent with old token = %d, %v; want 0", n, err)
	}
	if n, err := b.Store.MarkFailed(ctx, a.Token, []store.Failure{{Seq: s[0], Error: "x", CountAttempt: true, Dead: true}}); err != nil || n != 0 {
		t.Errorf("MarkFailed with old token = %d, %v; want 0", n, err)
	}
	if n, err := b.Store.Release(ctx, a.Token, s); err != nil || n != 0 {
		t.Errorf("Release with old token = %d, %v; want 0", n, err)
	}
	got := b.Get(t, m.ID)
	if got.Status != outbox.StatusInFlight || got.LeaseOwner != "relay-B" || !got.LeaseExpiresAt.Equal(want.LeaseExpiresAt) ||
		got.Attempts != 0 || got.LastError != "" {
		t.Errorf("after old-token calls: %+v, want B's lease intact", got)
	}

	if n, err := b.Store.MarkSent(ctx, taker.Token, s); err != nil || n != 1 {
		t.Errorf("MarkSent with B's token = %d, %v; want 1", n, err)
	}
	got = b.Get(t, m.ID)
	if got.Status != outbox.StatusSent || got.PublishedAt.IsZero() || got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() {
		t.Errorf("after MarkSent: %+v, want SENT with published_at and no lease", got)
	}
	// A second MarkSent with the same token finds nothing IN_FLIGHT.
	if n, err := b.Store.MarkSent(ctx, taker.Token, s); err != nil || n != 0 {
		t.Errorf("repeated MarkSent = %d, %v; want 0", n, err)
	}
}

func TestMarkFailed_CountsAttemptsAndSchedulesRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	ms := []outbox.Message{pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"), pgstoretest.Msg("Order", "3")}
	s := b.Enqueue(t, ms...)
	c := b.claim(t, 10, time.Minute)
	long := strings.Repeat("é", 3000) // 6,000 bytes
	before := b.dbNow(t)
	n, err := b.Store.MarkFailed(ctx, c.Token, []store.Failure{
		{Seq: s[0], Error: "broker said no", Delay: time.Hour, CountAttempt: true},
		{Seq: s[1], Error: "broker unreachable\x00", Delay: 30 * time.Minute, CountAttempt: false},
		{Seq: s[2], Error: long, Delay: -time.Second, CountAttempt: true, Dead: true},
	})
	if err != nil || n != 3 {
		t.Fatalf("MarkFailed = %d, %v; want 3", n, err)
	}
	r0, r1, r2 := b.Get(t, ms[0].ID), b.Get(t, ms[1].ID), b.Get(t, ms[2].ID)
	if r0.Status != outbox.StatusFailed || r0.Attempts != 1 || r0.LastError != "broker said no" ||
		r0.NextAttemptAt.Before(before.Add(59*time.Minute)) || r0.LeaseOwner != "" || !r0.LeaseExpiresAt.IsZero() {
		t.Errorf("counted failure: %+v", r0)
	}
	if r1.Status != outbox.StatusFailed || r1.Attempts != 0 || r1.LastError != "broker unreachable" ||
		r1.NextAttemptAt.Before(before.Add(29*time.Minute)) {
		t.Errorf("uncounted failure: %+v", r1)
	}
	if r2.Status != outbox.StatusDeadLetter || r2.Attempts != 1 || len(r2.LastError) != 4000 ||
		!strings.HasPrefix(long, r2.LastError) {
		t.Errorf("dead failure: status %s attempts %d last error %d bytes", r2.Status, r2.Attempts, len(r2.LastError))
	}
}

func TestRelease_MakesMessagesDueWithoutCountingAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	ms := []outbox.Message{pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2")}
	s := b.Enqueue(t, ms...)
	c := b.claim(t, 10, time.Hour)
	// s[1] fails once (due at once) and is claimed again.
	if _, err := b.Store.MarkFailed(ctx, c.Token, []store.Failure{{Seq: s[1], Error: "e", CountAttempt: true}}); err != nil {
		t.Fatal(err)
	}
	c2 := b.claim(t, 10, time.Hour)
	assertSeqs(t, "reclaim", c2.Records, s[1])

	if n, err := b.Store.Release(ctx, c.Token, s[:1]); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v; want 1", n, err)
	}
	if n, err := b.Store.Release(ctx, c2.Token, s[1:]); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v; want 1", n, err)
	}
	r0, r1 := b.Get(t, ms[0].ID), b.Get(t, ms[1].ID)
	if r0.Status != outbox.StatusPending || r0.Attempts != 0 || r0.LeaseOwner != "" {
		t.Errorf("released fresh message: %+v, want PENDING", r0)
	}
	if r1.Status != outbox.StatusFailed || r1.Attempts != 1 || r1.LeaseOwner != "" {
		t.Errorf("released failed message: %+v, want FAILED with 1 attempt", r1)
	}
	assertSeqs(t, "claim after release", b.claim(t, 10, time.Hour).Records, s[0], s[1])
}

func TestClaim_ConcurrentClaimsNeverShareAMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const total, aggregates, workers = 2000, 50, 4
	msgs := make([]outbox.Message, total)
	for i := range msgs {
		msgs[i] = pgstoretest.Msg("Order", fmt.Sprint(i%aggregates))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error { return b.Store.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		claimed = map[int64]int{}      // seq -> times claimed
		order   = map[string][]int64{} // aggregate -> seqs in claim order
		done    atomic.Int64           // messages marked sent
		twice   []string               // aggregates returned twice by one claim
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for done.Load() < total && ctx.Err() == nil && !t.Failed() {
				c, err := b.Store.Claim(ctx, store.ClaimParams{Owner: fmt.Sprint("w", w), Limit: 37, Lease: time.Minute})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(c.Records) == 0 {
					time.Sleep(time.Millisecond) // others hold the heads
					continue
				}
				mu.Lock()
				seen := map[string]bool{}
				for _, r := range c.Records {
					claimed[r.Seq]++
					if seen[r.AggregateID] {
						twice = append(twice, r.AggregateID) // reported after wg.Wait, never under mu
					}
					seen[r.AggregateID] = true
					order[r.AggregateID] = append(order[r.AggregateID], r.Seq)
				}
				mu.Unlock()
				n, err := b.Store.MarkSent(ctx, c.Token, pgstoretest.Seqs(c.Records))
				if err != nil || n != int64(len(c.Records)) {
					t.Errorf("MarkSent = %d, %v; want %d", n, err, len(c.Records))
					return
				}
				done.Add(n)
			}
		})
	}
	wg.Wait()
	if len(twice) > 0 {
		t.Errorf("claims returned two messages of one aggregate: %v", twice)
	}
	if t.Failed() {
		return
	}
	if ctx.Err() != nil {
		t.Fatalf("timed out with %d of %d sent", done.Load(), total)
	}
	if len(claimed) != total {
		t.Errorf("%d distinct messages claimed, want %d", len(claimed), total)
	}
	for seq, n := range claimed {
		if n != 1 {
			t.Errorf("seq %d claimed %d times", seq, n)
		}
	}
	for agg, seqs := range order {
		if !slices.IsSorted(seqs) {
			t.Errorf("aggregate %s claimed out of order: %v", agg, seqs)
		}
	}
}

func TestCountsAndGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"), pgstoretest.Msg("Order", "3"), pgstoretest.Msg("Order", "3"))
	c := b.claim(t, 2, time.Minute)
	if _, err := b.Store.MarkSent(ctx, c.Token, s[:1]); err != nil {
		t.Fatal(err)
	}
	got, err := b.Store.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[outbox.Status]int64{
		outbox.StatusPending: 2, outbox.StatusInFlight: 1, outbox.StatusSent: 1,
		outbox.StatusFailed: 0, outbox.StatusDeadLetter: 0,
	}
	if !maps.Equal(got, want) {
		t.Errorf("Counts = %v, want %v", got, want)
	}
	if _, err := b.Store.Get(ctx, uuid.New()); !errors.Is(err, pgstore.ErrNotFound) {
		t.Errorf("Get(unknown) error = %v, want ErrNotFound", err)
	}
}

func TestClaim_RejectsLeaseBelowOneMillisecond(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "1"))
	_, err := b.Store.Claim(pgstoretest.Context(t), store.ClaimParams{Owner: "r", Limit: 1, Lease: 0})
	pgstoretest.CheckLeaseRejected(t, err)
	assertSeqs(t, "claim after a rejected one", b.claim(t, 10, time.Minute).Records, s[0])
}
