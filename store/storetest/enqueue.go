package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
)

var enqueueSpecs = []spec{
	{"Enqueue_CommittedIsStoredWithAllFields", testEnqueueCommittedIsStoredWithAllFields},
	{"Enqueue_FillsDefaults", testEnqueueFillsDefaults},
	{"Enqueue_RolledBackIsInvisible", testEnqueueRolledBackIsInvisible},
	{"Enqueue_InvalidBatchWritesNothing", testEnqueueInvalidBatchWritesNothing},
	{"Enqueue_NoMessagesWritesNothing", testEnqueueNoMessagesWritesNothing},
	{"Enqueue_SeqFollowsEnqueueOrder", testEnqueueSeqFollowsEnqueueOrder},
	{"Get_UnknownIDIsNotFound", testGetUnknownIDIsNotFound},
}

func testEnqueueCommittedIsStoredWithAllFields(t *testing.T, s *suite) {
	m := fullMessage()
	before := time.Now()
	s.enqueue(t, m)
	got := s.get(t, m.ID)
	if !reflect.DeepEqual(got.Message, m) {
		t.Errorf("stored message = %+v\nwant %+v", got.Message, m)
	}
	if got.Status != outbox.StatusPending || got.Attempts != 0 || got.Seq <= 0 || got.LastError != "" ||
		got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() || !got.PublishedAt.IsZero() {
		t.Errorf("stored state = %+v, want a fresh PENDING message", got)
	}
	assertNear(t, "CreatedAt", got.CreatedAt, before)
	assertNear(t, "NextAttemptAt", got.NextAttemptAt, before)

	// The claim returns the same message.
	c := s.claim(t, 10, time.Minute)
	if len(c.Records) != 1 || !reflect.DeepEqual(c.Records[0].Message, m) {
		t.Errorf("claimed %+v\nwant %+v", c.Records, m)
	}
}

func testEnqueueFillsDefaults(t *testing.T, s *suite) {
	m := msg("Order", "1")
	s.enqueue(t, m)
	got := s.get(t, m.ID)
	if got.EventVersion != 1 || got.ContentType != outbox.ContentTypeJSON || got.Headers != nil ||
		got.Topic != "" || got.CorrelationID != "" || got.CausationID != "" || got.TraceParent != "" {
		t.Errorf("defaults: %+v; want version 1, JSON content type, no headers, empty optional fields", got.Message)
	}
}

func testEnqueueRolledBackIsInvisible(t *testing.T, s *suite) {
	m, m2 := fullMessage(), msg("Order", "2")
	if err := s.h.EnqueueRollback(s.ctx, m, m2); err != nil {
		t.Fatalf("EnqueueRollback: %v", err)
	}
	s.assertGone(t, m.ID)
	s.assertGone(t, m2.ID)
	assertSeqs(t, "claim after a rolled-back enqueue", s.claim(t, 10, time.Minute).Records)
}

func testEnqueueInvalidBatchWritesNothing(t *testing.T, s *suite) {
	good, bad, good2 := msg("Order", "1"), msg("Order", ""), msg("Order", "3")
	err := s.h.Enqueue(s.ctx, good, bad, good2)
	var ve *outbox.ValidationError
	if !errors.As(err, &ve) || ve.Index != 1 || ve.Field != "aggregateId" || !errors.Is(err, outbox.ErrInvalidMessage) {
		t.Errorf("Enqueue error = %v, want a ValidationError at index 1, field aggregateId, wrapping ErrInvalidMessage", err)
	}
	s.assertGone(t, good.ID)
	s.assertGone(t, good2.ID)
	assertSeqs(t, "claim after an invalid batch", s.claim(t, 10, time.Minute).Records)
}

func testEnqueueNoMessagesWritesNothing(t *testing.T, s *suite) {
	if err := s.h.Enqueue(s.ctx); err != nil {
		t.Errorf("Enqueue() = %v, want nil", err)
	}
	assertSeqs(t, "claim after an empty enqueue", s.claim(t, 10, time.Minute).Records)
}

func testEnqueueSeqFollowsEnqueueOrder(t *testing.T, s *suite) {
	first := s.enqueue(t, msg("Order", "b"), msg("Order", "a"), msg("Invoice", "a"))
	second := s.enqueue(t, msg("Order", "a"))
	all := append(first, second...)
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			t.Errorf("seqs %v do not increase in enqueue order", all)
			break
		}
	}
}

func testGetUnknownIDIsNotFound(t *testing.T, s *suite) {
	s.enqueue(t, msg("Order", "1"))
	s.assertGone(t, fullMessage().ID)
}
