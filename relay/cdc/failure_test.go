package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// faultySink fails the records that fail() picks, with the error it
// returns, and passes the rest on.
type faultySink struct {
	sink.Sink
	mu    sync.Mutex
	fail  func(rec outbox.Record) error
	calls atomic.Int64
}

func (s *faultySink) Publish(ctx context.Context, recs []outbox.Record) []error {
	s.calls.Add(1)
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	errs := make([]error, len(recs))
	var pass []outbox.Record
	var idx []int
	for i, rec := range recs {
		if fail != nil {
			if err := fail(rec); err != nil {
				errs[i] = err
				continue
			}
		}
		pass = append(pass, rec)
		idx = append(idx, i)
	}
	for j, err := range s.Sink.Publish(ctx, pass) {
		errs[idx[j]] = err
	}
	return errs
}

func (s *faultySink) setFail(f func(outbox.Record) error) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

func (e *env) status(agg string, n int) outbox.Record {
	e.t.Helper()
	var rec outbox.Record
	var status string
	err := e.pool.QueryRow(context.Background(),
		`SELECT seq, status, attempts, last_error FROM outbox_messages
		 WHERE aggregate_id = $1 AND convert_from(payload, 'UTF8')::jsonb = $2::jsonb`, agg,
		fmt.Sprintf(`{"aggregate": %q, "n": %d}`, agg, n)).Scan(&rec.Seq, &status, &rec.Attempts, &rec.LastError)
	if err != nil {
		e.t.Fatalf("status of %s#%d: %v", agg, n, err)
	}
	rec.Status = outbox.Status(status)
	return rec
}

