package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

var opsSpecs = []spec{
	{"Counts_CountsEveryStatus", testCountsCountsEveryStatus},
	{"Cleanup_DeletesOnlySentMessages", testCleanupDeletesOnlySentMessages},
	{"Cleanup_KeepsMessagesSentMoreRecentlyThanTheAge", testCleanupKeepsMessagesSentMoreRecentlyThanTheAge},
}

// oneOfEach leaves the store with one message in every status, and two
// PENDING (one waiting behind the IN_FLIGHT one). It returns the ids by
// status.
func (s *suite) oneOfEach(t *testing.T) map[outbox.Status][]uuid.UUID {
	t.Helper()
	sent, failed, dead, inFlight, pending := msg("Order", "s"), msg("Order", "f"), msg("Order", "d"), msg("Order", "i"), msg("Order", "p")
	behind := msg("Order", "i")
	seq := s.enqueue(t, sent, failed, dead, inFlight, behind, pending)
	c := s.claim(t, 4, time.Hour) // sent, failed, dead, inFlight
	assertSeqs(t, "claim", c.Records, seq[0], seq[1], seq[2], seq[3])
	s.markSent(t, c.Token, seq[:1], 1)
	s.markFailed(t, c.Token, 2,
		store.Failure{Seq: seq[1], Error: "e", Delay: time.Hour, CountAttempt: true},
		store.Failure{Seq: seq[2], Error: "e", Dead: true})
	byStatus := map[outbox.Status][]uuid.UUID{
		outbox.StatusSent:       {sent.ID},
		outbox.StatusFailed:     {failed.ID},
		outbox.StatusDeadLetter: {dead.ID},
		outbox.StatusInFlight:   {inFlight.ID},
		outbox.StatusPending:    {behind.ID, pending.ID},
	}
	if s.h.SentDeleted { // the sent one was deleted
		byStatus[outbox.StatusSent] = nil
	}
	if s.h.ClaimsInMemory { // the claimed one is stored PENDING
		byStatus[outbox.StatusPending] = append(byStatus[outbox.StatusPending], inFlight.ID)
		byStatus[outbox.StatusInFlight] = nil
	}
	return byStatus
}

func testCountsCountsEveryStatus(t *testing.T, s *suite) {
	if s.h.Counts == nil {
		t.Skip("the store has no Counts (Harness.Counts is nil)")
	}
	got, err := s.h.Counts(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for st, n := range got {
		if n != 0 {
			t.Errorf("Counts of an empty store: %s = %d, want 0", st, n)
		}
	}
	byStatus := s.oneOfEach(t)
	if got, err = s.h.Counts(s.ctx); err != nil {
		t.Fatal(err)
	}
	for _, st := range []outbox.Status{outbox.StatusPending, outbox.StatusInFlight, outbox.StatusSent, outbox.StatusFailed, outbox.StatusDeadLetter} {
		n, ok := got[st]
		if !ok || n != int64(len(byStatus[st])) {
			t.Errorf("Counts[%s] = %d (present: %v), want %d", st, n, ok, len(byStatus[st]))
		}
	}
	for st, n := range got {
		if _, known := byStatus[st]; !known && n != 0 {
			t.Errorf("Counts[%s] = %d, want 0", st, n)
		}
	}
}

func testCleanupDeletesOnlySentMessages(t *testing.T, s *suite) {
	if s.h.Cleanup == nil {
		t.Skip("the store has no Cleanup (Harness.Cleanup is nil)")
	}
	byStatus := s.oneOfEach(t)
	// Four more SENT messages, so that a batch of 2 needs three rounds.
	more := []outbox.Message{msg("Order", "s1"), msg("Order", "s2"), msg("Order", "s3"), msg("Order", "s4")}
	seq := s.enqueue(t, more...)
	pending := s.get(t, byStatus[outbox.StatusPending][1]).Seq
	c := s.claim(t, 10, time.Hour)
	assertSeqs(t, "claim of the new ones", c.Records, append([]int64{pending}, seq...)...)
	s.markSent(t, c.Token, seq, 4)
	s.release(t, c.Token, []int64{pending}, 1)
	for _, m := range more {
		byStatus[outbox.StatusSent] = append(byStatus[outbox.StatusSent], m.ID)
	}

	if n, err := s.h.Cleanup(s.ctx, time.Hour, 2); err != nil || n != 0 {
		t.Errorf("Cleanup(1h) = %d, %v; want 0: everything was sent just now", n, err)
	}
	for _, id := range byStatus[outbox.StatusSent] {
		s.get(t, id)
	}
	if n, err := s.h.Cleanup(s.ctx, 0, 2); err != nil || n != 5 {
		t.Errorf("Cleanup(0) = %d, %v; want 5", n, err)
	}
	for st, ids := range byStatus {
		for _, id := range ids {
			if st == outbox.StatusSent {
				s.assertGone(t, id)
			} else if got := s.get(t, id); got.Status != st {
				t.Errorf("after Cleanup: status %s, want %s", got.Status, st)
			}
		}
	}
	// The messages behind the deleted ones are unaffected: the pending one
	// is still claimable and the other still waits for its in-flight head.
	c = s.claim(t, 10, time.Hour)
	if len(c.Records) != 1 || c.Records[0].ID != byStatus[outbox.StatusPending][1] {
		t.Errorf("claim after Cleanup returned %v, want the one free PENDING message", seqsOf(c.Records))
	}
}

func testCleanupKeepsMessagesSentMoreRecentlyThanTheAge(t *testing.T, s *suite) {
	if s.h.Cleanup == nil {
		t.Skip("the store has no Cleanup (Harness.Cleanup is nil)")
	}
	const age = time.Second
	old, recent := msg("Order", "old"), msg("Order", "recent")
	seq := s.enqueue(t, old, recent)
	c := s.claim(t, 10, time.Hour)
	s.markSent(t, c.Token, seq[:1], 1)
	time.Sleep(age + age/2)
	s.markSent(t, c.Token, seq[1:], 1)
	if n, err := s.h.Cleanup(s.ctx, age, 10); err != nil || n != 1 {
		t.Errorf("Cleanup(%v) = %d, %v; want 1", age, n, err)
	}
	s.assertGone(t, old.ID)
	s.get(t, recent.ID)
}
