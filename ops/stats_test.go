package ops_test

import (
	"maps"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/ops"
)

func TestStats_EmptyOutboxReportsEveryStatusAsZero(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, err := b.ops.Stats(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[outbox.Status]int64{}
	for _, st := range ops.Statuses {
		want[st] = 0
	}
	if !maps.Equal(s.Counts, want) {
		t.Errorf("Counts = %v, want %v", s.Counts, want)
	}
	if !s.OldestUnsentAt.IsZero() || s.OldestUnsentAge != 0 || s.BlockedAggregates != 0 ||
		len(s.Blocked) != 0 || len(s.TopFailing) != 0 || s.SentLastMinute != 0 {
		t.Errorf("empty outbox stats = %+v", s)
	}
	if s.At.IsZero() {
		t.Error("At is zero")
	}
}

// seedStates writes one outbox with every state:
//
//	Order/1: DEAD_LETTER (OrderPlaced), PENDING, PENDING  -> blocked, 2 waiting
//	Order/2: DEAD_LETTER (OrderPlaced), nothing behind     -> not blocked
//	Order/3: FAILED (OrderPaid)
//	Order/4: IN_FLIGHT
//	Order/5: DISCARDED, PENDING                            -> not blocked
//	Order/6..8: SENT (one of them two minutes ago)
func seedStates(t *testing.T, b *bundle) (m map[string]outbox.Message) {
	t.Helper()
	m = map[string]outbox.Message{
		"dead1": msg("Order", "1", "OrderPlaced"), "wait1a": msg("Order", "1", "OrderPaid"), "wait1b": msg("Order", "1", "OrderShipped"),
		"dead2":   msg("Order", "2", "OrderPlaced"),
		"failed3": msg("Order", "3", "OrderPaid"),
		"flight4": msg("Order", "4", "OrderPlaced"),
		"disc5":   msg("Order", "5", "OrderPlaced"), "wait5": msg("Order", "5", "OrderPaid"),
		"sent6": msg("Order", "6", "OrderPlaced"), "sent7": msg("Order", "7", "OrderPlaced"), "sent8": msg("Order", "8", "OrderPlaced"),
	}
	b.enqueue(t, m["dead1"], m["wait1a"], m["wait1b"], m["dead2"], m["failed3"], m["flight4"], m["disc5"], m["wait5"],
		m["sent6"], m["sent7"], m["sent8"])
	b.send(t, m["sent6"].ID, m["sent7"].ID, m["sent8"].ID)
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET published_at = now() - interval '2 minutes' WHERE id = $1", m["sent6"].ID)
	b.fail(t, true, m["dead1"].ID, "boom 1", "boom 2")
	b.fail(t, true, m["dead2"].ID, "too large")
	b.fail(t, true, m["disc5"].ID, "bad")
	if _, err := b.ops.Discard(testCtx(t), ops.Request{Reason: "test", IDs: []uuid.UUID{m["disc5"].ID}}); err != nil {
		t.Fatal(err)
	}
	b.fail(t, false, m["failed3"].ID, "retry me")
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET next_attempt_at = now() + interval '1 hour' WHERE id = $1", m["failed3"].ID)
	// Take Order/4 in flight; release nothing else (wait5 stays PENDING).
	c := b.claimAll(t)
	var rest []int64
	for _, r := range c.Records {
		if r.ID != m["flight4"].ID {
			rest = append(rest, r.Seq)
		}
	}
	if _, err := b.store.Release(testCtx(t), c.Token, rest); err != nil {
		t.Fatal(err)
	}
	// The oldest unsent message in seq order is wait1a: make it an hour old.
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET created_at = now() - interval '1 hour' WHERE id = $1", m["wait1a"].ID)
	return m
}

func TestStats_SeededStates(t *testing.T) {
	t.Parallel()
	b := setupWith(t, ops.Config{ExactCountBelow: -1}) // estimate SENT, however small the table
	m := seedStates(t, b)
	b.exec(t, "ANALYZE {{schema}}.outbox_messages") // the SENT estimate
	s, err := b.ops.Stats(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[outbox.Status]int64{
		outbox.StatusPending: 3, outbox.StatusInFlight: 1, outbox.StatusSent: 3,
		outbox.StatusFailed: 1, outbox.StatusDeadLetter: 2, ops.StatusDiscarded: 1,
	}
	if !maps.Equal(s.Counts, want) {
		t.Errorf("Counts = %v, want %v", s.Counts, want)
	}
	if !s.SentEstimated {
		t.Error("SentEstimated = false, want true")
	}
	if s.OldestUnsentAge < time.Hour || s.OldestUnsentAge > time.Hour+time.Minute {
		t.Errorf("OldestUnsentAge = %s, want about 1h", s.OldestUnsentAge)
	}
	if s.BlockedAggregates != 1 || len(s.Blocked) != 1 {
		t.Fatalf("BlockedAggregates = %d, Blocked = %+v; want only Order/1", s.BlockedAggregates, s.Blocked)
	}
	if got := s.Blocked[0]; got != (ops.BlockedAggregate{AggregateType: "Order", AggregateID: "1",
		DeadLetterID: m["dead1"].ID, EventType: "OrderPlaced", Waiting: 2}) {
		t.Errorf("Blocked[0] = %+v", got)
	}
	wantFailing := []ops.FailingEventType{{EventType: "OrderPlaced", DeadLetter: 2}, {EventType: "OrderPaid", Failed: 1}}
	if len(s.TopFailing) != 2 || s.TopFailing[0] != wantFailing[0] || s.TopFailing[1] != wantFailing[1] {
		t.Errorf("TopFailing = %+v, want %+v", s.TopFailing, wantFailing)
	}
	if s.SentLastMinute != 2 {
		t.Errorf("SentLastMinute = %d, want 2 (one of three was sent two minutes ago)", s.SentLastMinute)
	}
}

func TestStats_ExactSentCountCountsWithoutStatistics(t *testing.T) {
	t.Parallel()
	b := setupWith(t, ops.Config{ExactSentCount: true})
	ms := nMsgs(5, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	b.send(t, msgIDs(ms)...)
	s, err := b.ops.Stats(testCtx(t)) // no ANALYZE: the estimate would be stale
	if err != nil {
		t.Fatal(err)
	}
	if s.Counts[outbox.StatusSent] != 5 || s.SentEstimated {
		t.Errorf("SENT = %d (estimated %v), want exactly 5", s.Counts[outbox.StatusSent], s.SentEstimated)
	}
}

// A small table's SENT messages are counted: a new outbox, whose statistics
// were taken when it was empty, shows what it sent, not the estimate of 0.
// Above Config.ExactCountBelow rows the estimate is read.
func TestStats_SmallTableCountsSentExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, "ANALYZE {{schema}}.outbox_messages") // statistics of the empty table: 0 rows
	ms := nMsgs(4, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	b.send(t, msgIDs(ms)...)
	s, err := b.ops.Stats(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Counts[outbox.StatusSent] != 4 || s.SentEstimated {
		t.Errorf("SENT = %d (estimated %v), want exactly 4", s.Counts[outbox.StatusSent], s.SentEstimated)
	}

	// Past the threshold, by the statistics: the estimate.
	more := nMsgs(16, "Order", "OrderPlaced")
	b.enqueue(t, more...)
	b.send(t, msgIDs(more)...)
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")
	large, err := ops.New(b.pool, ops.Config{Schema: b.schema, ExactCountBelow: 10})
	if err != nil {
		t.Fatal(err)
	}
	if s, err = large.Stats(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if !s.SentEstimated || s.Counts[outbox.StatusSent] != 20 {
		t.Errorf("SENT = %d (estimated %v), want the estimate of 20", s.Counts[outbox.StatusSent], s.SentEstimated)
	}
}

func TestStats_TopLimitsTheLists(t *testing.T) {
	t.Parallel()
	b := setupWith(t, ops.Config{Top: 1})
	var ms []outbox.Message
	for _, agg := range []string{"a", "b"} {
		ms = append(ms, msg("Order", agg, "E"+agg), msg("Order", agg, "Later"))
	}
	b.enqueue(t, ms...)
	b.fail(t, true, ms[0].ID, "x")
	b.fail(t, true, ms[2].ID, "y")
	s, err := b.ops.Stats(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.BlockedAggregates != 2 || len(s.Blocked) != 1 || s.Blocked[0].AggregateID != "a" {
		t.Errorf("BlockedAggregates = %d, Blocked = %+v; want 2 counted, the oldest (a) listed", s.BlockedAggregates, s.Blocked)
	}
	if len(s.TopFailing) != 1 {
		t.Errorf("TopFailing = %+v, want one entry", s.TopFailing)
	}
}
