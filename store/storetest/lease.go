package storetest

import (
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

var leaseSpecs = []spec{
	{"Lease_UnexpiredIsNotReclaimed", testLeaseUnexpiredIsNotReclaimed},
	{"Lease_ExpiredIsReclaimedWithNewToken", testLeaseExpiredIsReclaimedWithNewToken},
	{"Fencing_OldTokenChangesNothingAfterTakeover", testFencingOldTokenChangesNothingAfterTakeover},
	{"Fencing_WrongTokenChangesNothing", testFencingWrongTokenChangesNothing},
}

func testLeaseUnexpiredIsNotReclaimed(t *testing.T, s *suite) {
	seq := s.enqueue(t, msg("Order", "a"), msg("Order", "b"))
	first := s.claim(t, 1, time.Hour)
	assertSeqs(t, "first claim", first.Records, seq[0])
	time.Sleep(2 * shortLease)
	assertSeqs(t, "claim under an unexpired lease", s.claimAs(t, "relay-B", 10, time.Hour).Records, seq[1])
}

func testLeaseExpiredIsReclaimedWithNewToken(t *testing.T, s *suite) {
	m := msg("Order", "a")
	seq := s.enqueue(t, m)
	first := s.claim(t, 10, shortLease)
	assertSeqs(t, "first claim", first.Records, seq[0])

	second := s.claimOnceExpired(t, "relay-B", 10, time.Hour)
	took := time.Now()
	assertSeqs(t, "claim after expiry", second.Records, seq[0])
	if second.Token == first.Token {
		t.Error("the takeover reused the old token")
	}
	if got := s.assertStoredClaimed(t, "after takeover", m.ID, "relay-B", time.Time{}); got.Attempts != 0 {
		t.Errorf("after takeover: %d attempts, want none counted", got.Attempts)
	}
	if r := second.Records[0]; r.LeaseOwner != "relay-B" || r.Status != outbox.StatusInFlight {
		t.Errorf("taken over record: %+v; want IN_FLIGHT, owner relay-B", r)
	}
	assertNear(t, "LeaseExpiresAt after takeover", second.Records[0].LeaseExpiresAt, took.Add(time.Hour))
}

func testFencingOldTokenChangesNothingAfterTakeover(t *testing.T, s *suite) {
	m := msg("Order", "a")
	seq := s.enqueue(t, m)
	a := s.claim(t, 10, shortLease)
	b := s.claimOnceExpired(t, "relay-B", 10, time.Hour)
	want := s.get(t, m.ID)

	s.markSent(t, a.Token, seq, 0)
	s.markFailed(t, a.Token, 0, store.Failure{Seq: seq[0], Error: "x", CountAttempt: true, Dead: true})
	s.release(t, a.Token, seq, 0)
	got := s.assertStoredClaimed(t, "after the old token's calls", m.ID, "relay-B", want.LeaseExpiresAt)
	if got.Attempts != 0 || got.LastError != "" || !got.PublishedAt.IsZero() {
		t.Errorf("after the old token's calls: %+v; want B's lease intact", got)
	}
	// B's lease holds: nobody else gets the message meanwhile.
	assertSeqs(t, "claim under B's lease", s.claimAs(t, "relay-C", 10, time.Hour).Records)

	s.markSent(t, b.Token, seq, 1)
	s.assertSent(t, "after MarkSent with B's token", m.ID)
	// Once SENT, nothing is IN_FLIGHT under B's token any more.
	s.markSent(t, b.Token, seq, 0)
	s.markFailed(t, b.Token, 0, store.Failure{Seq: seq[0], Error: "late"})
	s.release(t, b.Token, seq, 0)
	if got, kept := s.assertSent(t, "after calls on a SENT message", m.ID); kept && got.LastError != "" {
		t.Errorf("after calls on a SENT message: %+v; want it unchanged", got)
	}
}

func testFencingWrongTokenChangesNothing(t *testing.T, s *suite) {
	m, m2 := msg("Order", "a"), msg("Order", "b")
	seq := s.enqueue(t, m)
	other := s.enqueue(t, m2)
	c := s.claim(t, 10, time.Hour)
	assertSeqs(t, "claim", c.Records, seq[0], other[0])
	stranger := s.claim(t, 10, time.Hour).Token // a real token that owns nothing

	s.markSent(t, stranger, seq, 0)
	s.markFailed(t, stranger, 0, store.Failure{Seq: seq[0], Error: "x", CountAttempt: true})
	s.release(t, stranger, seq, 0)
	if got := s.assertStoredClaimed(t, "after calls with a stranger's token", m.ID, "relay-A", time.Time{}); got.Attempts != 0 {
		t.Errorf("after calls with a stranger's token: %d attempts, want A's lease intact", got.Attempts)
	}
	// The owner's token changes only the seqs it is given.
	s.markSent(t, c.Token, seq, 1)
	s.assertSent(t, "after MarkSent", m.ID)
	s.markSent(t, c.Token, []int64{other[0] + 1000}, 0)
	s.assertStoredClaimed(t, "the claim's other message", m2.ID, "relay-A", time.Time{})
	// Still A's: MarkSent with A's token sends it.
	s.markSent(t, c.Token, other, 1)
}
