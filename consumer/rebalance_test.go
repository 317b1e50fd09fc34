package consumer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
)

// A second runner joins the group while records flow, then the first one
// stops: every record is applied exactly once, and each partition's records
// in offset order.
func TestRunner_RebalanceWhileConsuming_LosesNothingAndDoublesNothing(t *testing.T) {
	t.Parallel()
	const partitions = 4
	e := setup(t, partitions)

	var (
		mu       sync.Mutex
		produced []*kgo.Record
		seq      int
	)
	produce := func(n int) {
		var recs []*kgo.Record
		mu.Lock()
		for range n {
			seq++
			recs = append(recs, event(int32(seq%partitions), fmt.Sprint("o-", seq%10), seq))
		}
		produced = append(produced, recs...)
		mu.Unlock()
		e.produce(t, recs...)
	}
	// Slow enough that records are in flight when the group rebalances.
	slow := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		return e.apply(ctx, tx, m)
	}
	a, b := newRecorder(), newRecorder()
	produce(200)
	stopA := e.start(t, consumer.Config{Group: "billing", Handler: slow, Hooks: a.hooks()})
	waitFor(t, "the first runner to handle records", func() bool { return a.handled(0) >= 20 })

	e.start(t, consumer.Config{Group: "billing", Handler: slow, Hooks: b.hooks()})
	waitFor(t, "the second runner to get partitions", func() bool {
		produce(10)
		time.Sleep(50 * time.Millisecond)
		return b.handled(0) > 0
	})
	produce(200)
	time.Sleep(100 * time.Millisecond)
	stopA() // its partitions move to the second runner
	produce(200)

	mu.Lock()
	total := len(produced)
	mu.Unlock()
	waitFor(t, "every record applied", func() bool {
		return e.count(t, "SELECT count(DISTINCT message_id) FROM {{schema}}.effects") == total
	})
	if n := e.count(t, "SELECT count(*) FROM {{schema}}.effects"); n != total {
		t.Errorf("%d effects for %d records: some applied twice", n, total)
	}
	if n := e.count(t, `SELECT count(*) FROM (
		SELECT record_offset < lag(record_offset) OVER (PARTITION BY partition ORDER BY n) AS backwards
		FROM {{schema}}.effects) x WHERE backwards`); n != 0 {
		t.Errorf("%d effects applied before an earlier record of their partition", n)
	}
	t.Logf("%d records: first runner handled %d (%d duplicates), second %d (%d duplicates)", total,
		a.handled(0), a.handled(inbox.Duplicate), b.handled(0), b.handled(inbox.Duplicate))
}
