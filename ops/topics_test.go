package ops_test

import (
	"testing"
	"time"

	"github.com/outbox-dev/outbox/sink"
)

// Stats shows the topics the running relays reported: summed over relays,
// the unavailable ones first with their reason and fix; a relay's later
// report replaces its earlier one, and reports older than a minute (a
// stopped relay's) are left out.
func TestStats_TopicsReportedByRelays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	now := time.Now()
	if err := b.ops.ReportTopics(ctx, "relay-a", []sink.TopicStatus{
		{Topic: "orders", Published: 10, PublishedLastHour: 7, FirstPublishedAt: now.Add(-2 * time.Hour), LastPublishedAt: now},
		{Topic: "invoices", UnavailableSince: now.Add(-time.Minute), Reason: "UNKNOWN_TOPIC_OR_PARTITION", Fix: "create it"},
	}); err != nil {
		t.Fatal(err)
	}
	report := func(relay string, lastHour int64) {
		t.Helper()
		if err := b.ops.ReportTopics(ctx, relay, []sink.TopicStatus{{Topic: "orders", Published: lastHour, PublishedLastHour: lastHour, LastPublishedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	report("relay-b", 1) // replaced by the next report
	report("relay-b", 3)
	report("relay-gone", 100)
	b.exec(t, "UPDATE {{schema}}.outbox_topics SET reported_at = now() - interval '2 minutes' WHERE relay_id = 'relay-gone'")

	s, err := b.ops.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Topics) != 2 {
		t.Fatalf("Topics = %+v, want invoices and orders", s.Topics)
	}
	inv, ord := s.Topics[0], s.Topics[1]
	if inv.Topic != "invoices" || !inv.Unavailable() || inv.Reason != "UNKNOWN_TOPIC_OR_PARTITION" || inv.Fix != "create it" ||
		!inv.LastPublishedAt.IsZero() {
		t.Errorf("first topic = %+v, want invoices, unavailable, with reason and fix, never published", inv)
	}
	if ord.Topic != "orders" || ord.Unavailable() || ord.PublishedLastHour != 10 || ord.LastPublishedAt.IsZero() {
		t.Errorf("second topic = %+v, want orders, available, 7+3 published in the last hour", ord)
	}
}

// An outbox without migration 013 (a relay binary upgraded before "outbox
// migrate") still has its statistics, with no topics.
func TestStats_WithoutTheTopicsTable_NoTopicsNotAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, "DROP TABLE {{schema}}.outbox_topics")
	s, err := b.ops.Stats(testCtx(t))
	if err != nil {
		t.Fatalf("Stats without outbox_topics: %v", err)
	}
	if len(s.Topics) != 0 {
		t.Errorf("Topics = %+v, want none", s.Topics)
	}
}
