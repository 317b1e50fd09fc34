package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

var claimSpecs = []spec{
	{"Claim_LeasesOnlyTheHeadOfEachAggregate", testClaimLeasesOnlyTheHeadOfEachAggregate},
	{"Claim_RespectsLimitInSeqOrder", testClaimRespectsLimitInSeqOrder},
	{"Claim_SentMessagesAreNeverClaimed", testClaimSentMessagesAreNeverClaimed},
	{"Claim_FailedNotYetDueBlocksItsAggregateOnly", testClaimFailedNotYetDueBlocksItsAggregateOnly},
	{"Claim_FailedAndDueIsClaimedAgain", testClaimFailedAndDueIsClaimedAgain},
	{"Claim_DeadLetterBlocksItsAggregateOnly", testClaimDeadLetterBlocksItsAggregateOnly},
	{"Claim_RejectsLeaseBelowOneMillisecond", testClaimRejectsLeaseBelowOneMillisecond},
	{"Claim_ConcurrentClaimsNeverShareAMessage", testClaimConcurrentClaimsNeverShareAMessage},
	{"Claim_FindsAHeadBehindALongBlockedBacklog", testClaimFindsAHeadBehindALongBlockedBacklog},
	{"Claim_TakesTurnsBetweenAggregatesBehindABlockedBacklog", testClaimTakesTurnsBetweenAggregatesBehindABlockedBacklog},
	{"Claim_RowWithHeadersNotStringsIsInvalidAndStopsNoOther", testClaimRowWithHeadersNotStringsIsInvalidAndStopsNoOther},
}

// blockedBacklog is longer than any store's claim looks at in seq order
// for a small batch (both read a span of a few hundred messages).
const blockedBacklog = 1200

// enqueueBlockedBacklog enqueues n messages round robin over the Order
// aggregates ids, then blocks the head of the first, ids[0], with a failure
// due in an hour: its messages wait behind it.
func (s *suite) enqueueBlockedBacklog(t *testing.T, n int, ids ...string) []int64 {
	t.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = msg("Order", ids[i%len(ids)])
	}
	seq := s.enqueue(t, msgs...)
	c := s.claim(t, 1, time.Minute)
	assertSeqs(t, "claim of the head to block", c.Records, seq[0])
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[0], Error: "boom", Delay: time.Hour, CountAttempt: true})
	return seq
}

func testClaimLeasesOnlyTheHeadOfEachAggregate(t *testing.T, s *suite) {
	seq := s.enqueue(t, msg("Order", "a"), msg("Order", "a"), msg("Order", "b"), msg("Order", "a"),
		msg("Invoice", "a"), msg("Order", "b"))
	// Order/a: 0 1 3; Order/b: 2 5; Invoice/a: 4 (same id, other type).
	before := time.Now()
	c := s.claim(t, 10, time.Minute)
	assertSeqs(t, "first claim", c.Records, seq[0], seq[2], seq[4])
	if c.Token == uuid.Nil {
		t.Error("claim token is nil")
	}
	for _, r := range c.Records {
		if r.Status != outbox.StatusInFlight || r.LeaseOwner != "relay-A" || len(r.Payload) == 0 {
			t.Errorf("claimed record %d: status %s, owner %q, payload %q; want IN_FLIGHT, relay-A, the payload",
				r.Seq, r.Status, r.LeaseOwner, r.Payload)
		}
		assertNear(t, "LeaseExpiresAt", r.LeaseExpiresAt, before.Add(time.Minute))
		s.assertStoredClaimed(t, fmt.Sprintf("claimed record %d", r.Seq), r.ID, "relay-A", r.LeaseExpiresAt)
	}

	// The heads are IN_FLIGHT and still block their aggregates.
	assertSeqs(t, "claim while the heads are in flight", s.claim(t, 10, time.Minute).Records)

	s.markSent(t, c.Token, []int64{seq[0], seq[2]}, 2)
	c2 := s.claim(t, 10, time.Minute)
	assertSeqs(t, "claim after two heads were sent", c2.Records, seq[1], seq[5])
	if c2.Token == c.Token {
		t.Error("two claims got the same token")
	}
}

