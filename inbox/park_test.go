package inbox_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/inbox"
)

// park parks m for consumer and returns its entry.
func (b *bundle) park(t *testing.T, consumer string, m inbox.Message, attempts int, cause error) inbox.Parked {
	t.Helper()
	ctx := testCtx(t)
	if err := b.inbox.Park(ctx, consumer, m, attempts, cause); err != nil {
		t.Fatalf("Park: %v", err)
	}
	ps, err := b.inbox.Parked(ctx, inbox.ParkedFilter{Consumer: consumer, IncludeReplayed: true, Limit: 1000})
	if err != nil {
		t.Fatalf("Parked: %v", err)
	}
	for _, p := range ps {
		if p.Message.ID == m.ID && p.Message.Offset == m.Offset {
			return p
		}
	}
	t.Fatalf("parked message %s not listed", m.ID)
	return inbox.Parked{}
}

func TestPark_KeepsPayloadHeadersPositionAndError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg()
	m.Headers["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	m.Headers["odd"] = "nul\x00 and \xff"
	m.TraceParent = m.Headers["traceparent"]
	m.Payload = []byte{0, 1, 2, 0xff} // stored byte for byte
	m.Timestamp = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cause := errors.New("stock service said no\x00: " + strings.Repeat("é", 3000))

	p := b.park(t, "billing", m, 5, cause)

	if p.ID == uuid.Nil || p.Consumer != "billing" || p.Attempts != 5 || p.ParkedAt.IsZero() || !p.ReplayedAt.IsZero() {
		t.Errorf("entry %+v", p)
	}
	if len(p.Error) != 4000 || !strings.HasPrefix(p.Error, "stock service said no\uFFFD: éé") {
		t.Errorf("error kept as %d bytes starting %.30q, want 4000 bytes without NUL", len(p.Error), p.Error)
	}
	got := p.Message
	if got.ID != m.ID || got.EventType != m.EventType || got.EventVersion != 1 || got.AggregateType != "Order" ||
		got.AggregateID != m.AggregateID || got.TraceParent != m.TraceParent ||
		got.Topic != m.Topic || got.Partition != m.Partition || got.Offset != m.Offset || !got.Timestamp.Equal(m.Timestamp) {
		t.Errorf("parked message %+v, want %+v", got, m)
	}
	if string(got.Payload) != string(m.Payload) {
		t.Errorf("payload %v, want %v", got.Payload, m.Payload)
	}
	want := maps.Clone(m.Headers)
	want["odd"] = "nul\uFFFD and \uFFFD"
	if !maps.Equal(got.Headers, want) {
		t.Errorf("headers %v, want %v", got.Headers, want)
	}
}

func TestPark_SameRecordTwice_KeepsOneEntry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	first := b.park(t, "billing", m, 5, errors.New("first"))
	if err := b.inbox.Park(ctx, "billing", m, 5, errors.New("again after a crash")); err != nil {
		t.Fatalf("second Park: %v", err)
	}
	ps, err := b.inbox.Parked(ctx, inbox.ParkedFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].ID != first.ID || ps[0].Error != "first" {
		t.Errorf("Parked = %+v, want only the first entry", ps)
	}
	// The same message at another offset (the relay sent it twice) is a
	// separate entry.
	m.Offset++
	b.park(t, "billing", m, 5, errors.New("the copy"))
}

func TestPark_MalformedRecordWithoutID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg()
	m.ID = uuid.Nil
	m.Headers["eventId"] = "not-a-uuid"
	p := b.park(t, "billing", m, 0, inbox.ErrMalformed)
	if p.Message.ID != uuid.Nil || p.Message.Headers["eventId"] != "not-a-uuid" || p.Attempts != 0 {
		t.Errorf("parked %+v", p)
	}
	_, err := b.inbox.Replay(testCtx(t), "billing", p.ID, b.applyEffect)
	if !errors.Is(err, inbox.ErrMalformed) {
		t.Errorf("Replay of a message without id: %v, want ErrMalformed", err)
	}
}

