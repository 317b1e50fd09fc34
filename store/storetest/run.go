package storetest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

var runSpecs = []spec{
	{"Run_MaxRunZeroOrOneClaimsHeadsOnly", testRunMaxRunZeroOrOneClaimsHeadsOnly},
	{"Run_LeasesConsecutiveMessagesOfAnAggregateInOrder", testRunLeasesConsecutiveMessagesOfAnAggregateInOrder},
	{"Run_PartlySentAndReleasedResumesAtTheFirstUnsent", testRunPartlySentAndReleasedResumesAtTheFirstUnsent},
	{"Run_EndsBeforeAFollowerNotDue", testRunEndsBeforeAFollowerNotDue},
	{"Run_EndsBeforeAFollowerAnotherClaimHolds", testRunEndsBeforeAFollowerAnotherClaimHolds},
	{"Run_MaxRunBytesCutsTheRunButTheHeadAlwaysComes", testRunMaxRunBytesCutsTheRunButTheHeadAlwaysComes},
	{"Run_FollowersFillTheBatchRankByRank", testRunFollowersFillTheBatchRankByRank},
	{"Run_ExpiredRunIsClaimedAgainWhole", testRunExpiredRunIsClaimedAgainWhole},
	{"Run_ConcurrentClaimsNeverShareOrSkipAMessage", testRunConcurrentClaimsNeverShareOrSkipAMessage},
}

// needRuns skips the test unless the store claims runs.
func (s *suite) needRuns(t *testing.T) {
	t.Helper()
	if !s.h.Runs {
		t.Skip("the store claims heads only (Harness.Runs is false)")
	}
}

// claimRun claims as owner with MaxRun and MaxRunBytes, and checks that
// the records are in seq order.
func (s *suite) claimRun(t *testing.T, owner string, limit, maxRun, maxRunBytes int, lease time.Duration) store.Claim {
	t.Helper()
	c, err := s.h.Queue.Claim(s.ctx, store.ClaimParams{Owner: owner, Limit: limit, Lease: lease, MaxRun: maxRun, MaxRunBytes: maxRunBytes})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if !slices.IsSortedFunc(c.Records, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) }) {
		t.Errorf("claim records not in seq order: %v", seqsOf(c.Records))
	}
	return c
}

// aggregate returns n messages of the Order aggregate id.
func aggregate(id string, n int) []outbox.Message {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = msg("Order", id)
	}
	return msgs
}

// MaxRun 0 and 1 claim what a claim without runs claims: the head of each
// aggregate, whatever MaxRunBytes says. Every store passes this one.
func testRunMaxRunZeroOrOneClaimsHeadsOnly(t *testing.T, s *suite) {
	seq := s.enqueue(t, msg("Order", "a"), msg("Order", "a"), msg("Order", "b"), msg("Order", "a"))
	for _, maxRun := range []int{0, 1, -1} {
		c := s.claimRun(t, "relay-A", 10, maxRun, 1<<20, time.Minute)
		assertSeqs(t, fmt.Sprintf("MaxRun %d", maxRun), c.Records, seq[0], seq[2])
		s.release(t, c.Token, seqsOf(c.Records), int64(len(c.Records)))
	}
}

// A claim with MaxRun 5 leases an aggregate's first five messages, in
// order, under one lease; nobody else gets any message of the aggregate
// meanwhile; once the five are sent the next claim takes the other three.
func testRunLeasesConsecutiveMessagesOfAnAggregateInOrder(t *testing.T, s *suite) {
	s.needRuns(t)
	msgs := aggregate("a", 8)
	seq := s.enqueue(t, msgs...)
	c := s.claimRun(t, "relay-A", 10, 5, 0, time.Minute)
	assertSeqs(t, "claim with MaxRun 5", c.Records, seq[:5]...)
	for i, r := range c.Records {
		if r.Status != outbox.StatusInFlight || r.LeaseOwner != "relay-A" || !bytes.Equal(r.Payload, msgs[i].Payload) {
			t.Errorf("claimed record %d: status %s, owner %q, payload %q; want IN_FLIGHT, relay-A, the payload",
				r.Seq, r.Status, r.LeaseOwner, r.Payload)
		}
		s.assertStoredClaimed(t, fmt.Sprintf("claimed record %d", r.Seq), r.ID, "relay-A", r.LeaseExpiresAt)
	}

	assertSeqs(t, "another owner's claim while the run is leased", s.claimRun(t, "relay-B", 10, 5, 0, time.Minute).Records)

	s.markSent(t, c.Token, seqsOf(c.Records), 5)
	assertSeqs(t, "claim after the run was sent", s.claimRun(t, "relay-B", 10, 5, 0, time.Minute).Records, seq[5:]...)
}

