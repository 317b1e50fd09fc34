package relay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// takeoverQueue is a pgstore whose claims are taken over by another relay
// just before this one records its failures: MarkFailed is fenced.
type takeoverQueue struct {
	*pgstore.Store
	b *bundle
}

func (q takeoverQueue) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	seqs := make([]int64, len(failures))
	for i, f := range failures {
		seqs[i] = f.Seq
	}
	// What another relay's claim of the expired lease writes.
	if _, err := q.b.pool.Exec(ctx, fmt.Sprintf(
		"UPDATE %s.outbox_messages SET lease_token = gen_random_uuid(), lease_owner = 'other' WHERE seq = ANY($1)",
		q.b.schema), seqs); err != nil {
		return 0, err
	}
	return q.Store.MarkFailed(ctx, token, failures)
}

// A failure the relay could not record, because another relay took its
// messages over, is that relay's to decide: it is neither reported as a
// dead letter (Hooks.Failed) nor written.
func TestRelay_FencedFailureIsNotReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg("A", 1)
	m.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, m)
	var tried, reported atomic.Int64
	s := &fakeSink{fn: func(int, outbox.Record) error {
		tried.Add(1)
		return fmt.Errorf("%w: MESSAGE_TOO_LARGE", sink.ErrPermanent)
	}}
	cfg := fastConfig(b, s)
	cfg.Store = takeoverQueue{Store: b.store, b: b}
	cfg.Hooks.Failed = func(outbox.Record, error, bool) { reported.Add(1) }
	startRelay(t, cfg)
	eventually(t, 5*time.Second, "a publish failed", func() bool { return tried.Load() > 0 })
	time.Sleep(100 * time.Millisecond)
	if n := reported.Load(); n != 0 {
		t.Fatalf("Hooks.Failed called %d times for a failure another relay owns; want 0", n)
	}
	if st := b.get(t, m.ID).Status; st == outbox.StatusDeadLetter {
		t.Fatalf("the fenced relay dead-lettered the message (%s)", st)
	}
}

// shortSink is a sink with a bug: it returns one result fewer than it was
// given records.
type shortSink struct{ calls atomic.Int64 }

func (s *shortSink) Publish(_ context.Context, recs []outbox.Record) []error {
	s.calls.Add(1)
	return make([]error, len(recs)-1)
}

func (s *shortSink) Close() error { return nil }

// A sink that breaks its contract (another number of results than records)
// costs no attempt and no dead letter: the relay treats it as an
// unreachable broker and pauses.
func TestRelay_SinkBugCountsNoAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg("A", 1)
	m.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, m)
	s := &shortSink{}
	cfg := fastConfig(b, s)
	cfg.MaxAttempts = 1
	startRelay(t, cfg)
	eventually(t, 5*time.Second, "the sink was called", func() bool { return s.calls.Load() > 0 })
	eventually(t, 5*time.Second, "the message is back in the table", func() bool {
		return b.get(t, m.ID).Status != outbox.StatusInFlight
	})
	got := b.get(t, m.ID)
	if got.Status == outbox.StatusDeadLetter || got.Attempts != 0 {
		t.Fatalf("after a sink bug the message is %s with %d attempts; want not dead, 0 attempts", got.Status, got.Attempts)
	}
}
