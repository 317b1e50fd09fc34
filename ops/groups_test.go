package ops_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store"
)

// Errors as the relay stores them: the Kafka sink's error texts.
func kafkaError(id uuid.UUID, topic string, code error) string {
	return kafka.ClassifyError(fmt.Errorf("kafka: publish message %s to topic %s: %w", id, topic, code)).Error()
}

// kill dead-letters the messages with ids, which must be heads of their
// aggregates, as the relay does after a failed attempt, with errText as
// their last error; other claimed messages are released.
func (b *bundle) kill(t *testing.T, errText func(id uuid.UUID) string, ids ...uuid.UUID) {
	t.Helper()
	c := b.claimAll(t)
	want := map[uuid.UUID]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var failures []store.Failure
	var others []int64
	for _, r := range c.Records {
		if want[r.ID] {
			failures = append(failures, store.Failure{Seq: r.Seq, Error: errText(r.ID), CountAttempt: true, Dead: true})
			delete(want, r.ID)
		} else {
			others = append(others, r.Seq)
		}
	}
	if len(want) > 0 {
		t.Fatalf("%d of the messages to kill were not claimable", len(want))
	}
	if _, err := b.store.MarkFailed(testCtx(t), c.Token, failures); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Release(testCtx(t), c.Token, others); err != nil {
		t.Fatal(err)
	}
}

// deadAt sets when the dead letter with id became one.
func (b *bundle) deadAt(t *testing.T, id uuid.UUID, at time.Time) {
	t.Helper()
	b.exec(t, "UPDATE {{schema}}.outbox_attempts SET at = $2 WHERE message_id = $1 AND dead", id, at)
}

