package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// badHeaderCase is a stored message's own headers that Enqueue would have
// refused, as a row written with plain SQL may hold them.
type badHeaderCase struct {
	name    string
	limits  outbox.Limits
	headers map[string]string
	field   string
	rule    string // a substring of ValidationError.Rule
}

func badHeaderCases() []badHeaderCase {
	cases := []badHeaderCase{
		{name: "eventId spelled alike", headers: map[string]string{"eventId": "spoofed"},
			field: `headers["eventId"]`, rule: "the relay sets eventId itself"},
		{name: "EVENTID in another case", headers: map[string]string{"EVENTID": "spoofed"},
			field: `headers["EVENTID"]`, rule: "the relay sets eventId itself"},
		{name: "tracestate", headers: map[string]string{"tracestate": "vendor=1"},
			field: `headers["tracestate"]`, rule: "name is reserved"},
		{name: "value over the default limit", headers: map[string]string{"x-big": strings.Repeat("v", outbox.DefaultMaxHeaderValueBytes+1)},
			field: `headers["x-big"]`, rule: fmt.Sprintf("value must be at most %d bytes, is %d", outbox.DefaultMaxHeaderValueBytes, outbox.DefaultMaxHeaderValueBytes+1)},
		{name: "value over a custom limit", limits: outbox.Limits{MaxHeaderValueBytes: 4}, headers: map[string]string{"x-tenant": "acme!"},
			field: `headers["x-tenant"]`, rule: "value must be at most 4 bytes, is 5"},
		{name: "more headers than a custom limit", limits: outbox.Limits{MaxHeaders: 2}, headers: map[string]string{"a": "1", "b": "2", "c": "3"},
			field: "headers", rule: "must have at most 2 entries, has 3"},
		{name: "value not UTF-8", headers: map[string]string{"x-tenant": "a\xffb"},
			field: `headers["x-tenant"]`, rule: "valid UTF-8"},
		{name: "name with a space", headers: map[string]string{"x tenant": "acme"},
			field: `headers["x tenant"]`, rule: "name must be 1-255 characters"},
		{name: "empty name", headers: map[string]string{"": "acme"},
			field: `headers[""]`, rule: "name must be 1-255 characters"},
	}
	// Every reserved name, in every case, is refused.
	for _, r := range outbox.ReservedHeaders {
		for _, spelled := range []string{r, strings.ToUpper(r), strings.ToLower(r)} {
			cases = append(cases, badHeaderCase{name: "reserved " + spelled, headers: map[string]string{spelled: "x"},
				field: fmt.Sprintf("headers[%q]", spelled), rule: "name is reserved"})
		}
	}
	return cases
}

func TestRecord_OwnHeadersBreakingARule_AreRefusedNamingTheHeader(t *testing.T) {
	t.Parallel()
	for _, c := range badHeaderCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := rec("order-1", 1)
			r.Headers = c.headers
			kr, err := kafka.Record(r, "orders", c.limits)
			if kr != nil {
				t.Errorf("Record returned a record with headers %v", kr.Headers)
			}
			ve, ok := errors.AsType[*outbox.ValidationError](err)
			if !ok || !errors.Is(err, outbox.ErrInvalidMessage) {
				t.Fatalf("err = %v; want a *outbox.ValidationError wrapping ErrInvalidMessage", err)
			}
			if ve.Field != c.field || !strings.Contains(ve.Rule, c.rule) || ve.Index != -1 {
				t.Errorf("Index, Field, Rule = %d, %q, %q; want -1, %q, a rule with %q", ve.Index, ve.Field, ve.Rule, c.field, c.rule)
			}
		})
	}
}

// A stored message that the store could not read whole (Record.Invalid:
// headers that are not a JSON object of string values) is refused with
// that reason, as when something other than the relay publishes it (CDC,
// republishing).
func TestRecord_InvalidStoredMessage_IsRefusedWithItsReason(t *testing.T) {
	t.Parallel()
	r := rec("order-1", 1)
	invalid := &outbox.ValidationError{Index: -1, Field: `headers["x"]`, Rule: "value must be a string, is a number"}
	r.Invalid = invalid
	kr, err := kafka.Record(r, "orders", outbox.Limits{})
	if kr != nil || err != invalid {
		t.Errorf("Record = %v, %v; want no record and the message's Invalid", kr, err)
	}
}

func TestRecord_OwnHeadersAtTheLimits_FollowTheRelaysHeaders(t *testing.T) {
	t.Parallel()
	limits := outbox.Limits{MaxHeaders: 3, MaxHeaderValueBytes: 5}
	r := rec("order-1", 1)
	r.Headers = map[string]string{"c": "12345", "a": "", "eventIdentifier": "x"}
	kr, err := kafka.Record(r, "orders", limits)
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	var got []string
	for _, h := range kr.Headers {
		got = append(got, h.Key+"="+string(h.Value))
	}
	want := []string{
		"eventId=" + r.ID.String(), "eventType=OrderPlaced", "eventVersion=1", "aggregateType=Order",
		"aggregateId=order-1", "correlationId=", "causationId=", "contentType=application/json",
		"a=", "c=12345", "eventIdentifier=x",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("headers\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A stored message whose own headers collide with the relay's (a row
// written with plain SQL) gets a permanent error naming the header, so that
// the relay dead-letters it, and nothing of it reaches the topic; the
// messages beside it are published.
func TestPublish_MessageWithReservedHeader_IsPermanentAndNotProduced(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})

	before, spoof, after := rec("order-1", 1), rec("order-2", 2), rec("order-3", 3)
	spoof.Headers = map[string]string{"x-tenant": "acme", "EventId": before.ID.String()}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	errs := s.Publish(ctx, []outbox.Record{before, spoof, after})

	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("valid neighbours failed: %v, %v", errs[0], errs[2])
	}
	err := errs[1]
	if sink.Classify(err) != sink.Permanent || !errors.Is(err, outbox.ErrInvalidMessage) {
		t.Fatalf("err = %v; want a permanent error wrapping outbox.ErrInvalidMessage", err)
	}
	for _, want := range []string{spoof.ID.String(), `headers["EventId"]`, "the relay sets eventId itself"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// A later record on the partition shows that everything before it
	// arrived: exactly the two valid messages, no copy of the refused one.
	marker := rec("order-4", 4)
	publish(t, s, marker)
	got := consume(t, c.ListenAddrs(), "orders", 3)
	if len(got) != 3 {
		t.Fatalf("consumed %d records; want 3", len(got))
	}
	for i, want := range []outbox.Record{before, after, marker} {
		if id := header(got[i], kafka.HeaderEventID); id != want.ID.String() {
			t.Errorf("record %d has eventId %s; want %s (the refused message must not be published)", i, id, want.ID)
		}
	}
}

func TestNew_NegativeLimits_AreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limits outbox.Limits
		field  string
	}{
		{outbox.Limits{MaxHeaders: -1}, "Limits.MaxHeaders"},
		{outbox.Limits{MaxHeaderValueBytes: -1}, "Limits.MaxHeaderValueBytes"},
	} {
		_, err := kafka.New(kafka.Config{Brokers: []string{"127.0.0.1:9092"}, Limits: tc.limits})
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New(Limits %+v): err = %v; want one naming %s", tc.limits, err, tc.field)
		}
	}
}
