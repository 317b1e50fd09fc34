package ops_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// setupPartitioned is setup on a table partitioned by the hour.
func setupPartitioned(t *testing.T) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema, Partitioning: pgstore.Partitioning{Interval: time.Hour, Ahead: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	o, err := ops.New(pool, ops.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, schema: schema, store: st, ops: o}
}

// partitionOf names the partition that holds the message now.
func (b *bundle) partitionOf(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var name string
	if err := b.pool.QueryRow(testCtx(t), b.sql("SELECT tableoid::regclass::text FROM {{schema}}.outbox_messages WHERE id = $1"), id).Scan(&name); err != nil {
		t.Fatalf("partition of %s: %v", id, err)
	}
	return name[strings.LastIndexByte(name, '.')+1:]
}

// oldSent enqueues n messages of aggregate type typ, sends them, and ages
// them (created and published) by age, which moves them to the default
// partition until MaintainPartitions makes a partition for them.
func (b *bundle) oldSent(t *testing.T, typ string, n int, age time.Duration) []uuid.UUID {
	t.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = msg(typ, uuid.NewString(), "Old")
	}
	b.enqueue(t, msgs...)
	b.send(t, msgIDs(msgs)...)
	for _, m := range msgs {
		b.age(t, m.ID, age)
	}
	return msgIDs(msgs)
}

