package ops_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay"
)

// age moves a message's timestamps back by d.
func (b *bundle) age(t *testing.T, id uuid.UUID, d time.Duration) {
	t.Helper()
	b.exec(t, `UPDATE {{schema}}.outbox_messages
		SET created_at = created_at - $2::bigint * interval '1 millisecond',
		    published_at = published_at - $2::bigint * interval '1 millisecond',
		    discarded_at = discarded_at - $2::bigint * interval '1 millisecond'
		WHERE id = $1`, id, d.Milliseconds())
}

func (b *bundle) exists(t *testing.T, id uuid.UUID) bool {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(testCtx(t), b.sql("SELECT count(*) FROM {{schema}}.outbox_messages WHERE id = $1"), id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestCleanup_DeletesOnlySentMessagesOlderThanTheCutoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	oldSent := nMsgs(5, "Order", "OrderPlaced")
	recentSent := msg("Invoice", "1", "InvoiceIssued")
	oldPending, oldFailed, oldDead, oldDiscarded := msg("Pay", "1", "E"), msg("Pay", "2", "E"), msg("Pay", "3", "E"), msg("Pay", "4", "E")
	inFlight := msg("Pay", "5", "E")
	b.enqueue(t, append(oldSent, recentSent, oldFailed, oldDead, oldDiscarded, inFlight)...)
	// One old SENT message failed before: its history goes with it.
	b.fail(t, false, oldSent[0].ID, "transient")
	b.send(t, append(msgIDs(oldSent), recentSent.ID)...)
	b.fail(t, false, oldFailed.ID, "x")
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET next_attempt_at = now() + interval '1 hour' WHERE id = $1", oldFailed.ID)
	b.fail(t, true, oldDead.ID, "x")
	b.fail(t, true, oldDiscarded.ID, "x")
	if _, err := b.ops.Discard(testCtx(t), ops.Request{Reason: "r", IDs: []uuid.UUID{oldDiscarded.ID}}); err != nil {
		t.Fatal(err)
	}
	c := b.claimAll(t) // inFlight (and nothing else is due)
	if len(c.Records) != 1 || c.Records[0].ID != inFlight.ID {
		t.Fatalf("claimed %v, want only the in-flight one", ids(c.Records))
	}
	b.enqueue(t, oldPending)
	for _, id := range append(msgIDs(oldSent), oldPending.ID, oldFailed.ID, oldDead.ID, oldDiscarded.ID, inFlight.ID) {
		b.age(t, id, 10*24*time.Hour)
	}

	var batches []int64
	res, err := b.ops.Cleanup(testCtx(t), ops.CleanupConfig{OlderThan: 7 * 24 * time.Hour, BatchSize: 2, Actor: "cron@box",
		OnBatch: func(n int64) { batches = append(batches, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 5 || res.Discarded != 0 || res.Batches != 3 || !slices.Equal(batches, []int64{2, 2, 1}) {
		t.Errorf("result %+v, batches %v; want 5 SENT deleted in batches 2, 2, 1", res, batches)
	}
	for _, m := range oldSent {
		if b.exists(t, m.ID) {
			t.Errorf("old SENT message %s still exists", m.ID)
		}
	}
	for name, id := range map[string]uuid.UUID{"recent SENT": recentSent.ID, "PENDING": oldPending.ID, "FAILED": oldFailed.ID,
		"DEAD_LETTER": oldDead.ID, "DISCARDED": oldDiscarded.ID, "IN_FLIGHT": inFlight.ID} {
		if !b.exists(t, id) {
			t.Errorf("old %s message was deleted", name)
		}
	}
	var history int
	if err := b.pool.QueryRow(testCtx(t), b.sql("SELECT count(*) FROM {{schema}}.outbox_attempts WHERE message_id = $1"), oldSent[0].ID).Scan(&history); err != nil || history != 0 {
		t.Errorf("deleted message keeps %d attempt rows (%v), want 0", history, err)
	}
	audit, err := b.ops.Audit(testCtx(t), 1)
	if err != nil || len(audit) != 1 || audit[0].Action != ops.ActionCleanup || audit[0].Actor != "cron@box" || audit[0].Count != 5 {
		t.Errorf("audit = %+v, %v", audit, err)
	}

	// Discarded messages go only when asked.
	res, err = b.ops.Cleanup(testCtx(t), ops.CleanupConfig{OlderThan: 7 * 24 * time.Hour, IncludeDiscarded: true})
	if err != nil || res.Sent != 0 || res.Discarded != 1 || b.exists(t, oldDiscarded.ID) || !b.exists(t, oldDead.ID) {
		t.Errorf("with IncludeDiscarded: %+v, %v; discarded exists %v, dead letter exists %v",
			res, err, b.exists(t, oldDiscarded.ID), b.exists(t, oldDead.ID))
	}
}

func TestCleanup_InvalidConfigNamesField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for field, cfg := range map[string]ops.CleanupConfig{
		"OlderThan": {OlderThan: time.Second},
		"BatchSize": {OlderThan: time.Hour, BatchSize: -1},
		"Pause":     {OlderThan: time.Hour, Pause: -time.Second},
	} {
		if _, err := b.ops.Cleanup(testCtx(t), cfg); !errors.Is(err, ops.ErrInvalidConfig) || !containsWord(err.Error(), field) {
			t.Errorf("%s: error = %v, want ErrInvalidConfig naming it", field, err)
		}
	}
}

// The retention guarantee under load: a million SENT rows are deleted in
// bounded batches while a relay keeps publishing new messages.
func TestCleanup_MillionSentRowsInBoundedBatchesWhileRelayKeepsPublishing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// About 20 s on an idle 2-core machine; the bound is generous for a
	// loaded one.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const rows = 1_000_000
	seeding := time.Now()
	// Old SENT rows, published 30 days ago; ids in increasing order, which
	// keeps the insert fast.
	_, err := b.pool.Exec(ctx, b.sql(`INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, status, created_at, published_at)
		SELECT lpad(to_hex(g), 32, '0')::uuid, 'Order', (g % 10000)::text, 'OrderPlaced', 1, '{}'::bytea, 'application/json',
		       'SENT', now() - interval '30 days', now() - interval '30 days' + g * interval '1 millisecond'
		FROM generate_series(1, $1::int) g`), rows)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d SENT rows in %s", rows, time.Since(seeding).Round(time.Millisecond))
	// Old rows in the other states, which must stay.
	oldDead, oldDiscarded := msg("Pay", "1", "E"), msg("Pay", "2", "E")
	b.enqueue(t, oldDead, oldDiscarded)
	b.fail(t, true, oldDead.ID, "x")
	b.fail(t, true, oldDiscarded.ID, "x")
	if _, err := b.ops.Discard(ctx, ops.Request{Reason: "r", IDs: []uuid.UUID{oldDiscarded.ID}}); err != nil {
		t.Fatal(err)
	}
	b.age(t, oldDead.ID, 30*24*time.Hour)
	b.age(t, oldDiscarded.ID, 30*24*time.Hour)

	// A relay publishes a stream of new messages throughout.
	rl, err := relay.New(relay.Config{Store: b.store, Sink: &recordingSink{}, PollInterval: 50 * time.Millisecond,
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
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; produceCtx.Err() == nil; i++ {
			m := msg("Stream", "s", "Tick")
			if err := pgx.BeginFunc(produceCtx, b.pool, func(tx pgx.Tx) error { return b.store.Enqueue(produceCtx, tx, m) }); err != nil && produceCtx.Err() == nil {
				t.Errorf("enqueue during cleanup: %v", err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	var started, ended time.Time
	if err := b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&started); err != nil {
		t.Fatal(err)
	}
	const batchSize = ops.DefaultCleanupBatchSize
	var batches []int64
	res, err := b.ops.Cleanup(ctx, ops.CleanupConfig{OlderThan: 7 * 24 * time.Hour,
		OnBatch: func(n int64) { batches = append(batches, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&ended); err != nil {
		t.Fatal(err)
	}
	stopProducing()
	wg.Wait()
	stopRelay()
	<-rl.Stopped()

	if res.Sent != rows {
		t.Errorf("deleted %d SENT rows, want %d", res.Sent, rows)
	}
	if len(batches) < rows/batchSize || slices.Max(batches) > batchSize {
		t.Errorf("%d batches, largest %d; want at least %d batches of at most %d", len(batches), slices.Max(batches), rows/batchSize, batchSize)
	}
	// The relay made progress during the cleanup: messages enqueued after
	// it started were SENT before it ended.
	var during, enqueued int
	err = b.pool.QueryRow(ctx, b.sql(`SELECT count(*) FILTER (WHERE status = 'SENT' AND published_at < $2), count(*)
		FROM {{schema}}.outbox_messages WHERE aggregate_type = 'Stream' AND created_at > $1 AND created_at < $2`), started, ended).
		Scan(&during, &enqueued)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup of %d rows: %d batches in %s; relay sent %d of the %d messages enqueued meanwhile before it ended",
		rows, len(batches), ended.Sub(started).Round(time.Millisecond), during, enqueued)
	if during < 10 {
		t.Errorf("the relay sent %d messages enqueued during the cleanup before it ended, want at least 10", during)
	}
	// Only old SENT rows went.
	for name, id := range map[string]uuid.UUID{"DEAD_LETTER": oldDead.ID, "DISCARDED": oldDiscarded.ID} {
		if !b.exists(t, id) {
			t.Errorf("old %s message was deleted", name)
		}
	}
	var oldSent, streamSent int
	err = b.pool.QueryRow(ctx, b.sql(`SELECT count(*) FILTER (WHERE aggregate_type = 'Order'),
		count(*) FILTER (WHERE aggregate_type = 'Stream' AND status = $1)
		FROM {{schema}}.outbox_messages`), outbox.StatusSent).Scan(&oldSent, &streamSent)
	if err != nil {
		t.Fatal(err)
	}
	if oldSent != 0 || streamSent < during {
		t.Errorf("after cleanup: %d old SENT rows left (want 0), %d new SENT rows (want at least %d)", oldSent, streamSent, during)
	}
}