func (e *env) waitStatus(agg string, n int, want outbox.Status, within time.Duration) outbox.Record {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec := e.status(agg, n)
		if rec.Status == want {
			return rec
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s#%d is %s after %s; want %s", agg, n, rec.Status, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A message the broker will never accept is dead-lettered at once, as in
// polling mode: the row is DEAD_LETTER with the broker's reason, later
// messages of its aggregate wait (PENDING), and other aggregates flow.
// Replaying the dead letter (status back to PENDING) sends it and then the
// waiting messages, in order, through the table path.
func TestDeadLetter_BlocksItsAggregateUntilReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	fs := &faultySink{Sink: e.newSink(nil)}
	fs.setFail(func(rec outbox.Record) error {
		if rec.AggregateID == "x" && rec.EventType == "Poison" {
			return fmt.Errorf("%w: MESSAGE_TOO_LARGE (test)", sink.ErrPermanent)
		}
		return nil
	})
	r := e.start(e.config(fs))
	e.waitLeader(r, 20*time.Second)

	poison := seqMessage("x", 0)
	poison.EventType = "Poison"
	e.enqueue(poison, seqMessage("y", 0))
	e.enqueue(seqMessage("x", 1), seqMessage("y", 1))
	e.enqueue(seqMessage("x", 2), seqMessage("y", 2))

	dead := e.waitStatus("x", 0, outbox.StatusDeadLetter, 20*time.Second)
	if dead.Attempts != 1 || dead.LastError == "" {
		t.Fatalf("dead letter has attempts %d, last error %q; want 1 and the broker's reason", dead.Attempts, dead.LastError)
	}
	for n := range 3 {
		e.waitStatus("y", n, outbox.StatusSent, 20*time.Second)
	}
	time.Sleep(300 * time.Millisecond) // a few table path rounds
	for n := 1; n < 3; n++ {
		if s := e.status("x", n).Status; s != outbox.StatusPending {
			t.Fatalf("x#%d is %s behind a dead letter; want PENDING", n, s)
		}
	}

	fs.setFail(nil)
	if _, err := e.pool.Exec(context.Background(),
		`UPDATE outbox_messages SET status = 'PENDING', attempts = 0, next_attempt_at = now() WHERE status = 'DEAD_LETTER'`); err != nil {
		t.Fatal(err)
	}
	recs := e.consumed(6, 30*time.Second)
	checkOrder(t, recs, map[string]int{"x": 3, "y": 3})
	e.waitCount(outbox.StatusSent, 6, 10*time.Second)

	// The aggregate is released: its next message goes through the stream.
	e.waitDeferred(0, 10*time.Second)
	e.enqueue(seqMessage("x", 3))
	checkOrder(t, e.consumed(7, 30*time.Second), map[string]int{"x": 4, "y": 3})
}

// waitDeferred waits until n aggregates are deferred to the table path.
func (e *env) waitDeferred(n int, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var got int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_cdc_deferred`).Scan(&got); err != nil {
			e.t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d deferred aggregates after %s; want %d", got, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A retriable failure counts an attempt and schedules a retry, as in
// polling mode; the retry (on the table path) delivers it, and the later
// messages of its aggregate follow it, in order.
func TestRetriableFailure_RetriedWithBackoffInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	fs := &faultySink{Sink: e.newSink(nil)}
	var failures atomic.Int64
	fs.setFail(func(rec outbox.Record) error {
		if rec.EventType == "Flaky" && failures.Add(1) <= 2 {
			return errors.New("NOT_ENOUGH_REPLICAS (test)")
		}
		return nil
	})
	r := e.start(e.config(fs))
	e.waitLeader(r, 20*time.Second)

	flaky := seqMessage("x", 0)
	flaky.EventType = "Flaky"
	e.enqueue(flaky)
	e.enqueue(seqMessage("x", 1))
	e.enqueue(seqMessage("x", 2))
	checkOrder(t, e.consumed(3, 30*time.Second), map[string]int{"x": 3})
	rec := e.waitStatus("x", 0, outbox.StatusSent, 10*time.Second)
	if rec.Attempts != 2 {
		t.Fatalf("attempts %d; want 2 (two failed publishes)", rec.Attempts)
	}
}

// After MaxAttempts retriable failures the message is dead-lettered, as in
// polling mode.
func TestRetriableFailure_DeadLetteredAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	fs := &faultySink{Sink: e.newSink(nil)}
	fs.setFail(func(rec outbox.Record) error {
		if rec.AggregateID == "x" {
			return errors.New("NOT_ENOUGH_REPLICAS (test)")
		}
		return nil
	})
	cfg := e.config(fs)
	cfg.MaxAttempts = 3
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	e.enqueue(seqMessage("x", 0))
	rec := e.waitStatus("x", 0, outbox.StatusDeadLetter, 20*time.Second)
	if rec.Attempts != 3 {
		t.Fatalf("attempts %d; want 3", rec.Attempts)
	}
}

// While the broker is unreachable the stream waits and retries without
// counting attempts, then delivers everything in order.
func TestBrokerUnavailable_StreamWaitsCountingNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	fs := &faultySink{Sink: e.newSink(nil)}
	var calls atomic.Int64
	fs.setFail(func(rec outbox.Record) error {
		if calls.Add(1) <= 5 {
			return fmt.Errorf("%w: connection refused (test)", sink.ErrUnavailable)
		}
		return nil
	})
	cfg := e.config(fs)
	cfg.UnavailableBackoffMax = 100 * time.Millisecond
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	for n := range 5 {
		e.enqueue(seqMessage("x", n))
	}
	checkOrder(t, e.consumed(5, 30*time.Second), map[string]int{"x": 5})
	e.waitCount(outbox.StatusSent, 5, 10*time.Second)
	var attempts int
	if err := e.pool.QueryRow(context.Background(), `SELECT coalesce(sum(attempts), 0) FROM outbox_messages`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 {
		t.Fatalf("%d attempts counted for an unreachable broker; want 0", attempts)
	}
}

// A topic that does not exist is not the messages' fault: in CDC mode its
// messages wait on the table path (FAILED, no attempt counted, never dead)
// while the other topics keep streaming, and once the topic is created
// they go out in order.
func TestMissingTopic_WaitsCountingNothingThenDelivers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{NoAutoCreateTopics: true, SeedTopics: []string{"cdc.orders"}})
	ks, err := kafka.New(kafka.Config{Brokers: e.broker.Addrs(), DefaultTopic: "cdc.orders",
		TopicByAggregateType: map[string]string{"Invoice": e.topic}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() })
	cfg := e.config(ks)
	cfg.MaxAttempts = 2 // a counted attempt or two would dead-letter it
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)

	for n := range 3 {
		m := seqMessage("x", n)
		m.AggregateType = "Invoice"
		e.enqueue(m, seqMessage(fmt.Sprint("order-", n), 0))
	}
	consumeTopic(t, e.broker.Addrs(), "cdc.orders", 3, 30*time.Second) // while the other topic is missing
	time.Sleep(3 * sink.MinTopicRetryDelay)                            // several table-path tries
	head := e.waitStatus("x", 0, outbox.StatusFailed, 10*time.Second)
	if head.Attempts != 0 || !strings.Contains(head.LastError, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("head of the missing topic: %d attempts, last error %q; want 0 and the reason", head.Attempts, head.LastError)
	}

	if err := e.broker.CreateTopics(context.Background(), 0, e.topic); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, e.consumed(3, 30*time.Second), map[string]int{"x": 3})
	for n := range 3 {
		e.waitStatus("x", n, outbox.StatusSent, 10*time.Second)
	}
}