// Retention on a partitioned table drops whole partitions past the cutoff
// while a relay publishes a stream of new messages, and keeps every
// partition that still holds an unsent message, a dead letter or (without
// IncludeDiscarded) a discarded one; partitions are created ahead.
func TestMaintainPartitions_DropsOldPartitionsWhileRelayPublishes(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Four old hours: all SENT; SENT and a dead letter; SENT and a
	// FAILED message not yet due; SENT and a DISCARDED message.
	allSent := b.oldSent(t, "A", 50, 10*time.Hour)
	withDead := b.oldSent(t, "B", 5, 9*time.Hour)
	dead := msg("B", "dead", "Old")
	b.enqueue(t, dead)
	b.fail(t, true, dead.ID, "broker said no")
	b.age(t, dead.ID, 9*time.Hour)
	withUnsent := b.oldSent(t, "C", 5, 8*time.Hour)
	unsent := msg("C", "unsent", "Old")
	b.enqueue(t, unsent)
	b.fail(t, false, unsent.ID, "timeout")
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET next_attempt_at = now() + interval '1 day' WHERE id = $1", unsent.ID)
	b.age(t, unsent.ID, 8*time.Hour)
	withDiscarded := b.oldSent(t, "D", 5, 7*time.Hour)
	discarded := msg("D", "discarded", "Old")
	b.enqueue(t, discarded)
	b.fail(t, true, discarded.ID, "poison")
	if _, err := b.ops.Discard(ctx, ops.Request{Reason: "poison", IDs: []uuid.UUID{discarded.ID}}); err != nil {
		t.Fatal(err)
	}
	b.age(t, discarded.ID, 7*time.Hour)
	if p := b.partitionOf(t, allSent[0]); p != "outbox_messages_default" {
		t.Fatalf("an aged row is in %s, want the default partition before maintenance", p)
	}

	// A relay publishes a stream of new messages throughout.
	sink := &recordingSink{}
	rl, err := relay.New(relay.Config{Store: b.store, Sink: sink, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	if err := rl.Start(relayCtx); err != nil {
		t.Fatal(err)
	}
	produceCtx, stopProducing := context.WithCancel(ctx)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		produced []uuid.UUID
	)
	wg.Go(func() {
		for i := 0; produceCtx.Err() == nil; i++ {
			m := msg("Stream", "s", "Tick")
			if err := pgx.BeginFunc(produceCtx, b.pool, func(tx pgx.Tx) error { return b.store.Enqueue(produceCtx, tx, m) }); err != nil {
				if produceCtx.Err() == nil {
					t.Errorf("enqueue during partition maintenance: %v", err)
				}
				return
			}
			mu.Lock()
			produced = append(produced, m.ID)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	})
	waitPublished := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); len(sink.published()) < n; {
			if time.Now().After(deadline) {
				t.Fatalf("the relay published %d messages, want at least %d", len(sink.published()), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitPublished(20)

	res, err := b.ops.MaintainPartitions(ctx, ops.PartitionConfig{OlderThan: 2 * time.Hour, Ahead: 3})
	if err != nil {
		t.Fatal(err)
	}
	publishedAtFirstRun := len(sink.published())
	var created []string
	for _, name := range res.Created {
		if name != "outbox_messages_default" {
			created = append(created, name)
		}
	}
	// The four old hours (made for the rows of the default partition) and
	// one more ahead (Ahead 3, where setup made 2).
	if len(created) != 5 {
		t.Errorf("created %v, want the 4 old hours and 1 ahead", res.Created)
	}
	if len(res.Dropped) != 1 || res.Dropped[0].Name != b.partitionNameAt(t, 10*time.Hour) {
		t.Fatalf("dropped %+v, want only the all-SENT hour %s", res.Dropped, b.partitionNameAt(t, 10*time.Hour))
	}
	for _, id := range allSent {
		if b.exists(t, id) {
			t.Fatalf("message %s of the dropped partition still exists", id)
		}
	}
	kept := map[string]ops.KeptPartition{}
	for _, k := range res.Kept {
		kept[k.Name] = k
	}
	for _, c := range []struct {
		age    time.Duration
		reason string
		ids    []uuid.UUID
	}{
		{9 * time.Hour, "dead letter", append(withDead, dead.ID)},
		{8 * time.Hour, "unsent", append(withUnsent, unsent.ID)},
		{7 * time.Hour, "DISCARDED", append(withDiscarded, discarded.ID)},
	} {
		name := b.partitionNameAt(t, c.age)
		k, ok := kept[name]
		if !ok || !strings.Contains(k.Reason, c.reason) {
			t.Errorf("partition %s: kept %v (%+v), want kept for %q", name, ok, k, c.reason)
		}
		for _, id := range c.ids {
			if !b.exists(t, id) {
				t.Errorf("message %s of the kept partition %s is gone", id, name)
			}
		}
	}
	if k := kept[b.partitionNameAt(t, 9*time.Hour)]; k.DeadLetters != 1 || k.Unsent != 0 {
		t.Errorf("dead-letter partition counts = %+v, want 1 dead letter", k)
	}
	if k := kept[b.partitionNameAt(t, 8*time.Hour)]; k.Unsent != 1 {
		t.Errorf("unsent partition counts = %+v, want 1 unsent", k)
	}

	// With IncludeDiscarded the discarded hour goes too; the others stay.
	waitPublished(publishedAtFirstRun + 20)
	res, err = b.ops.MaintainPartitions(ctx, ops.PartitionConfig{OlderThan: 2 * time.Hour, Ahead: 3, IncludeDiscarded: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || res.Dropped[0].Name != b.partitionNameAt(t, 7*time.Hour) || len(res.Kept) != 2 || len(res.Created) != 0 {
		t.Fatalf("second run: dropped %+v, kept %+v, created %v; want the discarded hour dropped, 2 kept, nothing created", res.Dropped, res.Kept, res.Created)
	}
	if b.exists(t, discarded.ID) {
		t.Error("the discarded message outlived its dropped partition")
	}
	// The audit log has both drops.
	entries, err := b.ops.Audit(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	drops := 0
	for _, e := range entries {
		if e.Action == ops.ActionCleanup && strings.Contains(string(e.Filter), "droppedPartitions") {
			drops++
		}
	}
	if drops != 2 {
		t.Errorf("audit log has %d partition drops, want 2", drops)
	}

	// Partitions exist for now and 3 hours ahead.
	ps, err := b.store.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	if err := b.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		at := now.Add(time.Duration(i) * time.Hour)
		if !slices.ContainsFunc(ps, func(p pgstore.Partition) bool {
			return !p.Default && !p.From.After(at) && p.To.After(at)
		}) {
			t.Errorf("no partition covers %s (now + %dh): %+v", at, i, ps)
		}
	}

	// The relay kept publishing: every message enqueued meanwhile is
	// published and SENT, none lost.
	stopProducing()
	wg.Wait()
	mu.Lock()
	all := append([]uuid.UUID(nil), produced...)
	mu.Unlock()
	if len(all) < 40 {
		t.Fatalf("only %d messages were enqueued during the test", len(all))
	}
	for deadline := time.Now().Add(time.Minute); ; {
		var n int
		if err := b.pool.QueryRow(ctx, b.sql("SELECT count(*) FROM {{schema}}.outbox_messages WHERE id = ANY($1) AND status = 'SENT'"), all).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(all) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d messages enqueued during maintenance are SENT", n, len(all))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopRelay()
	<-rl.Stopped()
	seen := map[uuid.UUID]bool{}
	for _, r := range sink.published() {
		seen[r.ID] = true
	}
	for _, id := range all {
		if !seen[id] {
			t.Fatalf("message %s was never published", id)
		}
	}
	t.Logf("relay published %d messages while partitions were created and dropped", len(sink.published()))
}

// partitionNameAt names the hourly partition that holds a row created age
// ago.
func (b *bundle) partitionNameAt(t *testing.T, age time.Duration) string {
	t.Helper()
	var at time.Time
	if err := b.pool.QueryRow(testCtx(t), "SELECT now() - $1::bigint * interval '1 millisecond'", age.Milliseconds()).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return "outbox_messages_p" + at.UTC().Truncate(time.Hour).Format("2006010215")
}

func TestMaintainPartitions_PlainTableAndBadConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	if _, err := b.ops.MaintainPartitions(ctx, ops.PartitionConfig{OlderThan: time.Hour}); !errors.Is(err, pgstore.ErrNotPartitioned) {
		t.Errorf("MaintainPartitions on a plain table = %v, want ErrNotPartitioned", err)
	}
	for field, cfg := range map[string]ops.PartitionConfig{
		"OlderThan":   {OlderThan: time.Second},
		"Ahead":       {Ahead: -1},
		"LockTimeout": {LockTimeout: time.Microsecond},
	} {
		_, err := b.ops.MaintainPartitions(ctx, cfg)
		if !errors.Is(err, ops.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%+v: %v, want ErrInvalidConfig naming %s", cfg, err, field)
		}
	}
}

// The operators' tools work on a partitioned table: stats, dead letters
// (list, show, replay, discard), republish of SENT events and row cleanup.
func TestOps_WorkOnAPartitionedTable(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t)
	ctx := testCtx(t)
	sent := nMsgs(5, "Order", "Placed")
	b.enqueue(t, sent...)
	b.send(t, msgIDs(sent)...)
	d1, d2 := msg("Pay", "1", "Charged"), msg("Pay", "2", "Charged")
	b.enqueue(t, d1, d2)
	b.fail(t, true, d1.ID, "e1")
	b.fail(t, true, d2.ID, "e2")
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")

	st, err := b.ops.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts[outbox.StatusDeadLetter] != 2 || st.Counts[outbox.StatusSent] != 5 {
		t.Errorf("Stats counts = %v, want 2 DEAD_LETTER and 5 SENT", st.Counts)
	}
	dls, err := b.ops.DeadLetters(ctx, ops.Filter{})
	if err != nil || len(dls) != 2 {
		t.Fatalf("DeadLetters = %d, %v; want 2", len(dls), err)
	}
	detail, err := b.ops.DeadLetter(ctx, d1.ID)
	if err != nil || len(detail.Attempts) != 1 || detail.Attempts[0].Error != "e1" {
		t.Fatalf("DeadLetter(d1) = %+v, %v; want its attempt", detail, err)
	}
	if _, err := b.ops.Replay(ctx, ops.Request{Reason: "fixed", IDs: []uuid.UUID{d1.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ops.Discard(ctx, ops.Request{Reason: "poison", IDs: []uuid.UUID{d2.ID}}); err != nil {
		t.Fatal(err)
	}
	if s1, s2 := b.status(t, d1.ID), b.status(t, d2.ID); s1 != outbox.StatusPending || s2 != ops.StatusDiscarded {
		t.Errorf("after replay and discard: %s, %s; want PENDING, DISCARDED", s1, s2)
	}
	sink := &recordingSink{}
	prog, err := b.ops.Republish(ctx, ops.RepublishConfig{Name: "rebuild", Since: time.Now().Add(-time.Hour), Rate: 10000}, sink)
	if err != nil || !prog.Finished || len(sink.published()) != 5 {
		t.Fatalf("Republish = %+v, %v, %d published; want the 5 SENT", prog, err, len(sink.published()))
	}
	for _, id := range msgIDs(sent) {
		b.age(t, id, 3*time.Hour)
	}
	res, err := b.ops.Cleanup(ctx, ops.CleanupConfig{OlderThan: time.Hour})
	if err != nil || res.Sent != 5 {
		t.Fatalf("Cleanup = %+v, %v; want 5 SENT deleted", res, err)
	}
}

// The relay's retention loop (RetentionEvery, "outbox relay
// --cleanup-older-than") drops partitions on a partitioned table and
// deletes rows on a plain one.
func TestRetentionEvery_FollowsTheTableKind(t *testing.T) {
	t.Parallel()
	for name, b := range map[string]*bundle{"partitioned": setupPartitioned(t), "plain": setup(t)} {
		old := b.oldSent(t, "A", 3, 10*time.Hour)
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() { done <- b.ops.RetentionEvery(ctx, ops.CleanupConfig{OlderThan: 2 * time.Hour}, time.Hour) }()
		// The run is over when its audit entry is written.
		var entries []ops.AuditEntry
		for deadline := time.Now().Add(30 * time.Second); len(entries) == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the retention loop recorded no cleanup", name)
			}
			time.Sleep(20 * time.Millisecond)
			var err error
			if entries, err = b.ops.Audit(testCtx(t), 5); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("%s: RetentionEvery returned %v, want context.Canceled", name, err)
		}
		for _, id := range old {
			if b.exists(t, id) {
				t.Errorf("%s: old SENT message %s is still there", name, id)
			}
		}
		if dropped := strings.Contains(string(entries[0].Filter), "droppedPartitions"); dropped != (name == "partitioned") {
			t.Errorf("%s: the audit entry %s says partitions dropped = %v", name, entries[0].Filter, dropped)
		}
	}
}