// Of a run of five, two sent and three released: the next run starts at
// the third, the first unsent.
func testRunPartlySentAndReleasedResumesAtTheFirstUnsent(t *testing.T, s *suite) {
	s.needRuns(t)
	seq := s.enqueue(t, aggregate("a", 8)...)
	c := s.claimRun(t, "relay-A", 10, 5, 0, time.Minute)
	assertSeqs(t, "claim with MaxRun 5", c.Records, seq[:5]...)
	s.markSent(t, c.Token, seq[:2], 2)
	s.release(t, c.Token, seq[2:5], 3)
	assertSeqs(t, "claim after 2 sent and 3 released", s.claimRun(t, "relay-B", 10, 5, 0, time.Minute).Records, seq[2:7]...)
}

// A follower that is not due (a failure whose retry lies ahead) ends the
// run: the messages after it are not taken past it, although they are due.
func testRunEndsBeforeAFollowerNotDue(t *testing.T, s *suite) {
	s.needRuns(t)
	seq := s.enqueue(t, aggregate("a", 4)...)
	c := s.claimRun(t, "relay-A", 10, 4, 0, time.Minute)
	assertSeqs(t, "claim with MaxRun 4", c.Records, seq...)
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[1], Error: "boom", Delay: time.Hour, CountAttempt: true})
	s.release(t, c.Token, []int64{seq[0], seq[2], seq[3]}, 3)
	// seq[0], seq[2] and seq[3] are due; seq[1] waits an hour.
	assertSeqs(t, "claim with the second message failed until later", s.claimRun(t, "relay-B", 10, 4, 0, time.Minute).Records, seq[0])
}

// A follower another claim holds ends the run too.
func testRunEndsBeforeAFollowerAnotherClaimHolds(t *testing.T, s *suite) {
	s.needRuns(t)
	seq := s.enqueue(t, aggregate("a", 4)...)
	c := s.claimRun(t, "relay-A", 10, 4, 0, time.Minute)
	assertSeqs(t, "claim with MaxRun 4", c.Records, seq...)
	s.release(t, c.Token, []int64{seq[0], seq[2]}, 2)
	// seq[0] and seq[2] are due; relay-A still holds seq[1] and seq[3].
	assertSeqs(t, "claim beside relay-A's lease", s.claimRun(t, "relay-B", 10, 4, 0, time.Minute).Records, seq[0])
}

// MaxRunBytes bounds a run's payload, head included: a follower joins
// while the total stays within it. The head comes whatever its size.
func testRunMaxRunBytesCutsTheRunButTheHeadAlwaysComes(t *testing.T, s *suite) {
	s.needRuns(t)
	msgs := aggregate("a", 4)
	for i, n := range []int{100, 50, 150, 10} { // running totals 100, 150, 300, 310
		msgs[i].Payload, msgs[i].ContentType = bytes.Repeat([]byte("x"), n), "application/octet-stream"
	}
	seq := s.enqueue(t, msgs...)
	for _, tc := range []struct {
		maxRunBytes int
		want        []int64
	}{
		{1, seq[:1]},
		{149, seq[:1]},
		{150, seq[:2]},
		{299, seq[:2]},
		{300, seq[:3]},
		{310, seq},
		{0, seq},
	} {
		c := s.claimRun(t, "relay-A", 10, 10, tc.maxRunBytes, time.Minute)
		assertSeqs(t, fmt.Sprintf("claim with MaxRunBytes %d", tc.maxRunBytes), c.Records, tc.want...)
		s.release(t, c.Token, seqsOf(c.Records), int64(len(c.Records)))
	}
}

