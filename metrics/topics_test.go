package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outbox-dev/outbox/metrics"
	"github.com/outbox-dev/outbox/sink"
)

// Each topic the sink knows shows its acknowledged records and whether it
// can take records, with the broker's reason.
func TestTopics_PublishedAndUnavailableByTopic(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	err := metrics.NewTopics(reg, func() []sink.TopicStatus {
		return []sink.TopicStatus{
			{Topic: "invoices", UnavailableSince: time.Now(), Reason: "UNKNOWN_TOPIC_OR_PARTITION"},
			{Topic: "orders", Published: 42},
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP outbox_relay_topic_published_total Records of the topic the broker acknowledged since the relay started.
# TYPE outbox_relay_topic_published_total counter
outbox_relay_topic_published_total{topic="invoices"} 0
outbox_relay_topic_published_total{topic="orders"} 42
# HELP outbox_relay_topic_unavailable 1 while the topic cannot take records (it does not exist, or the relay may not write to it); its messages wait without counting attempts.
# TYPE outbox_relay_topic_unavailable gauge
outbox_relay_topic_unavailable{reason="",topic="orders"} 0
outbox_relay_topic_unavailable{reason="UNKNOWN_TOPIC_OR_PARTITION",topic="invoices"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if err := metrics.NewTopics(prometheus.NewRegistry(), nil); err == nil {
		t.Error("NewTopics(nil) succeeded")
	}
}