// drain acts as the relay: it claims the due heads and marks them SENT
// until nothing is due, and returns what it sent, in order.
func (b *bundle) drain(t *testing.T) []uuid.UUID {
	t.Helper()
	var sent []uuid.UUID
	for {
		c := b.claimAll(t)
		if len(c.Records) == 0 {
			return sent
		}
		seqs := make([]int64, len(c.Records))
		for i, r := range c.Records {
			seqs[i] = r.Seq
			sent = append(sent, r.ID)
		}
		if _, err := b.store.MarkSent(testCtx(t), c.Token, seqs); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeadLetterGroups_GroupByCauseWithCountsAndTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tooLarge := []outbox.Message{msg("Order", "1", "OrderPlaced"), msg("Order", "2", "OrderPlaced"), msg("Order", "3", "OrderPlaced")}
	for i := range tooLarge {
		tooLarge[i].Topic = "orders"
	}
	serverError, decode := msg("Order", "4", "OrderPaid"), msg("Invoice", "1", "InvoiceIssued")
	b.enqueue(t, append(tooLarge, serverError, decode)...)
	b.kill(t, func(id uuid.UUID) string { return kafkaError(id, "orders", kerr.MessageTooLarge) }, msgIDs(tooLarge)...)
	b.kill(t, func(id uuid.UUID) string { return kafkaError(id, "payments", kerr.UnknownServerError) }, serverError.ID)
	b.kill(t, func(uuid.UUID) string {
		return fmt.Errorf("%w: cdc: decode message 1234: headers: invalid JSON", sink.ErrPermanent).Error()
	}, decode.ID)
	now := time.Now().Truncate(time.Second)
	for i, h := range []int{3, 1, 2} {
		b.deadAt(t, tooLarge[i].ID, now.Add(-time.Duration(h)*time.Hour))
	}

	groups, err := b.ops.DeadLetterGroups(testCtx(t), ops.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3: %+v", len(groups), groups)
	}
	g := groups[0]
	if g.ErrorClass != "MESSAGE_TOO_LARGE" || g.Topic != "orders" || g.EventType != "OrderPlaced" || g.Count != 3 ||
		g.Aggregates != 3 || !g.FirstDeadAt.Equal(now.Add(-3*time.Hour)) || !g.LastDeadAt.Equal(now.Add(-time.Hour)) ||
		g.LastError != kafkaError(tooLarge[2].ID, "orders", kerr.MessageTooLarge) || !ops.ValidGroupKey(g.Key) {
		t.Errorf("first group = %+v; want the three MESSAGE_TOO_LARGE, dead from 3h to 1h ago", g)
	}
	byClass := map[string]ops.DeadLetterGroup{}
	for _, g := range groups {
		byClass[g.ErrorClass] = g
	}
	// A retriable error ran out of attempts; an error without a Kafka code
	// is named by its text, without the number in it.
	for class, want := range map[string]struct{ topic, eventType string }{
		"max attempts: UNKNOWN_SERVER_ERROR":           {"", "OrderPaid"},
		"cdc: decode message N: headers: invalid JSON": {"", "InvoiceIssued"},
	} {
		if g, ok := byClass[class]; !ok || g.Count != 1 || g.Topic != want.topic || g.EventType != want.eventType {
			t.Errorf("group %q = %+v (found %v); want one %s with the topic empty (chosen by the routes)", class, g, ok, want.eventType)
		}
	}

	// The group's key, its class and its topic select its dead letters.
	for name, f := range map[string]ops.Filter{
		"group": {Group: g.Key}, "error class": {ErrorClass: "MESSAGE_TOO_LARGE"}, "topic": {Topic: "orders"},
	} {
		list, err := b.ops.DeadLetters(testCtx(t), f)
		if err != nil {
			t.Fatal(err)
		}
		if got := deadIDs(list); !slices.Equal(got, msgIDs(tooLarge)) {
			t.Errorf("DeadLetters by %s = %v, want the three MESSAGE_TOO_LARGE", name, got)
		}
		for _, d := range list {
			if d.Group != g.Key || d.ErrorClass != g.ErrorClass {
				t.Errorf("dead letter %s: group %q class %q, want %q %q", d.ID, d.Group, d.ErrorClass, g.Key, g.ErrorClass)
			}
		}
	}
	if gs, err := b.ops.DeadLetterGroups(testCtx(t), ops.Filter{Since: now.Add(-90 * time.Minute), ErrorClass: "MESSAGE_TOO_LARGE"}); err != nil ||
		len(gs) != 1 || gs[0].Count != 1 || gs[0].Key != g.Key {
		t.Errorf("groups since 90 minutes ago = %+v, %v; want the one dead an hour ago, in the same group", gs, err)
	}
}

// groupFixture is three aggregates:
//
//	X: x1 dead in group G, x2 PENDING behind it
//	Z: z1 and z2 dead in group G, z3 PENDING behind them
//	Y: y1 dead in another group, y2 PENDING behind it
type groupFixture struct {
	x1, x2, z1, z2, z3, y1, y2 outbox.Message
	group                      string
}

func newGroupFixture(t *testing.T, b *bundle) groupFixture {
	t.Helper()
	f := groupFixture{
		x1: msg("Order", "x", "OrderPlaced"), x2: msg("Order", "x", "OrderPaid"),
		z1: msg("Order", "z", "OrderPlaced"), z2: msg("Order", "z", "OrderPlaced"), z3: msg("Order", "z", "OrderPaid"),
		y1: msg("Order", "y", "OrderPlaced"), y2: msg("Order", "y", "OrderPaid"),
	}
	b.enqueue(t, f.x1, f.x2, f.z1, f.z2, f.z3, f.y1, f.y2)
	tooLarge := func(id uuid.UUID) string { return kafkaError(id, "orders", kerr.MessageTooLarge) }
	b.kill(t, tooLarge, f.x1.ID, f.z1.ID)
	b.kill(t, func(id uuid.UUID) string { return kafkaError(id, "orders", kerr.TopicAuthorizationFailed) }, f.y1.ID)
	// A second dead letter of Z in the group: the relay would not claim it
	// behind z1, but a replay of z1 that failed again could leave Z so.
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET status = 'DEAD_LETTER', attempts = 1, last_error = $2 WHERE id = $1",
		f.z2.ID, tooLarge(f.z2.ID))
	list, err := b.ops.DeadLetters(testCtx(t), ops.Filter{ErrorClass: "MESSAGE_TOO_LARGE"})
	if err != nil {
		t.Fatal(err)
	}
	if got := deadIDs(list); !slices.Equal(got, []uuid.UUID{f.x1.ID, f.z1.ID, f.z2.ID}) || list[0].Group != list[2].Group {
		t.Fatalf("the group is %v, want x1, z1, z2", got)
	}
	f.group = list[0].Group
	return f
}

