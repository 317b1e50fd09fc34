package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// run returns n consecutive records of aggregate ("Order", aggID).
func run(aggID string, n int) []outbox.Record {
	out := make([]outbox.Record, n)
	for i := range out {
		out[i] = rec(aggID, i)
	}
	return out
}

// publishRuns publishes recs with PublishRuns and a 15 s deadline.
func publishRuns(s *kafka.Sink, recs ...outbox.Record) []error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return s.PublishRuns(ctx, recs)
}

// idsOn returns the event ids on topic, by partition then offset, once the
// record with eventId end is there (published after the records of
// interest).
func idsOn(t *testing.T, c *kfake.Cluster, topic string, end outbox.Record) []string {
	t.Helper()
	var ids []string
	for _, r := range consumeUntil(t, c.ListenAddrs(), topic, end.ID) {
		if id := header(r, kafka.HeaderEventID); id != end.ID.String() {
			ids = append(ids, id)
		}
	}
	return ids
}

func idsOf(recs ...outbox.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID.String()
	}
	return out
}

// eventually fails the test unless cond holds within 10 s; it checks every
// 10 ms.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdProduce makes the cluster hold the next produce request it receives
// until release is called (or the test ends); held is closed once the
// request is held, so its records were sent.
func holdProduce(t *testing.T, c *kfake.Cluster) (held <-chan struct{}, release func()) {
	t.Helper()
	heldCh, releaseCh := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(releaseCh) }) }
	t.Cleanup(release) // before the cluster closes
	var first atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if first.CompareAndSwap(false, true) {
			close(heldCh)
			c.SleepControl(func() { <-releaseCh })
		}
		return nil, nil, false
	})
	return heldCh, release
}

// publishUntilHeld publishes recs with PublishRuns and cancels the call once
// the cluster holds its produce request; it returns the errors.
func publishUntilHeld(s *kafka.Sink, held <-chan struct{}, recs ...outbox.Record) []error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-held:
		case <-time.After(15 * time.Second):
		}
		cancel()
	}()
	return s.PublishRuns(ctx, recs)
}

