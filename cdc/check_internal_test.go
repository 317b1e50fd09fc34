package cdc

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

type nopSink struct{ sink.Sink }

// The stream can deliver a commit before the transaction is visible. The
// batch check must then say "absent, transaction not visible" (read again),
// never "absent" alone (which means handled, and would skip the message),
// judged in the same snapshot as the row.
func TestCheck_RowOfInvisibleTransactionIsReadAgainNotSkipped(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	ctx := context.Background()
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Pool: pool, Sink: nopSink{}, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	r.sendCtx = ctx
	if err := r.setupTables(ctx); err != nil {
		t.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := st.Enqueue(ctx, tx, outbox.Message{AggregateType: "Order", AggregateID: "o-1", EventType: "E", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var seq, xid int64
	if err := tx.QueryRow(ctx, `SELECT max(seq), pg_current_xact_id()::text::bigint % 4294967296 FROM outbox_messages`).Scan(&seq, &xid); err != nil {
		t.Fatal(err)
	}
	ev := event{rec: outbox.Record{Seq: seq, Message: outbox.Message{AggregateType: "Order", AggregateID: "o-1"}}, isRec: true, xid: uint32(xid)}

	got := map[int64]verdict{}
	if err := r.checkOnce([]event{ev}, got); err != nil {
		t.Fatal(err)
	}
	if v := got[seq]; v.status != "" || v.visible {
		t.Fatalf("before commit: verdict %+v; want an absent row of an invisible transaction", v)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.checkOnce([]event{ev}, got); err != nil {
		t.Fatal(err)
	}
	if v := got[seq]; v.status != "PENDING" || !v.visible || v.blocked {
		t.Fatalf("after commit: verdict %+v; want a visible PENDING row, not blocked", v)
	}
	var other int64
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint % 4294967296`).Scan(&other)
	})
	// A committed transaction whose row is gone (deleted): absent and
	// visible, so skipped as handled.
	if err := r.checkOnce([]event{{rec: outbox.Record{Seq: seq + 1000}, isRec: true, xid: uint32(other)}}, got); err != nil {
		t.Fatal(err)
	}
	if v := got[seq+1000]; v.status != "" || !v.visible {
		t.Fatalf("deleted row: verdict %+v; want absent and visible", v)
	}
}