// Replaying a group replays exactly its dead letters, a batch per
// transaction with its audit entry, and no message overtakes an earlier
// one of its aggregate: not between batches, not behind a dead letter of
// the group a later batch replays, not behind one of another group.
func TestReplay_GroupInBatchesKeepsAggregateOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newGroupFixture(t, b)

	var sent [][]uuid.UUID // what the relay sent after each batch
	var batches []ops.Result
	res, err := b.ops.Replay(testCtx(t), ops.Request{Actor: "alice@box", Reason: "limit raised",
		Filter: &ops.Filter{Group: f.group}, BatchSize: 1,
		OnBatch: func(r ops.Result) {
			batches = append(batches, r)
			sent = append(sent, b.drain(t))
		}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]uuid.UUID{
		{f.x1.ID, f.x2.ID}, // x1 replayed: it, then x2 behind it
		{f.z1.ID},          // z1 replayed: z3 still waits behind z2
		{f.z2.ID, f.z3.ID}, // z2 replayed: it, then z3
	}
	if len(sent) != len(want) {
		t.Fatalf("%d batches, want 3 (of 1): relay sent %v", len(sent), sent)
	}
	for i := range want {
		if !slices.Equal(sent[i], want[i]) {
			t.Errorf("after batch %d the relay sent %v, want %v", i+1, sent[i], want[i])
		}
		if len(batches[i].IDs) != 1 || len(batches[i].AuditIDs) != 1 {
			t.Errorf("batch %d = %+v, want one message and one audit entry", i+1, batches[i])
		}
	}
	if !slices.Equal(res.IDs, []uuid.UUID{f.x1.ID, f.z1.ID, f.z2.ID}) || len(res.AuditIDs) != 3 || res.AuditID != res.AuditIDs[0] {
		t.Errorf("Replay = %+v; want x1, z1, z2 in three audited batches", res)
	}
	if s := b.status(t, f.y1.ID); s != outbox.StatusDeadLetter {
		t.Errorf("y1, of another group, is %s, want DEAD_LETTER", s)
	}
	if rest := b.drain(t); len(rest) != 0 {
		t.Errorf("y2 overtook the dead letter y1: the relay sent %v", rest)
	}
	assertBatchAudit(t, b, ops.ActionReplay, f.group, [][]uuid.UUID{{f.x1.ID}, {f.z1.ID}, {f.z2.ID}})
}

// Discarding a group discards exactly its dead letters; a message behind
// two of them flows only once both are discarded.
func TestDiscard_GroupInBatchesKeepsAggregateOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newGroupFixture(t, b)

	if _, err := b.ops.Discard(testCtx(t), ops.Request{Reason: "obsolete", Filter: &ops.Filter{All: true}}); !errors.Is(err, ops.ErrEmptySelection) {
		t.Errorf("Discard of every dead letter: error = %v, want ErrEmptySelection", err)
	}
	var sent [][]uuid.UUID
	res, err := b.ops.Discard(testCtx(t), ops.Request{Actor: "alice@box", Reason: "obsolete",
		Filter: &ops.Filter{Group: f.group}, BatchSize: 2,
		OnBatch: func(ops.Result) { sent = append(sent, b.drain(t)) }})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]uuid.UUID{{f.x2.ID}, {f.z3.ID}} // z3 waits for z2, in the second batch
	if len(sent) != 2 || !slices.Equal(sent[0], want[0]) || !slices.Equal(sent[1], want[1]) {
		t.Errorf("the relay sent %v after each batch, want %v", sent, want)
	}
	for _, id := range res.IDs {
		if s := b.status(t, id); s != ops.StatusDiscarded {
			t.Errorf("%s is %s, want DISCARDED", id, s)
		}
	}
	if !slices.Equal(res.IDs, []uuid.UUID{f.x1.ID, f.z1.ID, f.z2.ID}) {
		t.Errorf("discarded %v, want x1, z1, z2", res.IDs)
	}
	if s := b.status(t, f.y1.ID); s != outbox.StatusDeadLetter {
		t.Errorf("y1, of another group, is %s, want DEAD_LETTER", s)
	}
	assertBatchAudit(t, b, ops.ActionDiscard, f.group, [][]uuid.UUID{{f.x1.ID, f.z1.ID}, {f.z2.ID}})
}

