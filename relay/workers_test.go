package relay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
)

// gatedSink holds every publish until the test opens its gate, so a test
// sees which batches are in flight at once.
type gatedSink struct {
	mu       sync.Mutex
	inFlight []*gatedCall
}

type gatedCall struct {
	recs []outbox.Record
	open chan struct{}
	once sync.Once
}

// release lets the publish return; calling it again does nothing.
func (c *gatedCall) release() { c.once.Do(func() { close(c.open) }) }

func (s *gatedSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	c := &gatedCall{recs: recs, open: make(chan struct{})}
	s.mu.Lock()
	s.inFlight = append(s.inFlight, c)
	s.mu.Unlock()
	errs := make([]error, len(recs))
	select {
	case <-c.open:
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
	s.mu.Lock()
	for i, f := range s.inFlight {
		if f == c {
			s.inFlight = append(s.inFlight[:i], s.inFlight[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	return errs
}

func (s *gatedSink) Close() error { return nil }

// calls returns the publishes in flight now.
func (s *gatedSink) calls() []*gatedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*gatedCall(nil), s.inFlight...)
}

func (s *gatedSink) openAll() {
	for _, c := range s.calls() {
		c.release()
	}
}

// allSent reports whether every message of msgs is SENT.
func (b *bundle) allSent(t testing.TB, msgs ...outbox.Message) bool {
	for _, m := range msgs {
		if b.get(t, m.ID).Status != outbox.StatusSent {
			return false
		}
	}
	return true
}

// With a backlog every worker claims while the others publish: three
// workers have three batches in flight at once.
func TestRelay_BacklogKeepsEveryWorkerPublishing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var msgs []outbox.Message
	for i := range 30 {
		m := msg(fmt.Sprintf("W-%d", i), i)
		m.ID = uuid.Must(uuid.NewV7())
		msgs = append(msgs, m)
	}
	b.enqueue(t, msgs...)
	s := &gatedSink{}
	cfg := fastConfig(b, s)
	cfg.Workers, cfg.BatchSize = 3, 4
	startRelay(t, cfg)
	eventually(t, 10*time.Second, "three batches in flight at once", func() bool {
		return len(s.calls()) == 3
	})
	// Let the backlog drain, a few batches at a time.
	eventually(t, 20*time.Second, "every message SENT", func() bool {
		s.openAll()
		return b.allSent(t, msgs...)
	})
}

// A worker other than the poller that claimed less than a full batch
// claims no more until a full batch, a slow publish or a notification
// wakes it: its mark does not claim the messages that arrived while it
// published, which stay PENDING for the poller's next claim. So a relay
// that keeps up claims in one loop rather than in several whose claims
// come back nearly empty.
func TestRelay_HelperWithPartBatchLeavesTheNextClaimToThePoller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &gatedSink{}
	cfg := fastConfig(b, s)
	cfg.Workers, cfg.BatchSize = 2, 4
	// The poller polls rather than registering for notifications, which
	// would wake the helper too; the publishes the test holds count as
	// fast ones.
	cfg.IdleAfter = time.Hour
	cfg.SlowPublish = -1
	startRelay(t, cfg)
	time.Sleep(300 * time.Millisecond) // both workers claimed once and wait
	first := make([]outbox.Message, 5)
	for i := range first {
		first[i] = msg(fmt.Sprintf("H-%d", i), i)
		first[i].ID = uuid.Must(uuid.NewV7())
	}
	b.enqueue(t, first...)
	// The poller claims a full batch of 4, which wakes the helper; it
	// claims the fifth.
	eventually(t, 10*time.Second, "two batches in flight", func() bool { return len(s.calls()) == 2 })
	var part, full *gatedCall
	for _, c := range s.calls() {
		if len(c.recs) == 1 {
			part = c
		} else {
			full = c
		}
	}
	if part == nil || full == nil || len(full.recs) != 4 {
		t.Fatalf("batches in flight: want one of 4 and one of 1")
	}
	later := []outbox.Message{msg("H-later-1", 0), msg("H-later-2", 0)}
	for i := range later {
		later[i].ID = uuid.Must(uuid.NewV7())
	}
	b.enqueue(t, later...)
	part.release()
	eventually(t, 10*time.Second, "the helper's message SENT", func() bool {
		return b.get(t, part.recs[0].ID).Status == outbox.StatusSent
	})
	for _, m := range later {
		if st := b.get(t, m.ID).Status; st != outbox.StatusPending {
			t.Fatalf("message enqueued during the helper's publish is %s after its mark; want PENDING (left to the poller)", st)
		}
	}
	full.release()
	eventually(t, 10*time.Second, "the poller's next batch holds both later messages", func() bool {
		cs := s.calls()
		return len(cs) == 1 && len(cs[0].recs) == 2
	})
	s.openAll()
	eventually(t, 10*time.Second, "every message SENT", func() bool {
		return b.allSent(t, append(first, later...)...)
	})
}

// A publish that waits for its acks (a distant or struggling broker, a
// partition without a leader) does not hold up the messages that arrive
// meanwhile: after a short wait the other workers claim and publish them
// beside it, although the slow batch was not full.
func TestRelay_SlowPublishDoesNotHoldUpLaterMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &gatedSink{}
	cfg := fastConfig(b, s)
	cfg.Workers, cfg.BatchSize = 2, 4
	cfg.Lease = time.Minute // the held publish does not time out during the test
	startRelay(t, cfg)
	slow := msg("SP-slow", 0)
	slow.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, slow)
	eventually(t, 10*time.Second, "the first publish in flight", func() bool { return len(s.calls()) == 1 })
	held := s.calls()[0]
	var later []outbox.Message
	for i := range 3 {
		m := msg(fmt.Sprintf("SP-later-%d", i), i)
		m.ID = uuid.Must(uuid.NewV7())
		later = append(later, m)
		b.enqueue(t, m)
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, 10*time.Second, "the later messages SENT while the first publish waits", func() bool {
		for _, c := range s.calls() {
			if c != held {
				c.release()
			}
		}
		return b.allSent(t, later...)
	})
	if st := b.get(t, slow.ID).Status; st != outbox.StatusInFlight {
		t.Fatalf("the held message is %s; want IN_FLIGHT until its publish returns", st)
	}
	held.release()
	eventually(t, 10*time.Second, "the held message SENT", func() bool {
		return b.get(t, slow.ID).Status == outbox.StatusSent
	})
}
