package kafka

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/outbox-dev/outbox/sink"
)

// The topic book logs an unavailable topic at most every 30 s, logs the
// first acknowledgement of each topic once, counts the last hour, and
// forgets an unavailability no record failed for in a while.
func TestTopicBook_LogsRarelyCountsTheHourAndForgets(t *testing.T) {
	var logs bytes.Buffer
	b := newTopicBook(slog.New(slog.NewTextHandler(&logs, nil)))
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	te := &sink.TopicError{Err: kerr.UnknownTopicOrPartition, Fix: fixMissingTopic}
	lines := func(s string) int { return strings.Count(logs.String(), s) }

	for i := range 100 { // 100 refusals within 29 s: one line
		got := b.failed("invoices", te, t0.Add(time.Duration(i)*290*time.Millisecond))
		if got.Topic != "invoices" || !got.Since.Equal(t0) {
			t.Fatalf("failed() = %+v, want the topic and the spell's start", got)
		}
	}
	if n := lines("topic cannot take records"); n != 1 {
		t.Fatalf("%d log lines for 100 refusals in 29 s, want 1:\n%s", n, logs.String())
	}
	if got := b.blocked("invoices", t0.Add(31*time.Second)); got == nil || !got.Since.Equal(t0) {
		t.Fatalf("blocked() = %v, want the missing topic's error", got)
	}
	if n := lines("topic cannot take records"); n != 2 {
		t.Errorf("%d log lines after 31 s, want 2", n)
	}
	if b.blocked("orders", t0) != nil {
		t.Error("a topic never refused is blocked")
	}

	b.published("orders", 5, t0.Add(-2*time.Hour))
	b.published("orders", 3, t0)
	b.published("orders", 4, t0.Add(time.Minute))
	if n := lines("first message published to topic"); n != 1 {
		t.Errorf("%d 'first message' lines, want 1", n)
	}
	st := b.statuses(t0.Add(time.Minute))
	if len(st) != 2 || st[0].Topic != "invoices" || st[1].Topic != "orders" {
		t.Fatalf("statuses = %+v, want invoices and orders", st)
	}
	if st[1].Published != 12 || st[1].PublishedLastHour != 7 {
		t.Errorf("orders: published %d, last hour %d; want 12 and 7", st[1].Published, st[1].PublishedLastHour)
	}
	if !st[0].Unavailable() || st[0].Reason != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("invoices = %+v, want unavailable with its reason", st[0])
	}

	b.found([]string{"invoices"}, t0.Add(40*time.Second))
	if b.blocked("invoices", t0.Add(41*time.Second)) != nil {
		t.Error("a topic a probe found is still blocked")
	}
	if n := lines("topic takes records again"); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}

	b.failed("acl", &sink.TopicError{Err: kerr.TopicAuthorizationFailed, Fix: fixTopicACL}, t0)
	if st := b.statuses(t0.Add(topicForgetAfter + time.Second)); st[0].Topic != "acl" || st[0].Unavailable() {
		t.Errorf("acl = %+v, want available once no record failed for %s", st[0], topicForgetAfter)
	}

	b.published("orders", 1, t0.Add(2*time.Hour))
	st = b.statuses(t0.Add(2*time.Hour + time.Minute))
	if len(st) != 1 || st[0].Topic != "orders" {
		t.Errorf("statuses after an idle hour = %+v, want only orders: the topics idle for over %s are forgotten", st, topicIdleFor)
	}
}