// A call with runs of several aggregates, interleaved, publishes every
// record, each aggregate's in order on its partition; the call's producer
// client serves the next call.
func TestPublishRuns_RunsInOrderOnTheirPartitions(t *testing.T) {
	t.Parallel()
	const partitions, aggregates, perAggregate = 3, 5, 6
	c := newCluster(t, kfake.SeedTopics(partitions, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	var recs []outbox.Record
	for n := range perAggregate {
		for a := range aggregates {
			recs = append(recs, rec(fmt.Sprintf("order-%d", a), n))
		}
	}
	for round := range 2 {
		for i, err := range publishRuns(s, recs...) {
			if err != nil {
				t.Fatalf("round %d, record %d: %v", round, i, err)
			}
		}
	}
	if idle, draining, open := kafka.RunClientCounts(s); idle != 1 || draining != 0 || open != 1 {
		t.Errorf("run clients: %d idle, %d draining, %d open; want the one client idle", idle, draining, open)
	}
	got := consume(t, c.ListenAddrs(), "orders", 2*len(recs))
	next := map[string]int{}
	for _, r := range got {
		key := string(r.Key)
		if want := javaPartition(key, partitions); r.Partition != want {
			t.Errorf("key %s on partition %d, want %d", key, r.Partition, want)
		}
		var n int
		if _, err := fmt.Sscanf(string(r.Value), `{"n":%d}`, &n); err != nil {
			t.Fatalf("payload %q: %v", r.Value, err)
		}
		if n != next[key]%perAggregate {
			t.Fatalf("key %s: event %d where event %d was due", key, n, next[key]%perAggregate)
		}
		next[key]++
	}
}

// A record refused before it is produced (too large for the producer, headers
// the sink refuses) fails alone, whatever its place in its aggregate's run:
// the records before it are published, the records after it are not sent
// (sink.ErrNotSent) and do not reach the topic, and other aggregates are
// unaffected.
func TestPublishRuns_RefusedBeforeProducing_LaterRecordsNotSent(t *testing.T) {
	t.Parallel()
	causes := []struct {
		name  string
		cfg   kafka.Config
		spoil func(outbox.Record) outbox.Record
		want  string
	}{
		{"larger than MaxMessageBytes", kafka.Config{MaxMessageBytes: 1000},
			func(r outbox.Record) outbox.Record { return withPayloadSize(r, 2000) }, "MESSAGE_TOO_LARGE"},
		{"refused by the producer before buffering", kafka.Config{ExtraOpts: []kgo.Opt{kgo.MaxBufferedBytes(1500)}},
			func(r outbox.Record) outbox.Record { return withPayloadSize(r, 2000) }, "MESSAGE_TOO_LARGE"},
		{"headers the sink refuses", kafka.Config{},
			func(r outbox.Record) outbox.Record { r.Headers = map[string]string{"eventId": "mine"}; return r }, "eventId"},
	}
	const runLen = 4
	for _, cause := range causes {
		for at := range runLen {
			t.Run(fmt.Sprintf("%s at %d", cause.name, at), func(t *testing.T) {
				t.Parallel()
				c := newCluster(t, kfake.SeedTopics(2, "orders"))
				cfg := cause.cfg
				cfg.DefaultTopic = "orders"
				s := newSink(t, c, cfg)
				a, b := run("a", runLen), run("b", 2)
				a[at] = cause.spoil(a[at])
				recs := []outbox.Record{a[0], b[0], a[1], a[2], b[1], a[3]}
				place := map[string]int{} // a's records by id: their place in a
				for n, r := range a {
					place[r.ID.String()] = n
				}
				errs := publishRuns(s, recs...)
				for i, r := range recs {
					err := errs[i]
					switch n := place[r.ID.String()]; {
					case r.AggregateID == "b" || n < at:
						if err != nil {
							t.Errorf("%s#%d: %v", r.AggregateID, n, err)
						}
					case n == at:
						if !errors.Is(err, sink.ErrPermanent) || !strings.Contains(err.Error(), cause.want) {
							t.Errorf("refused record: err = %v, want ErrPermanent naming %s", err, cause.want)
						}
					default:
						if !errors.Is(err, sink.ErrNotSent) || sink.Classify(err) == sink.Permanent {
							t.Errorf("%s#%d after the refused one: err = %v, want ErrNotSent, not permanent", r.AggregateID, n, err)
						}
					}
				}
				end := rec("end", 0)
				publish(t, s, end)
				got := idsOn(t, c, "orders", end)
				want := append(idsOf(a[:at]...), idsOf(b...)...)
				if !sameSet(got, want) {
					t.Errorf("topic holds %v, want %v (a's records before the refused one, and b's)", got, want)
				}
			})
		}
	}
}

func sameSet(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := make(map[string]int)
	for _, id := range got {
		seen[id]++
	}
	for _, id := range want {
		if seen[id] != 1 {
			return false
		}
	}
	return true
}

// A run is kept whole only within one partition: it is cut at the first
// record for another topic, and the records from there on are not sent.
func TestPublishRuns_TopicChangesMidRun_CutThere(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders", "other"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	a := run("a", 4)
	a[2].Topic = "other"
	errs := publishRuns(s, a...)
	for i, err := range errs {
		if i < 2 && err != nil {
			t.Errorf("record %d: %v", i, err)
		}
		if i >= 2 && !errors.Is(err, sink.ErrNotSent) {
			t.Errorf("record %d, from the cut on: err = %v, want ErrNotSent", i, err)
		}
	}
	end := rec("end", 0)
	publish(t, s, end)
	if got, want := idsOn(t, c, "orders", end), idsOf(a[:2]...); !sameSet(got, want) {
		t.Errorf("orders holds %v, want %v", got, want)
	}
	endOther := rec("end", 1)
	endOther.Topic = "other"
	publish(t, s, endOther)
	if got := idsOn(t, c, "other", endOther); len(got) != 0 {
		t.Errorf("other holds %v, want nothing of the run", got)
	}
}

// A run for a topic that does not exist fails at its first record with the
// topic's error; the later records are not sent, the first time (the
// producer waits for the topic) and while the topic is known to be missing.
func TestPublishRuns_MissingTopic_FirstFailsLaterNotSent(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders", TopicByAggregateType: map[string]string{"Invoice": "invoices"}})
	for attempt := range 2 {
		inv := run("i", 3)
		for i := range inv {
			inv[i].AggregateType = "Invoice"
		}
		errs := publishRuns(s, append(inv, rec("o", 0))...)
		if te, ok := errors.AsType[*sink.TopicError](errs[0]); !ok || te.Topic != "invoices" {
			t.Fatalf("attempt %d, first record: err = %v, want the TopicError of invoices", attempt, errs[0])
		}
		for i := 1; i < 3; i++ {
			if !errors.Is(errs[i], sink.ErrNotSent) {
				t.Errorf("attempt %d, record %d: err = %v, want ErrNotSent", attempt, i, errs[i])
			}
		}
		if errs[3] != nil {
			t.Errorf("attempt %d, record of an existing topic: %v", attempt, errs[3])
		}
	}
}

// A record refused with its batch as too large by the broker is sent again
// alone, in order; after one that stays refused alone, the later records of
// its aggregate are not sent.
func TestPublishRuns_BatchTooLargeForBroker_RetriedAloneInOrder(t *testing.T) {
	t.Parallel()
	c := newCluster(t,
		kfake.SeedTopics(1, "orders"),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "3000"}),
	)
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"}) // believes batches may be 1 MB
	a := run("a", 6)
	for i := range a {
		a[i] = withPayloadSize(a[i], 900)
	}
	a[3] = withPayloadSize(a[3], 3500)
	b := withPayloadSize(rec("b", 0), 900)
	recs := append(append([]outbox.Record{}, a...), b)
	errs := publishRuns(s, recs...)
	for i, err := range errs {
		switch {
		case i < 3 || i == 6:
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
		case i == 3:
			if !errors.Is(err, sink.ErrPermanent) || !errors.Is(err, kerr.MessageTooLarge) {
				t.Errorf("record too large alone: err = %v, want permanent MESSAGE_TOO_LARGE", err)
			}
		default:
			if !errors.Is(err, sink.ErrNotSent) {
				t.Errorf("record %d after it: err = %v, want ErrNotSent", i, err)
			}
		}
	}
	end := rec("end", 0)
	publish(t, s, end)
	got := idsOn(t, c, "orders", end)
	var gotA []string
	for _, id := range got {
		if id != b.ID.String() {
			gotA = append(gotA, id)
		}
	}
	if want := idsOf(a[:3]...); strings.Join(gotA, ",") != strings.Join(want, ",") || len(got) != 4 {
		t.Errorf("topic holds %v, want a#0..2 in order and b", got)
	}
}

