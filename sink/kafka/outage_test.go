package kafka_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/freeport"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// restartable is an embedded broker on a fixed port and data directory, so
// that it can be stopped and started again where it left off.
type restartable struct {
	t   *testing.T
	cfg broker.Config

	mu   sync.Mutex
	live *broker.Broker
}

func newRestartable(t *testing.T) *restartable {
	t.Helper()
	addr, err := freeport.Addr() // the broker listens there again after each restart
	if err != nil {
		t.Fatal(err)
	}
	logs := slog.New(slog.NewTextHandler(newTestLog(t), &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	r := &restartable{t: t, cfg: broker.Config{Listen: addr, DataDir: t.TempDir(), Partitions: 1, SeedTopics: []string{"orders"}, Logger: logs}}
	r.start()
	t.Cleanup(r.stop)
	return r
}

// start starts the broker; it may run on another goroutine than the test.
func (r *restartable) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	for range 50 { // the port may linger for a moment after a stop
		if r.live, err = broker.Start(r.cfg); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Errorf("start broker: %v", err)
}

func (r *restartable) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live != nil {
		r.live.Close()
		r.live = nil
	}
}

// testLog writes each line to the test's log, which is printed only if the
// test fails. Lines written after the test's cleanups ran are dropped: a
// t.Log after the test ended panics.
type testLog struct {
	t    *testing.T
	done *atomic.Bool
}

func newTestLog(t *testing.T) testLog {
	w := testLog{t, new(atomic.Bool)}
	t.Cleanup(func() { w.done.Store(true) }) // registered first, so it runs last
	return w
}

func (w testLog) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// addrs is where the broker listens (the same after every start).
func (r *restartable) addrs() []string { return []string{r.cfg.Listen} }

// publishWithin publishes recs with a deadline of d and returns the errors.
func publishWithin(s *kafka.Sink, d time.Duration, recs ...outbox.Record) []error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.Publish(ctx, recs)
}

// A relay that retries a message claim after claim while the broker is
// away puts one copy of it on the topic, not one per attempt: a publish of
// a record whose earlier copy is still in the producer waits for that copy
// instead of producing another. (The fault-injection harness found 5
// copies of one event after a 15 s broker stop before this rule.)
func TestPublish_RetriesDuringOutage_OneCopy(t *testing.T) {
	t.Parallel()
	b := newRestartable(t)
	// The broker's and the client's logs are printed if the test fails.
	clientLog := kgo.BasicLogger(newTestLog(t), kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000000 ") })
	s := newSink(t, nil, kafka.Config{Brokers: b.addrs(), DefaultTopic: "orders", ExtraOpts: []kgo.Opt{kgo.WithLogger(clientLog)}})
	publish(t, s, rec("warm-up", 0))
	b.stop()

	r, other := rec("retried", 1), rec("other", 2)
	for attempt := range 4 {
		for i, err := range publishWithin(s, 300*time.Millisecond, r, other) {
			if !errors.Is(err, sink.ErrUnavailable) {
				t.Fatalf("attempt %d, record %d: err = %v, want ErrUnavailable while the broker is away", attempt, i, err)
			}
		}
	}
	b.start()
	for i, err := range publishWithin(s, 15*time.Second, r, other) {
		if err != nil {
			t.Fatalf("record %d after the broker came back: %v", i, err)
		}
	}
	last := rec("marker", 3)
	publish(t, s, last)
	offsets := make(map[string][]int64)
	for _, kr := range consumeUntil(t, b.addrs(), "orders", last.ID) {
		id := header(kr, kafka.HeaderEventID)
		offsets[id] = append(offsets[id], kr.Offset)
	}
	for _, x := range []outbox.Record{r, other} {
		if at := offsets[x.ID.String()]; len(at) != 1 {
			t.Errorf("%s is on the topic %d times (offsets %v) after 5 publishes, want 1", x.AggregateID, len(at), at)
		}
	}
}

// A record published again after its copy in the producer has its outcome
// is produced again: only copies still in the producer are shared.
func TestPublish_AgainAfterOutcome_ProducesAgain(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	r := rec("twice", 1)
	publish(t, s, r)
	publish(t, s, r) // a deliberate re-publish (ops.Republish) of a sent event
	recs := consume(t, c.ListenAddrs(), "orders", 2)
	for _, kr := range recs {
		if got := header(kr, kafka.HeaderEventID); got != r.ID.String() {
			t.Errorf("record %s on the topic, want only %s", got, r.ID)
		}
	}
}