func TestParked_FiltersByConsumerEventTypeAndLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	placed, shipped, other := msg(), msg(), msg()
	shipped.EventType = "OrderShipped"
	b.park(t, "billing", placed, 1, errors.New("a"))
	b.park(t, "billing", shipped, 1, errors.New("b"))
	b.park(t, "inventory-service", other, 1, errors.New("c"))

	for _, c := range []struct {
		name string
		f    inbox.ParkedFilter
		want []uuid.UUID
	}{
		{"all", inbox.ParkedFilter{}, []uuid.UUID{placed.ID, shipped.ID, other.ID}},
		{"consumer", inbox.ParkedFilter{Consumer: "billing"}, []uuid.UUID{placed.ID, shipped.ID}},
		{"event type", inbox.ParkedFilter{EventType: "OrderShipped"}, []uuid.UUID{shipped.ID}},
		{"both", inbox.ParkedFilter{Consumer: "inventory-service", EventType: "OrderShipped"}, nil},
		{"limit", inbox.ParkedFilter{Limit: 2}, []uuid.UUID{placed.ID, shipped.ID}},
	} {
		ps, err := b.inbox.Parked(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []uuid.UUID
		for _, p := range ps {
			got = append(got, p.Message.ID)
		}
		if !equalIDs(got, c.want) {
			t.Errorf("%s: Parked(%+v) = %v, want %v", c.name, c.f, got, c.want)
		}
	}
	if _, err := b.inbox.Parked(ctx, inbox.ParkedFilter{Limit: -1}); err == nil {
		t.Error("Parked with a negative limit succeeded")
	}
}

func equalIDs(a, b []uuid.UUID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReplay_AppliesOnce_ThenSaysDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	p := b.park(t, "billing", m, 5, errors.New("bug in the handler"))

	var seen inbox.Message
	fixed := func(ctx context.Context, tx pgx.Tx, got inbox.Message) error {
		seen = got
		return b.applyEffect(ctx, tx, got)
	}
	if res, err := b.inbox.Replay(ctx, "billing", p.ID, fixed); err != nil || res != inbox.Processed {
		t.Fatalf("Replay = %v, %v; want processed", res, err)
	}
	if seen.ID != m.ID || string(seen.Payload) != string(m.Payload) || seen.EventType != m.EventType {
		t.Errorf("handler saw %+v, want the parked message", seen)
	}
	if res, err := b.inbox.Replay(ctx, "billing", p.ID, fixed); err != nil || res != inbox.Duplicate {
		t.Fatalf("second Replay = %v, %v; want duplicate", res, err)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	if open, err := b.inbox.Parked(ctx, inbox.ParkedFilter{Consumer: "billing"}); err != nil || len(open) != 0 {
		t.Errorf("Parked after the replay = %v, %v; want none waiting", open, err)
	}
	all := b.park(t, "billing", m, 5, nil) // listed with IncludeReplayed: kept for audit
	if all.ID != p.ID || all.ReplayedAt.IsZero() {
		t.Errorf("replayed entry %+v, want it kept with ReplayedAt", all)
	}
}

func TestReplay_FailingHandler_LeavesTheEntryParked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	p := b.park(t, "billing", m, 5, errors.New("bug"))
	boom := errors.New("still broken")
	_, err := b.inbox.Replay(ctx, "billing", p.ID, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := b.applyEffect(ctx, tx, m); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Replay error = %v, want the handler's", err)
	}
	if n := b.effects(t, m.ID); n != 0 || b.marked(t, "billing", m.ID) {
		t.Errorf("after a failed replay: %d effects, marked %v; want neither", n, b.marked(t, "billing", m.ID))
	}
	if open, err := b.inbox.Parked(ctx, inbox.ParkedFilter{}); err != nil || len(open) != 1 || !open[0].ReplayedAt.IsZero() {
		t.Errorf("Parked = %+v, %v; want the entry still waiting", open, err)
	}
}

func TestReplay_MessageAppliedMeanwhile_IsDuplicateAndResolved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	p := b.park(t, "billing", m, 5, errors.New("timeout"))
	// Another delivery of the same event got through in the meantime.
	if res, err := b.inbox.Handle(ctx, "billing", m, b.applyEffect); err != nil || res != inbox.Processed {
		t.Fatal(res, err)
	}
	if res, err := b.inbox.Replay(ctx, "billing", p.ID, b.applyEffect); err != nil || res != inbox.Duplicate {
		t.Fatalf("Replay = %v, %v; want duplicate", res, err)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	if open, _ := b.inbox.Parked(ctx, inbox.ParkedFilter{}); len(open) != 0 {
		t.Errorf("entry still waiting after a duplicate replay: %+v", open)
	}
}

func TestReplay_UnknownEntryOrOtherConsumer_IsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	p := b.park(t, "billing", msg(), 1, errors.New("x"))
	if _, err := b.inbox.Replay(ctx, "billing", uuid.New(), b.applyEffect); !errors.Is(err, inbox.ErrNotFound) {
		t.Errorf("Replay(unknown id) error = %v, want ErrNotFound", err)
	}
	if _, err := b.inbox.Replay(ctx, "inventory-service", p.ID, b.applyEffect); !errors.Is(err, inbox.ErrNotFound) {
		t.Errorf("Replay by another consumer error = %v, want ErrNotFound", err)
	}
}