// When a flush fails, the records of its aggregates in the call's later
// parts (a call is flushed in parts of at most MaxBufferedRecords) are not
// sent.
func TestPublishRuns_FailureInEarlierPart_LaterPartsNotSent(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders", MaxBufferedRecords: 2})
	publish(t, s, rec("warm-up", 0))
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "orders", Err: kerr.InvalidRecord})
	a := run("a", 5)
	errs := publishRuns(s, a...)
	for i, err := range errs {
		if i < 2 && !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("record %d, in the refused flush: err = %v, want INVALID_RECORD", i, err)
		}
		if i >= 2 && !errors.Is(err, sink.ErrNotSent) {
			t.Errorf("record %d, in a later part: err = %v, want ErrNotSent", i, err)
		}
	}
	// A client whose flush saw a failure is not reused: its drain loop may
	// still be backing off and would send the next call's records early.
	if idle, _, open := kafka.RunClientCounts(s); idle != 0 || open != 0 {
		t.Errorf("after a failed flush: %d idle of %d open clients, want the client retired", idle, open)
	}
	end := rec("end", 0)
	publish(t, s, end)
	if got := idsOn(t, c, "orders", end); len(got) != 1 {
		t.Errorf("topic holds %v, want only the warm-up", got)
	}
}

// When the context ends while a run's records are in flight, they stay in
// the call's client, which flushes them when the broker answers: each is
// written once, in order, and the client is then retired; the next call
// gets a new one.
func TestPublishRuns_ContextEndsMidFlush_WrittenOnceInOrder(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	held, release := holdProduce(t, c)
	a := run("a", 3)
	for i, err := range publishUntilHeld(s, held, a...) {
		if !errors.Is(err, sink.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Errorf("record %d: err = %v, want ErrUnavailable wrapping context.Canceled", i, err)
		}
	}
	if _, draining, _ := kafka.RunClientCounts(s); draining != 1 {
		t.Fatalf("%d clients draining after the call ended, want 1", draining)
	}
	release()
	eventually(t, "the drained client is retired", func() bool {
		idle, draining, open := kafka.RunClientCounts(s)
		return idle == 0 && draining == 0 && open == 0
	})
	b := run("b", 2)
	for i, err := range publishRuns(s, b...) {
		if err != nil {
			t.Errorf("next call, record %d: %v", i, err)
		}
	}
	if _, _, open := kafka.RunClientCounts(s); open != 1 {
		t.Errorf("%d clients open, want one new client", open)
	}
	end := rec("end", 0)
	publish(t, s, end)
	got := idsOn(t, c, "orders", end)
	if want := append(idsOf(a...), idsOf(b...)...); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("topic holds %v, want %v: each once, in order", got, want)
	}
}

