package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/admin"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/metrics"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

type poisonSink struct{}

func (poisonSink) Publish(_ context.Context, recs []outbox.Record) []error {
	errs := make([]error, len(recs))
	for i, r := range recs {
		if r.EventType == "Poison" {
			errs[i] = fmt.Errorf("%w: MESSAGE_TOO_LARGE", sink.ErrPermanent)
		}
	}
	return errs
}
func (poisonSink) Close() error { return nil }

// After a known workload (10 messages sent, 1 dead-lettered, 1 waiting
// behind it), a scrape of /metrics shows exactly that.
func TestMetrics_AfterAKnownWorkload(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	for i := range 10 {
		msgs = append(msgs, outbox.Message{AggregateType: "Order", AggregateID: fmt.Sprint("o-", i), EventType: "OrderPlaced", Payload: []byte(`{}`)})
	}
	poison := outbox.Message{ID: uuid.Must(uuid.NewV7()), AggregateType: "Order", AggregateID: "bad", EventType: "Poison", Payload: []byte(`{}`)}
	behind := outbox.Message{AggregateType: "Order", AggregateID: "bad", EventType: "OrderPaid", Payload: []byte(`{}`)}
	msgs = append(msgs, poison, behind)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m, err := metrics.NewRelay(reg)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func(ctx context.Context) (metrics.Snapshot, error) {
		counts, err := st.Counts(ctx)
		if err != nil {
			return metrics.Snapshot{}, err
		}
		// One aggregate is blocked in this workload; the real figure comes
		// from ops.Stats, wired by the CLI.
		return metrics.Snapshot{Counts: counts, BlockedAggregates: counts[outbox.StatusDeadLetter]}, nil
	}
	if err := metrics.NewTable(reg, snapshot, time.Second); err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: st, Sink: poisonSink{}, Hooks: m.Hooks(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	if err := r.Start(rctx); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = r.Stop(context.Background()) }()

	srv, err := admin.New(admin.Config{Addr: "127.0.0.1:0", Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)

	want := []string{
		"outbox_relay_published_total 10",
		"outbox_relay_dead_lettered_total 1",
		`outbox_relay_failed_attempts_total{class="permanent"} 1`,
		`outbox_relay_failed_attempts_total{class="retriable"} 0`,
		`outbox_messages{status="SENT"} 10`,
		`outbox_messages{status="DEAD_LETTER"} 1`,
		`outbox_messages{status="PENDING"} 1`,
		"outbox_blocked_aggregates 1",
		"outbox_relay_commit_to_ack_seconds_count 10",
	}
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for {
		body = scrape(t, "http://"+srv.Addr()+"/metrics")
		missing := ""
		for _, w := range want {
			if !hasLine(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scrape lacks %q:\n%s", missing, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func hasLine(body, line string) bool {
	for _, l := range strings.Split(body, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// A failing snapshot leaves the gauges out of the scrape (no stale values)
// and counts a scrape error.
func TestMetrics_SnapshotErrorIsCountedNotFaked(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	fail := func(context.Context) (metrics.Snapshot, error) { return metrics.Snapshot{}, context.DeadlineExceeded }
	if err := metrics.NewTable(reg, fail, time.Second); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetCounter() != nil {
				names[mf.GetName()] = m.GetCounter().GetValue()
			} else {
				names[mf.GetName()] = -1
			}
		}
	}
	if _, ok := names["outbox_messages"]; ok {
		t.Fatalf("gauges exported despite the failed snapshot: %v", names)
	}
	if names["outbox_scrape_errors_total"] != 1 {
		b, _ := json.Marshal(names)
		t.Fatalf("scrape errors = %v; want 1 (%s)", names["outbox_scrape_errors_total"], b)
	}
}

func snapshotOf() metrics.SnapshotFunc {
	return func(context.Context) (metrics.Snapshot, error) { return metrics.Snapshot{}, nil }
}
