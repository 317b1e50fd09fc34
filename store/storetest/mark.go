package storetest

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

var markSpecs = []spec{
	{"MarkFailed_CountsAttemptsAndSchedulesRetry", testMarkFailedCountsAttemptsAndSchedulesRetry},
	{"MarkFailed_DeadMovesToDeadLetter", testMarkFailedDeadMovesToDeadLetter},
	{"MarkFailed_KeepsABoundedValidError", testMarkFailedKeepsABoundedValidError},
	{"MarkFailed_LastFailureOfASeqWins", testMarkFailedLastFailureOfASeqWins},
	{"Release_MakesMessagesDueWithoutCountingAnAttempt", testReleaseMakesMessagesDueWithoutCountingAnAttempt},
	{"Marks_EmptyOrUnknownSeqsChangeNothing", testMarksEmptyOrUnknownSeqsChangeNothing},
}

func testMarkFailedCountsAttemptsAndSchedulesRetry(t *testing.T, s *suite) {
	ms := []outbox.Message{msg("Order", "1"), msg("Order", "2"), msg("Order", "3")}
	seq := s.enqueue(t, ms...)
	c := s.claim(t, 10, time.Minute)
	before := time.Now()
	s.markFailed(t, c.Token, 3,
		store.Failure{Seq: seq[0], Error: "broker said no", Delay: time.Hour, CountAttempt: true},
		store.Failure{Seq: seq[1], Error: "broker unreachable", Delay: 30 * time.Minute},
		store.Failure{Seq: seq[2], Error: "again", Delay: -time.Hour, CountAttempt: true},
	)
	r0, r1, r2 := s.get(t, ms[0].ID), s.get(t, ms[1].ID), s.get(t, ms[2].ID)
	if r0.Status != outbox.StatusFailed || r0.Attempts != 1 || r0.LastError != "broker said no" ||
		r0.LeaseOwner != "" || !r0.LeaseExpiresAt.IsZero() {
		t.Errorf("counted failure: %+v; want FAILED, 1 attempt, the error, no lease", r0)
	}
	assertNear(t, "NextAttemptAt of a failure delayed 1h", r0.NextAttemptAt, before.Add(time.Hour))
	if r1.Status != outbox.StatusFailed || r1.Attempts != 0 || r1.LastError != "broker unreachable" {
		t.Errorf("uncounted failure: %+v; want FAILED, 0 attempts, the error", r1)
	}
	assertNear(t, "NextAttemptAt of a failure delayed 30m", r1.NextAttemptAt, before.Add(30*time.Minute))
	// A negative delay counts as zero: due now, not in the past.
	assertNear(t, "NextAttemptAt of a failure delayed -1h", r2.NextAttemptAt, before)
	assertSeqs(t, "claim after the failures", s.claim(t, 10, time.Minute).Records, seq[2])
}

func testMarkFailedDeadMovesToDeadLetter(t *testing.T, s *suite) {
	m := msg("Order", "1")
	seq := s.enqueue(t, m)
	c := s.claim(t, 10, time.Minute)
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[0], Error: "transient", CountAttempt: true})
	c = s.claim(t, 10, time.Minute)
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[0], Error: "too large", CountAttempt: true, Dead: true})
	got := s.get(t, m.ID)
	if got.Status != outbox.StatusDeadLetter || got.Attempts != 2 || got.LastError != "too large" ||
		got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() || !got.PublishedAt.IsZero() {
		t.Errorf("dead letter: %+v; want DEAD_LETTER, 2 attempts, the last error, no lease", got)
	}
	assertSeqs(t, "claim with only a dead letter", s.claim(t, 10, time.Minute).Records)
}

func testMarkFailedKeepsABoundedValidError(t *testing.T, s *suite) {
	m := msg("Order", "1")
	seq := s.enqueue(t, m)
	c := s.claim(t, 10, time.Minute)
	long := strings.Repeat("é", 3000) + "\xff" // 6,001 bytes, the last one not UTF-8
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[0], Error: long, CountAttempt: true})
	got := s.get(t, m.ID).LastError
	if len(got) == 0 || len(got) > 4000 || !strings.HasPrefix(long, got) || !utf8.ValidString(got) {
		t.Errorf("LastError of %d bytes (valid UTF-8: %v); want a valid prefix of at most 4,000 bytes",
			len(got), utf8.ValidString(got))
	}
}

func testMarkFailedLastFailureOfASeqWins(t *testing.T, s *suite) {
	m := msg("Order", "1")
	seq := s.enqueue(t, m)
	c := s.claim(t, 10, time.Minute)
	s.markFailed(t, c.Token, 1,
		store.Failure{Seq: seq[0], Error: "first", CountAttempt: true, Dead: true},
		store.Failure{Seq: seq[0], Error: "second", CountAttempt: true},
	)
	if got := s.get(t, m.ID); got.Status != outbox.StatusFailed || got.Attempts != 1 || got.LastError != "second" {
		t.Errorf("after two failures of one seq: %+v; want the second: FAILED, 1 attempt", got)
	}
}

func testReleaseMakesMessagesDueWithoutCountingAnAttempt(t *testing.T, s *suite) {
	ms := []outbox.Message{msg("Order", "1"), msg("Order", "2")}
	seq := s.enqueue(t, ms...)
	c := s.claim(t, 10, time.Hour)
	// seq[1] fails once (due at once) and is claimed again.
	s.markFailed(t, c.Token, 1, store.Failure{Seq: seq[1], Error: "e", CountAttempt: true})
	c2 := s.claim(t, 10, time.Hour)
	assertSeqs(t, "reclaim", c2.Records, seq[1])

	before := time.Now()
	s.release(t, c.Token, seq[:1], 1)
	s.release(t, c2.Token, seq[1:], 1)
	r0, r1 := s.get(t, ms[0].ID), s.get(t, ms[1].ID)
	if r0.Status != outbox.StatusPending || r0.Attempts != 0 || r0.LeaseOwner != "" || !r0.LeaseExpiresAt.IsZero() {
		t.Errorf("released fresh message: %+v; want PENDING without a lease", r0)
	}
	if r1.Status != outbox.StatusFailed || r1.Attempts != 1 || r1.LastError != "e" || r1.LeaseOwner != "" || !r1.LeaseExpiresAt.IsZero() {
		t.Errorf("released failed message: %+v; want FAILED with 1 attempt, its error, no lease", r1)
	}
	assertNear(t, "NextAttemptAt after release", r0.NextAttemptAt, before)
	assertSeqs(t, "claim after release", s.claim(t, 10, time.Hour).Records, seq[0], seq[1])
}

func testMarksEmptyOrUnknownSeqsChangeNothing(t *testing.T, s *suite) {
	m := msg("Order", "1")
	seq := s.enqueue(t, m)
	c := s.claim(t, 10, time.Hour)
	unknown := []int64{seq[0] + 1000}
	for _, seqs := range [][]int64{nil, {}, unknown} {
		s.markSent(t, c.Token, seqs, 0)
		s.release(t, c.Token, seqs, 0)
	}
	s.markFailed(t, c.Token, 0)
	s.markFailed(t, c.Token, 0, store.Failure{Seq: unknown[0], Error: "x"})
	s.markSent(t, uuid.Nil, seq, 0)
	s.assertStoredClaimed(t, "after calls with empty or unknown seqs", m.ID, "relay-A", time.Time{})
	// The claim is intact: its token still marks it.
	s.markSent(t, c.Token, seq, 1)
}