// A record whose copy from an earlier call is still in a producer is not
// produced again. As the first of its aggregate in the call, it waits for
// that copy's outcome, and the later records of its aggregate are not sent;
// behind an earlier record of its aggregate in the call, it is not sent
// itself, since that copy could overtake the earlier record.
func TestPublishRuns_CopyStillInProducer(t *testing.T) {
	t.Parallel()
	t.Run("first of its aggregate waits for the copy", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
		held, release := holdProduce(t, c)
		a := run("a", 3)
		publishUntilHeld(s, held, a[:2]...)
		// A new copy of a#0 would be acknowledged: only the first produce
		// request is held.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		errs := s.PublishRuns(ctx, a)
		cancel()
		if !errors.Is(errs[0], context.DeadlineExceeded) {
			t.Errorf("a#0, its copy held: err = %v, want the deadline while waiting for it", errs[0])
		}
		for i := 1; i < 3; i++ {
			if !errors.Is(errs[i], sink.ErrNotSent) {
				t.Errorf("a#%d: err = %v, want ErrNotSent", i, errs[i])
			}
		}
		release()
		end := rec("end", 0)
		publish(t, s, end)
		if got, want := idsOn(t, c, "orders", end), idsOf(a[:2]...); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("topic holds %v, want %v: the first call's copies only", got, want)
		}
	})
	t.Run("behind an earlier record it is not sent", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
		held, _ := holdProduce(t, c)
		a := run("a", 3)
		publishUntilHeld(s, held, a[1])
		errs := publishRuns(s, a...)
		if errs[0] != nil {
			t.Errorf("a#0: %v", errs[0])
		}
		for i := 1; i < 3; i++ {
			if !errors.Is(errs[i], sink.ErrNotSent) {
				t.Errorf("a#%d: err = %v, want ErrNotSent", i, errs[i])
			}
		}
	})
}

// A call waits for a client while all MaxRunClients are busy, here the one
// still flushing an earlier call's records, and fails when its context
// ends first, without producing anything.
func TestPublishRuns_AllClientsBusy_Waits(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders", MaxRunClients: 1})
	held, release := holdProduce(t, c)
	a := run("a", 2)
	publishUntilHeld(s, held, a...)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	b := run("b", 2)
	for i, err := range s.PublishRuns(ctx, b) {
		if !errors.Is(err, sink.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("record %d while no client is free: err = %v, want ErrUnavailable (deadline)", i, err)
		}
	}
	cancel()
	release()
	for i, err := range publishRuns(s, b...) {
		if err != nil {
			t.Errorf("record %d once the client is free: %v", i, err)
		}
	}
	if _, _, open := kafka.RunClientCounts(s); open != 1 {
		t.Errorf("%d clients open, want at most MaxRunClients = 1", open)
	}
	end := rec("end", 0)
	publish(t, s, end)
	if got, want := idsOn(t, c, "orders", end), idsOf(append(a, b...)...); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("topic holds %v, want %v", got, want)
	}
}

// Close closes the clients of PublishRuns and returns while one is still
// flushing the records of a call whose context ended; later calls fail
// with ErrUnavailable.
func TestClose_WhileRunClientDrains(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	held, _ := holdProduce(t, c) // released when the test ends
	publishUntilHeld(s, held, run("a", 2)...)
	if _, draining, _ := kafka.RunClientCounts(s); draining != 1 {
		t.Fatalf("%d clients draining, want 1", draining)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if idle, draining, _ := kafka.RunClientCounts(s); idle != 0 || draining != 0 {
		t.Errorf("after Close: %d idle, %d draining, want none", idle, draining)
	}
	for i, err := range publishRuns(s, run("b", 2)...) {
		if !errors.Is(err, sink.ErrUnavailable) {
			t.Errorf("record %d after Close: err = %v, want ErrUnavailable", i, err)
		}
	}
}

func TestPublishRuns_ContextAlreadyDone_UnavailableForEveryRecord(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i, err := range s.PublishRuns(ctx, run("a", 3)) {
		if !errors.Is(err, sink.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Errorf("record %d: err = %v, want ErrUnavailable wrapping context.Canceled", i, err)
		}
	}
	if errs := s.PublishRuns(context.Background(), nil); len(errs) != 0 {
		t.Errorf("PublishRuns(nil) = %v, want no errors", errs)
	}
}