// assertBatchAudit checks that the audit log has one entry per batch, oldest
// first, each naming the batch's messages and the group.
func assertBatchAudit(t *testing.T, b *bundle, action, group string, batches [][]uuid.UUID) {
	t.Helper()
	entries, err := b.ops.Audit(testCtx(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(entries)
	if len(entries) != len(batches) {
		t.Fatalf("%d audit entries, want %d: %+v", len(entries), len(batches), entries)
	}
	for i, e := range entries {
		var f ops.Filter
		if err := json.Unmarshal(e.Filter, &f); err != nil || f.Group != group {
			t.Errorf("audit entry %d filter %s (%v), want the group %s", i+1, e.Filter, err, group)
		}
		if e.Action != action || e.Actor != "alice@box" || e.Count != int64(len(batches[i])) || !slices.Equal(e.MessageIDs, batches[i]) {
			t.Errorf("audit entry %d = %+v; want %s of %v by alice@box", i+1, e, action, batches[i])
		}
	}
}

// A change by filter commits at most BatchSize messages per transaction,
// and at most Rate messages per second: the third batch of three
// cannot start before the first two's six messages took their 300 ms.
func TestReplay_ByFilterHonoursBatchSizeAndRate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := nMsgs(7, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	b.kill(t, func(id uuid.UUID) string { return kafkaError(id, "orders", kerr.MessageTooLarge) }, msgIDs(ms)...)

	var sizes []int
	start := time.Now()
	res, err := b.ops.Replay(testCtx(t), ops.Request{Filter: &ops.Filter{ErrorClass: "MESSAGE_TOO_LARGE"},
		BatchSize: 3, Rate: 20, OnBatch: func(r ops.Result) { sizes = append(sizes, len(r.IDs)) }})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{3, 3, 1}) || len(res.IDs) != 7 || len(res.AuditIDs) != 3 {
		t.Errorf("batches of %v, %d audit entries; want 3, 3, 1 in three transactions", sizes, len(res.AuditIDs))
	}
	if n := b.auditCount(t); n != 3 {
		t.Errorf("%d audit entries, want one per batch", n)
	}
	if min := 6 * time.Second / 20; elapsed < min {
		t.Errorf("7 messages at 20/s in batches of 3 took %s, less than the %s the rate allows", elapsed, min)
	}
}

// Replay by filter takes the dead letters as of its start: one dead-
// lettered again meanwhile (a permanent error) is not replayed twice.
func TestReplay_ByFilterReplaysEachDeadLetterOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := nMsgs(4, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	tooLarge := func(id uuid.UUID) string { return kafkaError(id, "orders", kerr.MessageTooLarge) }
	b.kill(t, tooLarge, msgIDs(ms)...)
	res, err := b.ops.Replay(testCtx(t), ops.Request{Filter: &ops.Filter{ErrorClass: "MESSAGE_TOO_LARGE"}, BatchSize: 2,
		Rate: -1, OnBatch: func(r ops.Result) { b.kill(t, tooLarge, r.IDs...) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.IDs, msgIDs(ms)) {
		t.Errorf("replayed %v, want each of the four once", res.IDs)
	}
}

func TestDeadLetterBySeq_ShowsTheMessageWithThatSeq(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg("Order", "1", "OrderPlaced")
	b.enqueue(t, m)
	seq := b.get(t, m.ID).Seq
	d, err := b.ops.DeadLetterBySeq(testCtx(t), seq)
	if err != nil || d.Record.ID != m.ID {
		t.Errorf("DeadLetterBySeq(%d) = %v, %v; want %s", seq, d.Record.ID, err, m.ID)
	}
	if _, err := b.ops.DeadLetterBySeq(testCtx(t), seq+1000); !errors.Is(err, ops.ErrNotFound) {
		t.Errorf("DeadLetterBySeq of an unknown seq: error = %v, want ErrNotFound", err)
	}
}

// A Filter.Group that is not a group's key (16 lower-case hex digits), such
// as one cut short, is refused before anything is read or changed.
func TestFilter_GroupThatIsNotAKeyIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newGroupFixture(t, b)
	for _, key := range []string{f.group[:8], f.group + "0", strings.ToUpper(f.group)} {
		filter := ops.Filter{Group: key}
		_, errList := b.ops.DeadLetters(testCtx(t), filter)
		_, errGroups := b.ops.DeadLetterGroups(testCtx(t), filter)
		_, errReplay := b.ops.Replay(testCtx(t), ops.Request{Filter: &filter})
		_, errDiscard := b.ops.Discard(testCtx(t), ops.Request{Filter: &filter, Reason: "x"})
		for name, err := range map[string]error{"DeadLetters": errList, "DeadLetterGroups": errGroups, "Replay": errReplay, "Discard": errDiscard} {
			if !errors.Is(err, ops.ErrInvalidConfig) || !strings.Contains(err.Error(), "Filter.Group") {
				t.Errorf("%s with Group %q: error = %v; want ErrInvalidConfig naming Filter.Group", name, key, err)
			}
		}
	}
	if s := b.status(t, f.x1.ID); s != outbox.StatusDeadLetter || b.auditCount(t) != 0 {
		t.Errorf("x1 is %s with %d audit entries; want nothing changed", s, b.auditCount(t))
	}
}
