package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay"
)

func TestDeadLetters_ListsInSeqOrderWithFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := seedStates(t, b)
	ctx := testCtx(t)

	all, err := b.ops.DeadLetters(ctx, ops.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := deadIDs(all); !slices.Equal(got, []uuid.UUID{m["dead1"].ID, m["dead2"].ID}) {
		t.Fatalf("DeadLetters = %v, want dead1, dead2", got)
	}
	d := all[0]
	if d.AggregateType != "Order" || d.AggregateID != "1" || d.EventType != "OrderPlaced" || d.Attempts != 2 ||
		d.LastError != "boom 2" || d.Waiting != 2 || d.DeadAt.Before(d.CreatedAt) {
		t.Errorf("dead1 = %+v", d)
	}
	if all[1].Waiting != 0 {
		t.Errorf("dead2 waiting = %d, want 0", all[1].Waiting)
	}

	for name, tc := range map[string]struct {
		f    ops.Filter
		want []uuid.UUID
	}{
		"aggregate id":   {ops.Filter{AggregateID: "2"}, []uuid.UUID{m["dead2"].ID}},
		"aggregate type": {ops.Filter{AggregateType: "Invoice"}, nil},
		"event type":     {ops.Filter{EventType: "OrderPlaced", AggregateType: "Order"}, []uuid.UUID{m["dead1"].ID, m["dead2"].ID}},
		"since future":   {ops.Filter{Since: time.Now().Add(time.Hour)}, nil},
		"since past":     {ops.Filter{Since: time.Now().Add(-time.Hour)}, []uuid.UUID{m["dead1"].ID, m["dead2"].ID}},
		"limit":          {ops.Filter{Limit: 1}, []uuid.UUID{m["dead1"].ID}},
		"after seq":      {ops.Filter{AfterSeq: all[0].Seq}, []uuid.UUID{m["dead2"].ID}},
	} {
		got, err := b.ops.DeadLetters(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(deadIDs(got), tc.want) {
			t.Errorf("%s: DeadLetters = %v, want %v", name, deadIDs(got), tc.want)
		}
	}
}

func deadIDs(ds []ops.DeadLetter) []uuid.UUID {
	var out []uuid.UUID
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func TestDeadLetter_ShowsPayloadHeadersEveryAttemptAndAudit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg("Order", "1", "OrderPlaced")
	m.Headers = map[string]string{"tenant": "acme"}
	m.Payload = []byte(`{"orderId":"1"}`)
	b.enqueue(t, m, msg("Order", "1", "OrderPaid"))
	b.fail(t, true, m.ID, "timeout", "NOT_ENOUGH_REPLICAS", "gave up")

	d, err := b.ops.DeadLetter(testCtx(t), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Record.Payload) != `{"orderId":"1"}` || d.Record.Headers["tenant"] != "acme" ||
		d.Record.Status != outbox.StatusDeadLetter || d.Waiting != 1 {
		t.Errorf("detail = %+v", d)
	}
	var errs []string
	for i, a := range d.Attempts {
		errs = append(errs, a.Error)
		if a.Number != i+1 || a.Dead != (i == 2) || a.At.IsZero() {
			t.Errorf("attempt %d = %+v", i, a)
		}
	}
	if !slices.Equal(errs, []string{"timeout", "NOT_ENOUGH_REPLICAS", "gave up"}) {
		t.Errorf("attempt errors = %q", errs)
	}

	if _, err := b.ops.Discard(testCtx(t), ops.Request{Actor: "alice@box", Reason: "customer cancelled", IDs: []uuid.UUID{m.ID}}); err != nil {
		t.Fatal(err)
	}
	d, err = b.ops.DeadLetter(testCtx(t), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Record.Status != ops.StatusDiscarded || d.DiscardedAt.IsZero() || len(d.Audit) != 1 {
		t.Fatalf("after discard: status %s discarded at %v audit %+v", d.Record.Status, d.DiscardedAt, d.Audit)
	}
	if a := d.Audit[0]; a.Actor != "alice@box" || a.Action != ops.ActionDiscard || a.Reason != "customer cancelled" ||
		!slices.Equal(a.MessageIDs, []uuid.UUID{m.ID}) || a.Count != 1 {
		t.Errorf("audit entry = %+v", a)
	}
}

func TestDeadLetter_UnknownIDIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.ops.DeadLetter(testCtx(t), uuid.New()); !errors.Is(err, ops.ErrNotFound) {
		t.Errorf("error = %v, want ErrNotFound", err)
	}
}

func TestReplay_ResetsAttemptsAndRelayPublishesAggregateInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := []outbox.Message{msg("Order", "1", "OrderPlaced"), msg("Order", "1", "OrderPaid"), msg("Order", "1", "OrderShipped")}
	b.enqueue(t, ms...)
	b.fail(t, true, ms[0].ID, "e1", "e2")

	res, err := b.ops.Replay(testCtx(t), ops.Request{Actor: "bob@box", Reason: "topic fixed", IDs: []uuid.UUID{ms[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.IDs, []uuid.UUID{ms[0].ID}) || res.AuditID == 0 {
		t.Errorf("Replay result = %+v", res)
	}
	r := b.get(t, ms[0].ID)
	if r.Status != outbox.StatusPending || r.Attempts != 0 || r.LastError != "" || r.NextAttemptAt.After(time.Now().Add(time.Second)) {
		t.Errorf("replayed record = status %s attempts %d last error %q next %v", r.Status, r.Attempts, r.LastError, r.NextAttemptAt)
	}
	audit, err := b.ops.Audit(testCtx(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Action != ops.ActionReplay || audit[0].Actor != "bob@box" || audit[0].Reason != "topic fixed" {
		t.Errorf("audit = %+v", audit)
	}

	// A relay now publishes the replayed message and the two behind it, in
	// order.
	snk := &recordingSink{}
	rl, err := relay.New(relay.Config{Store: b.store, Sink: snk, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if err := rl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return len(snk.published()) >= 3 })
	cancel()
	<-rl.Stopped()
	if got := ids(snk.published()); !slices.Equal(got, msgIDs(ms)) {
		t.Errorf("published %v, want %v in order", got, msgIDs(ms))
	}
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReplay_ByIDChangesNothingUnlessEveryIDIsADeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead, pending := msg("Order", "1", "E"), msg("Order", "2", "E")
	b.enqueue(t, dead, pending)
	b.fail(t, true, dead.ID, "x")

	_, err := b.ops.Replay(testCtx(t), ops.Request{IDs: []uuid.UUID{dead.ID, pending.ID}})
	if !errors.Is(err, ops.ErrNotDeadLetter) || !strings.Contains(err.Error(), pending.ID.String()+" (PENDING)") {
		t.Errorf("replay with a pending id: error = %v, want ErrNotDeadLetter naming it", err)
	}
	unknown := uuid.New()
	_, err = b.ops.Replay(testCtx(t), ops.Request{IDs: []uuid.UUID{dead.ID, unknown}})
	if !errors.Is(err, ops.ErrNotFound) || !strings.Contains(err.Error(), unknown.String()) {
		t.Errorf("replay with an unknown id: error = %v, want ErrNotFound naming it", err)
	}
	if s := b.status(t, dead.ID); s != outbox.StatusDeadLetter {
		t.Errorf("dead letter is %s after failed replays, want DEAD_LETTER", s)
	}
	if n := b.auditCount(t); n != 0 {
		t.Errorf("%d audit entries after failed replays, want 0", n)
	}
	if _, err := b.ops.Replay(testCtx(t), ops.Request{}); !errors.Is(err, ops.ErrEmptySelection) {
		t.Errorf("replay of nothing: error = %v, want ErrEmptySelection", err)
	}
}

func TestReplay_ByFilterReplaysMatchingDeadLettersOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	placed1, placed2, paid := msg("Order", "1", "OrderPlaced"), msg("Order", "2", "OrderPlaced"), msg("Order", "3", "OrderPaid")
	b.enqueue(t, placed1, placed2, paid)
	for _, m := range []outbox.Message{placed1, placed2, paid} {
		b.fail(t, true, m.ID, "x")
	}

	if _, err := b.ops.Replay(testCtx(t), ops.Request{Filter: &ops.Filter{}}); !errors.Is(err, ops.ErrEmptySelection) {
		t.Errorf("replay with an empty filter: error = %v, want ErrEmptySelection", err)
	}
	res, err := b.ops.Replay(testCtx(t), ops.Request{Reason: "fixed", Filter: &ops.Filter{EventType: "OrderPlaced"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.IDs, []uuid.UUID{placed1.ID, placed2.ID}) {
		t.Errorf("replayed %v, want the two OrderPlaced in seq order", res.IDs)
	}
	if s := b.status(t, paid.ID); s != outbox.StatusDeadLetter {
		t.Errorf("OrderPaid is %s, want DEAD_LETTER", s)
	}
	audit, err := b.ops.Audit(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	var f ops.Filter
	if err := json.Unmarshal(audit[0].Filter, &f); err != nil || f.EventType != "OrderPlaced" || audit[0].Count != 2 {
		t.Errorf("audit entry = %+v (filter %+v, %v)", audit[0], f, err)
	}

	res, err = b.ops.Replay(testCtx(t), ops.Request{Filter: &ops.Filter{All: true}})
	if err != nil || !slices.Equal(res.IDs, []uuid.UUID{paid.ID}) {
		t.Errorf("replay all = %+v, %v; want the remaining dead letter", res, err)
	}
}

func TestDiscard_RequiresReasonKeepsMessageAndUnblocksAggregate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	head, behind := msg("Order", "1", "OrderPlaced"), msg("Order", "1", "OrderPaid")
	b.enqueue(t, head, behind)
	b.fail(t, true, head.ID, "poison")

	if _, err := b.ops.Discard(testCtx(t), ops.Request{IDs: []uuid.UUID{head.ID}}); !errors.Is(err, ops.ErrReasonRequired) {
		t.Errorf("discard without reason: error = %v, want ErrReasonRequired", err)
	}
	if c := b.claimAll(t); len(c.Records) != 0 {
		t.Fatalf("claimed %d behind a dead letter", len(c.Records))
	}
	if _, err := b.ops.Discard(testCtx(t), ops.Request{Reason: "poison payload", IDs: []uuid.UUID{head.ID}}); err != nil {
		t.Fatal(err)
	}
	if s := b.status(t, head.ID); s != ops.StatusDiscarded {
		t.Errorf("discarded message is %s, want DISCARDED (kept)", s)
	}
	c := b.claimAll(t)
	if got := ids(c.Records); !slices.Equal(got, []uuid.UUID{behind.ID}) {
		t.Errorf("claim after discard = %v, want the message behind it", got)
	}
	if _, err := b.ops.Discard(testCtx(t), ops.Request{Reason: "again", IDs: []uuid.UUID{head.ID}}); !errors.Is(err, ops.ErrNotDeadLetter) {
		t.Errorf("discarding twice: error = %v, want ErrNotDeadLetter", err)
	}
}