// The heads come first; the followers fill the rest of the batch rank by
// rank: every head's first follower before any head's second, so that
// the aggregates of a batch share it.
func testRunFollowersFillTheBatchRankByRank(t *testing.T, s *suite) {
	s.needRuns(t)
	ids := []string{"a", "b", "c", "d", "e"}
	var msgs []outbox.Message
	for range 3 {
		for _, id := range ids {
			msgs = append(msgs, msg("Order", id))
		}
	}
	seq := s.enqueue(t, msgs...)
	bySeq := map[int64]string{}
	for i, sq := range seq {
		bySeq[sq] = msgs[i].AggregateID
	}
	// Five heads and three first followers: three aggregates get two
	// messages, two get one, none gets three.
	c := s.claimRun(t, "relay-A", 8, 3, 0, time.Minute)
	per := map[string]int{}
	for _, r := range c.Records {
		per[bySeq[r.Seq]]++
	}
	var counts []int
	for _, id := range ids {
		counts = append(counts, per[id])
	}
	slices.Sort(counts)
	if len(c.Records) != 8 || !slices.Equal(counts, []int{1, 1, 2, 2, 2}) {
		t.Errorf("claim of 8 with MaxRun 3 over 5 aggregates took %v (per aggregate %v); want every head and three first followers",
			seqsOf(c.Records), per)
	}
	s.release(t, c.Token, seqsOf(c.Records), int64(len(c.Records)))

	// Fewer than the heads: the oldest heads only, as without runs.
	assertSeqs(t, "claim of 3 with MaxRun 3", s.claimRun(t, "relay-A", 3, 3, 0, time.Minute).Records, seq[:3]...)
}

// A relay that claimed a run and stopped (its lease ran out) leaves the
// run to the next claim whole, in order, under a new token; the old token
// changes nothing.
func testRunExpiredRunIsClaimedAgainWhole(t *testing.T, s *suite) {
	s.needRuns(t)
	seq := s.enqueue(t, aggregate("a", 4)...)
	a := s.claimRun(t, "relay-A", 10, 4, 0, shortLease)
	assertSeqs(t, "relay-A's claim", a.Records, seq...)

	b := s.claimOnceExpiredWith(t, store.ClaimParams{Owner: "relay-B", Limit: 10, Lease: time.Hour, MaxRun: 4})
	assertSeqs(t, "relay-B's claim after relay-A's lease ran out", b.Records, seq...)
	if b.Token == a.Token {
		t.Error("the takeover reused the old token")
	}
	s.markSent(t, a.Token, seq, 0)
	s.markSent(t, b.Token, seq, 4)
}

// Concurrent claims of runs never lease a message twice, and every claim
// takes each aggregate's messages as a run: consecutive, from the first
// unsent on, never with a gap.
func testRunConcurrentClaimsNeverShareOrSkipAMessage(t *testing.T, s *suite) {
	s.needRuns(t)
	if !s.h.Concurrent {
		t.Skip("the store does not claim concurrently (Harness.Concurrent is false)")
	}
	const total, aggregates, workers = 120, 4, 3
	msgs := make([]outbox.Message, total)
	for i := range msgs {
		msgs[i] = msg("Order", fmt.Sprint(i%aggregates))
	}
	if err := s.h.Enqueue(s.ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 40*time.Second)
	defer cancel()

	var (
		mu      sync.Mutex
		claimed = map[int64]int{}        // seq -> times claimed
		runs    = map[string][][]int64{} // aggregate -> its runs, in claim order
		done    atomic.Int64             // messages marked sent
		wg      sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for done.Load() < total && ctx.Err() == nil {
				c, err := s.h.Queue.Claim(ctx, store.ClaimParams{Owner: fmt.Sprint("w", w), Limit: 10, Lease: time.Minute, MaxRun: 4})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(c.Records) == 0 {
					time.Sleep(time.Millisecond) // the others hold the heads
					continue
				}
				mu.Lock()
				run := map[string][]int64{}
				for _, r := range c.Records {
					claimed[r.Seq]++
					run[r.AggregateID] = append(run[r.AggregateID], r.Seq)
				}
				for agg, seqs := range run {
					runs[agg] = append(runs[agg], seqs)
				}
				mu.Unlock()
				n, err := s.h.Queue.MarkSent(ctx, c.Token, seqsOf(c.Records))
				if err != nil || n != int64(len(c.Records)) {
					t.Errorf("MarkSent = %d, %v; want %d", n, err, len(c.Records))
					return
				}
				done.Add(n)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("timed out with %d of %d sent", done.Load(), total)
	}
	for seq, n := range claimed {
		if n != 1 {
			t.Errorf("seq %d claimed %d times", seq, n)
		}
	}
	if len(claimed) != total {
		t.Errorf("%d distinct messages claimed, want %d", len(claimed), total)
	}
	// Each aggregate's runs, one after the other, are its messages in seq
	// order: no run skipped one, and none began before the last ended.
	for agg, aggRuns := range runs {
		all := slices.Concat(aggRuns...)
		if !slices.IsSorted(all) || len(all) != total/aggregates {
			t.Errorf("aggregate %s claimed as runs %v; want its %d messages in order", agg, aggRuns, total/aggregates)
		}
	}
}
