package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
)

// lagRecorder keeps the last lag the Lag hook reported per partition.
type lagRecorder struct {
	mu   sync.Mutex
	last map[int32]int64
}

func (l *lagRecorder) hooks() consumer.Hooks {
	return consumer.Hooks{
		Lag: func(_ string, p int32, lag int64) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.last[p] = lag
		},
		Unassigned: func(_ string, p int32) {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.last, p)
		},
	}
}

func (l *lagRecorder) get(p int32) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.last[p]
	return v, ok
}

// Lag is the partition's high watermark minus the records handled: after
// producing N and handling M (the handler holds record M), lag is N - M,
// both from Runner.Lag and from the Lag hook; records produced while the
// partition's fetching is paused are counted (the refresh); once all are
// handled, lag is 0; a stopped runner reports its partitions unassigned.
func TestRunner_LagIsHighWatermarkMinusHandled(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	const n, m, more = 30, 10, 7
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, event(0, fmt.Sprint("o-", i), i))
	}
	e.produce(t, recs...)

	release := make(chan struct{})
	handler := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
		var p payload
		if err := json.Unmarshal(msg.Payload, &p); err != nil {
			return err
		}
		if p.Seq == m { // holds record m: records 0..m-1 are handled
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return e.apply(ctx, tx, msg)
	}
	lags := &lagRecorder{last: map[int32]int64{}}
	r, err := consumer.New(consumer.Config{
		Brokers: e.broker.Addrs(), Group: "billing", Topics: []string{topic}, Inbox: e.inbox, Handler: handler,
		Logger: testLogger(), Hooks: lags.hooks(), MaxPollRecords: 5, LagRefresh: 50 * time.Millisecond,
		ExtraOpts: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	lagOf := func() int64 {
		l, ok := r.Lag()[topic][0]
		if !ok {
			return -1
		}
		return l
	}

	waitFor(t, "m records handled", func() bool { return e.count(t, "SELECT count(*) FROM {{schema}}.effects") == m })
	waitFor(t, fmt.Sprintf("lag %d", n-m), func() bool { return lagOf() == n-m })
	if l, ok := lags.get(0); !ok || l != n-m {
		t.Errorf("Lag hook reported %d (%v), want %d", l, ok, n-m)
	}
	// Still held: the lag stays.
	time.Sleep(200 * time.Millisecond)
	if l := lagOf(); l != n-m {
		t.Fatalf("lag %d while record %d is held, want %d", l, m, n-m)
	}

	// Produced while the partition's fetching is paused (the worker has
	// MaxPollRecords waiting): the refresh sees the new high watermark.
	var extra []*kgo.Record
	for i := range more {
		extra = append(extra, event(0, fmt.Sprint("x-", i), n+i))
	}
	e.produce(t, extra...)
	waitFor(t, fmt.Sprintf("lag %d after %d more", n+more-m, more), func() bool { return lagOf() == n+more-m })

	close(release)
	waitFor(t, "every record handled", func() bool { return e.count(t, "SELECT count(*) FROM {{schema}}.effects") == n+more })
	waitFor(t, "lag 0", func() bool { return lagOf() == 0 })
	if l, _ := lags.get(0); l != 0 {
		t.Errorf("Lag hook reported %d after all were handled, want 0", l)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	if _, ok := lags.get(0); ok {
		t.Error("the stopped runner did not report its partition unassigned")
	}
}
