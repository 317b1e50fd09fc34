package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/metrics"
)

// outbox_consumer_lag after a known workload: N records produced, the
// handler holds record M, so the gauge is N - M; once all are handled it
// is 0; and the series goes when the runner stops.
func TestConsumerMetrics_LagAfterAKnownWorkload(t *testing.T) {
	t.Parallel()
	const n, m = 12, 4
	ctx := context.Background()
	ib, b, producer := consumerSetup(t)
	ids := make([]uuid.UUID, n)
	var recs []*kgo.Record
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
		recs = append(recs, record(ids[i], "OrderPlaced"))
	}
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	mx, err := metrics.NewConsumer(reg)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	r, err := consumer.New(consumer.Config{
		Brokers: b.Addrs(), Group: "billing", Topics: []string{"orders"}, Inbox: ib,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
			if msg.ID == ids[m] {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		},
		Hooks: mx.Hooks("billing"),
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		cancel()
		<-done
	}()

	waitGauge := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := gaugeValue(reg, "outbox_consumer_lag")
			if err == nil && got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("outbox_consumer_lag = %v (%v), want %v", got, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitGauge(n - m)
	if p, _ := metricValue(reg, "outbox_consumer_handled_total", "processed"); p != m {
		t.Errorf("processed %v while the lag is %d, want %d", p, n-m, m)
	}
	close(release)
	waitGauge(0)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	if _, err := gaugeValue(reg, "outbox_consumer_lag"); err == nil {
		t.Error("the lag series outlived the runner's partition")
	}
}

// gaugeValue returns the value of the only series of a gauge.
func gaugeValue(reg *prometheus.Registry, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("%s: no single series", name)
}