func testClaimRespectsLimitInSeqOrder(t *testing.T, s *suite) {
	var msgs []outbox.Message
	for i := range 5 {
		msgs = append(msgs, msg("Order", fmt.Sprint(i)))
	}
	seq := s.enqueue(t, msgs...)
	assertSeqs(t, "limit 2", s.claim(t, 2, time.Minute).Records, seq[0], seq[1])
	assertSeqs(t, "limit 0", s.claim(t, 0, time.Minute).Records)
	assertSeqs(t, "limit -1", s.claim(t, -1, time.Minute).Records)
	assertSeqs(t, "limit 10", s.claim(t, 10, time.Minute).Records, seq[2], seq[3], seq[4])
}

func testClaimSentMessagesAreNeverClaimed(t *testing.T, s *suite) {
	m := msg("Order", "a")
	seq := s.enqueue(t, m)
	before := time.Now()
	c := s.claim(t, 10, shortLease)
	s.markSent(t, c.Token, seq, 1)
	if got, kept := s.assertSent(t, "after MarkSent", m.ID); kept {
		if got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() || got.LastError != "" {
			t.Errorf("after MarkSent: %+v; want SENT without a lease", got)
		}
		if !s.h.ClaimsInMemory {
			assertNear(t, "PublishedAt", got.PublishedAt, before)
		}
	}
	// Not even after the claim's lease would have expired.
	time.Sleep(2 * shortLease)
	assertSeqs(t, "claim after MarkSent", s.claim(t, 10, time.Minute).Records)
}

func testClaimFailedNotYetDueBlocksItsAggregateOnly(t *testing.T, s *suite) {
	seq := s.enqueue(t, msg("Order", "a"), msg("Order", "a"), msg("Order", "b"))
	c := s.claim(t, 1, time.Minute)
	assertSeqs(t, "first claim", c.Records, seq[0])
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[0], Error: "boom", Delay: time.Hour, CountAttempt: true})
	assertSeqs(t, "claim while a's head waits for its retry", s.claim(t, 10, time.Minute).Records, seq[2])
}

func testClaimFailedAndDueIsClaimedAgain(t *testing.T, s *suite) {
	seq := s.enqueue(t, msg("Order", "a"), msg("Order", "a"))
	c := s.claim(t, 10, time.Minute)
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[0], Error: "boom", CountAttempt: true})
	c2 := s.claim(t, 10, time.Minute)
	assertSeqs(t, "claim after a failure due at once", c2.Records, seq[0])
	if len(c2.Records) == 1 {
		if r := c2.Records[0]; r.Attempts != 1 || r.LastError != "boom" || r.Status != outbox.StatusInFlight {
			t.Errorf("reclaimed record: status %s, attempts %d, last error %q; want IN_FLIGHT, 1, boom", r.Status, r.Attempts, r.LastError)
		}
	}
}

func testClaimDeadLetterBlocksItsAggregateOnly(t *testing.T, s *suite) {
	seq := s.enqueue(t, msg("Order", "a"), msg("Order", "a"), msg("Order", "b"))
	c := s.claim(t, 1, time.Minute)
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[0], Error: "poison", Dead: true})
	c = s.claim(t, 10, time.Minute)
	assertSeqs(t, "claim with a's head dead", c.Records, seq[2])
	s.markSent(t, c.Token, []int64{seq[2]}, 1)
	assertSeqs(t, "claim with only the dead letter's aggregate left", s.claim(t, 10, time.Minute).Records)
}

func testClaimRejectsLeaseBelowOneMillisecond(t *testing.T, s *suite) {
	seq := s.enqueue(t, msg("Order", "1"))
	for _, lease := range []time.Duration{0, -time.Second, time.Millisecond - 1} {
		if _, err := s.h.Queue.Claim(s.ctx, store.ClaimParams{Owner: "r", Limit: 1, Lease: lease}); err == nil {
			t.Errorf("Claim with lease %v succeeded", lease)
		}
	}
	assertSeqs(t, "claim after the rejected ones", s.claim(t, 10, time.Minute).Records, seq[0])
}

func testClaimConcurrentClaimsNeverShareAMessage(t *testing.T, s *suite) {
	if !s.h.Concurrent {
		t.Skip("the store does not claim concurrently (Harness.Concurrent is false)")
	}
	const total, aggregates, workers = 800, 40, 4
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
		claimed = map[int64]int{}      // seq -> times claimed
		order   = map[string][]int64{} // aggregate -> seqs in claim order
		twice   []string               // aggregates returned twice by one claim
		done    atomic.Int64           // messages marked sent
		wg      sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for done.Load() < total && ctx.Err() == nil {
				c, err := s.h.Queue.Claim(ctx, store.ClaimParams{Owner: fmt.Sprint("w", w), Limit: 7, Lease: time.Minute})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(c.Records) == 0 {
					time.Sleep(time.Millisecond) // the others hold the heads
					continue
				}
				mu.Lock()
				seen := map[string]bool{}
				for _, r := range c.Records {
					claimed[r.Seq]++
					if seen[r.AggregateID] {
						twice = append(twice, r.AggregateID)
					}
					seen[r.AggregateID] = true
					order[r.AggregateID] = append(order[r.AggregateID], r.Seq)
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
	if len(twice) > 0 {
		t.Errorf("claims returned two messages of one aggregate: %v", twice)
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

// claimsToReadPast is how many claims of limit it takes a store to reach
// a head behind n messages that cannot go: one for a store that claims from
// its table, which finds heads wherever they are; for one that claims from
// memory (Harness.ClaimsInMemory), which reads in seq order a batch per
// claim, the claims that read the n messages first.
func (s *suite) claimsToReadPast(n, limit int) int {
	if s.h.ClaimsInMemory {
		return n/limit + 2
	}
	return 1
}

// A head behind a long backlog that waits for its aggregate's failed head
// is still claimed: a claim does not stop at the first messages in seq
// order when none of them can go.
func testClaimFindsAHeadBehindALongBlockedBacklog(t *testing.T, s *suite) {
	seq := s.enqueueBlockedBacklog(t, blockedBacklog, "hot-a", "hot-b")
	cold := s.enqueue(t, msg("Order", "cold"))
	// hot-a waits for its retry; hot-b's head is seq[1].
	const limit = 10
	var got []int64
	claims := s.claimsToReadPast(blockedBacklog, limit)
	for range claims {
		got = append(got, seqsOf(s.claim(t, limit, time.Minute).Records)...)
		if slices.Contains(got, cold[0]) {
			break
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []int64{seq[1], cold[0]}) {
		t.Errorf("%d claims of %d behind the blocked backlog claimed seqs %v, want %v", claims, limit, got, []int64{seq[1], cold[0]})
	}
}

// Claims that find their heads behind a blocked backlog go round the
// aggregates: the first 60 messages they serve of 30 aggregates (4
// messages each) are each aggregate's first two, rather than the first
// aggregates' next messages again as soon as those are due.
func testClaimTakesTurnsBetweenAggregatesBehindABlockedBacklog(t *testing.T, s *suite) {
	const backlog = blockedBacklog / 2
	s.enqueueBlockedBacklog(t, backlog, "blocked")
	ids := make([]string, 30)
	msgs := make([]outbox.Message, 0, 4*len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("agg-%02d", i)
	}
	for range 4 {
		for _, id := range ids {
			msgs = append(msgs, msg("Order", id))
		}
	}
	s.enqueue(t, msgs...)
	const limit, rounds = 5, 2
	// The claims until the first one that serves the aggregates (the
	// first claim, for a store that claims from its table).
	c := s.claim(t, limit, time.Minute)
	for range s.claimsToReadPast(backlog, limit) - 1 {
		if len(c.Records) > 0 {
			break
		}
		c = s.claim(t, limit, time.Minute)
	}
	// Claims until 60 messages were served: twelve for a store whose claims
	// are full; one that reads a batch per claim may need a few more.
	var order []string // the aggregates served, claim by claim
	for i := 0; len(order) < rounds*len(ids) && i < rounds*len(ids)/limit+2; i++ {
		if i > 0 {
			c = s.claim(t, limit, time.Minute)
		}
		for _, r := range c.Records {
			order = append(order, r.AggregateID)
		}
		s.markSent(t, c.Token, seqsOf(c.Records), int64(len(c.Records)))
		if !s.h.ClaimsInMemory && len(c.Records) != limit {
			t.Errorf("claim %d of the round got %d messages, want %d", i+1, len(c.Records), limit)
		}
	}
	served := map[string]int{}
	for _, id := range order[:min(len(order), rounds*len(ids))] {
		served[id]++
	}
	if len(served) != len(ids) {
		t.Errorf("claims of %d served %d aggregates, want all %d: %v", limit, len(served), len(ids), served)
	}
	for id, n := range served {
		if n != rounds {
			t.Errorf("aggregate %s served %d times in %d rounds", id, n, rounds)
		}
	}
}

// badHeaders are headers column values that break the rule, with the field
// and rule Record.Invalid must name for each.
var badHeaders = []struct{ json, field, rule string }{
	{`{"x": 1}`, `headers["x"]`, "value must be a string, is a number"},
	{`{"a": "ok", "x": null}`, `headers["x"]`, "value must be a string, is null"},
	{`[]`, "headers", "must be a JSON object of string values, is an array"},
	{`null`, "headers", "must be a JSON object of string values, is null"},
}

// A row written with plain SQL whose headers are not a JSON object of
// string values is claimed as the head of its aggregate, with
// Record.Invalid naming the column and the rule, beside the valid messages
// of the batch, which the claim returns whole; Get reads it too. Once it is
// dead-lettered, the later message of its aggregate waits behind it.
func testClaimRowWithHeadersNotStringsIsInvalidAndStopsNoOther(t *testing.T, s *suite) {
	if s.h.InsertUnchecked == nil {
		t.Skip("the harness cannot write a row with other headers")
	}
	valid := fullMessage()
	before := s.enqueue(t, valid)[0]
	bad := make([]outbox.Message, len(badHeaders))
	for i, b := range badHeaders {
		bad[i] = msg("Order", fmt.Sprint("bad-", i))
		if err := s.h.InsertUnchecked(s.ctx, bad[i], b.json); err != nil {
			t.Fatalf("InsertUnchecked(%s): %v", b.json, err)
		}
	}
	behind := s.enqueue(t, msg("Order", "bad-0"))[0]
	after := s.enqueue(t, msg("Order", "other"))[0]

	c := s.claim(t, 10, time.Minute)
	if len(c.Records) != 2+len(bad) || c.Records[0].Seq != before || c.Records[len(c.Records)-1].Seq != after {
		t.Fatalf("claimed seqs %v; want %d (valid), the %d rows with bad headers and %d, not %d behind one",
			seqsOf(c.Records), before, len(bad), after, behind)
	}
	for _, rec := range []outbox.Record{c.Records[0], c.Records[len(c.Records)-1]} {
		if rec.Invalid != nil {
			t.Errorf("valid message %d claimed with Invalid %v", rec.Seq, rec.Invalid)
		}
	}
	if got := c.Records[0]; !maps.Equal(got.Headers, valid.Headers) {
		t.Errorf("valid message's headers %v; want %v", got.Headers, valid.Headers)
	}
	var failures []store.Failure
	for i, rec := range c.Records[1 : 1+len(bad)] {
		assertInvalidHeaders(t, "claimed", rec, bad[i].ID, badHeaders[i].field, badHeaders[i].rule)
		failures = append(failures, store.Failure{Seq: rec.Seq, Error: rec.Invalid.Error(), CountAttempt: true, Dead: true})
	}
	assertInvalidHeaders(t, "Get", s.get(t, bad[0].ID), bad[0].ID, badHeaders[0].field, badHeaders[0].rule)

	s.markSent(t, c.Token, []int64{before, after}, 2)
	s.markFailed(t, c.Token, int64(len(failures)), failures...)
	if c := s.claim(t, 10, time.Minute); len(c.Records) != 0 {
		t.Errorf("claim after the dead letters took %v; want nothing (%d waits behind a dead letter)", seqsOf(c.Records), behind)
	}
	dead := s.get(t, bad[0].ID)
	if dead.Status != outbox.StatusDeadLetter || dead.LastError != failures[0].Error {
		t.Errorf("row with bad headers: %s, last error %q; want DEAD_LETTER with %q", dead.Status, dead.LastError, failures[0].Error)
	}
}

// assertInvalidHeaders checks that rec is the message id, read without
// headers and with Invalid naming field and rule.
func assertInvalidHeaders(t *testing.T, what string, rec outbox.Record, id uuid.UUID, field, rule string) {
	t.Helper()
	var ve *outbox.ValidationError
	switch {
	case rec.ID != id:
		t.Errorf("%s: record %d has id %s; want %s", what, rec.Seq, rec.ID, id)
	case !errors.As(rec.Invalid, &ve) || !errors.Is(rec.Invalid, outbox.ErrInvalidMessage):
		t.Errorf("%s: record %d: Invalid %v; want a *outbox.ValidationError", what, rec.Seq, rec.Invalid)
	case ve.Field != field || ve.Rule != rule || rec.Headers != nil:
		t.Errorf("%s: record %d: Invalid %q, headers %v; want field %s, rule %q, no headers", what, rec.Seq, rec.Invalid, rec.Headers, field, rule)
	}
}
