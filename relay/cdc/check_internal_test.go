package cdc

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

type nopSink struct{ sink.Sink }

// checkFixture returns a migrated outbox in a schema of its own, its store,
// and a relay on it that was not started, ready for checkOnce.
func checkFixture(t *testing.T) (*pgxpool.Pool, *pgstore.Store, *Relay) {
	t.Helper()
	return relayFixture(t, Config{})
}

// relayFixture returns a migrated outbox in CDC mode, in a schema of its
// own, its store, and a relay of cfg on it (newRelay) that holds the
// slot's lease, as the active relay does, since the checks and records are
// fenced by it.
func relayFixture(t *testing.T, cfg Config) (*pgxpool.Pool, *pgstore.Store, *Relay) {
	t.Helper()
	pool, r := newRelay(t, cfg)
	ctx := context.Background()
	if _, err := r.store.SetMode(ctx, pgstore.ModeCDC, "test"); err != nil {
		t.Fatalf("SetMode(cdc): %v", err)
	}
	r.sendCtx = ctx
	l, err := r.takeLease(ctx, backend{}) // no replication connection: no backend to terminate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.endLead(l) })
	return pool, r.store, r
}

// newRelay returns a migrated outbox in a schema of its own and a relay of
// cfg on it (Pool, Schema, and Sink and Logger if nil, filled in) that was
// not started, with its tables set up; its store is the outbox's.
func newRelay(t *testing.T, cfg Config) (*pgxpool.Pool, *Relay) {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	ctx := context.Background()
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Pool, cfg.Schema = pool, schema
	if cfg.Sink == nil {
		cfg.Sink = nopSink{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.setupTables(ctx); err != nil {
		t.Fatal(err)
	}
	return pool, r
}

// enqueueOnePerAggregate commits one message of each aggregate, a
// transaction each, and returns their records.
func enqueueOnePerAggregate(t *testing.T, pool *pgxpool.Pool, st *pgstore.Store, aggs ...string) []outbox.Record {
	t.Helper()
	ctx := context.Background()
	var recs []outbox.Record
	for _, agg := range aggs {
		m := outbox.Message{ID: uuid.New(), AggregateType: "Order", AggregateID: agg, EventType: "E", Payload: []byte(`{}`)}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, m) }); err != nil {
			t.Fatal(err)
		}
		rec, err := st.Get(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// The stream can deliver a commit before the transaction is visible. The
// batch check must then say "absent, transaction not visible" (read again),
// never "absent" alone (which means handled, and would skip the message),
// judged in the same snapshot as the row.
func TestCheck_RowOfInvisibleTransactionIsReadAgainNotSkipped(t *testing.T) {
	t.Parallel()
	pool, st, r := checkFixture(t)
	ctx := context.Background()

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

// A message a polling relay holds (during a switch both run) is left to it:
// the check reports it IN_FLIGHT, though a claim leaves its row PENDING,
// and the later messages of its aggregate as blocked, so the stream sends
// neither and the aggregate goes to the table path.
func TestCheck_MessageAPollingRelayHoldsIsLeftToIt(t *testing.T) {
	t.Parallel()
	pool, st, r := checkFixture(t)
	ctx := context.Background()
	var evs []event
	for range 2 {
		m := outbox.Message{AggregateType: "Order", AggregateID: "o-1", EventType: "E", Payload: []byte(`{}`)}
		var seq, xid int64
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := st.Enqueue(ctx, tx, m); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT max(seq), pg_current_xact_id()::text::bigint % 4294967296 FROM outbox_messages`).Scan(&seq, &xid)
		})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, event{rec: outbox.Record{Seq: seq, Message: m}, isRec: true, xid: uint32(xid)})
	}
	c, err := st.Claim(ctx, store.ClaimParams{Owner: "polling", Limit: 10, Lease: time.Minute})
	if err != nil || len(c.Records) != 1 || c.Records[0].Seq != evs[0].rec.Seq {
		t.Fatalf("polling claim: %+v, %v; want the first message", c.Records, err)
	}
	got := map[int64]verdict{}
	if err := r.checkOnce(evs, got); err != nil {
		t.Fatal(err)
	}
	if v := got[evs[0].rec.Seq]; v.status != string(outbox.StatusInFlight) {
		t.Errorf("held message: verdict %+v; want IN_FLIGHT", v)
	}
	if v := got[evs[1].rec.Seq]; v.status != string(outbox.StatusPending) || !v.blocked {
		t.Errorf("the message behind it: verdict %+v; want PENDING and blocked", v)
	}
}

// A message a polling relay claims between the check and the record (the
// stream published it too: a duplicate, at-least-once) keeps its lease:
// the record neither marks it SENT nor fails it, so the polling relay's
// own mark or failure under its token decides, and its fence still holds.
func TestRecord_LeavesAMessageAPollingRelayHolds(t *testing.T) {
	t.Parallel()
	pool, st, r := checkFixture(t)
	ctx := context.Background()
	recs := enqueueOnePerAggregate(t, pool, st, "held-sent", "held-failed", "free")
	c, err := st.Claim(ctx, store.ClaimParams{Owner: "polling", Limit: 2, Lease: time.Minute})
	if err != nil || len(c.Records) != 2 {
		t.Fatalf("polling claim: %d records, %v; want the first two", len(c.Records), err)
	}
	out := toRecord{
		sent:   []*entry{entryOf(recs[0]), entryOf(recs[2])},
		failed: []*entry{failedEntry(r, recs[1], errors.New("boom"))},
	}
	if err := r.record(out, r.leaseToken()); err != nil {
		t.Fatal(err)
	}
	for i, want := range []outbox.Status{outbox.StatusInFlight, outbox.StatusInFlight, outbox.StatusSent} {
		got, err := st.Get(ctx, recs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want || got.Attempts != 0 {
			t.Errorf("%s after the record: %s with %d attempts; want %s, no attempt", recs[i].AggregateID, got.Status, got.Attempts, want)
		}
	}
	if n, err := st.MarkSent(ctx, c.Token, []int64{recs[0].Seq, recs[1].Seq}); err != nil || n != 2 {
		t.Errorf("the polling relay's mark under its token: %d, %v; want 2", n, err)
	}
}

// Once another relay took the slot's lease, the old holder's record and
// check change nothing (no mark, no failure, no deferral) and end its lead
// with errLostLead.
func TestRecordAndCheck_FencedOnceAnotherRelayTookTheLease(t *testing.T) {
	t.Parallel()
	pool, st, r := checkFixture(t)
	ctx := context.Background()
	recs := enqueueOnePerAggregate(t, pool, st, "a", "b")
	// Another relay takes the lease, as after a takeover.
	if _, err := pool.Exec(ctx, r.q.leaseTake, r.cfg.Slot, "other", uuid.New(), time.Minute.Milliseconds(), nil, nil); err != nil {
		t.Fatal(err)
	}
	out := toRecord{
		sent:   []*entry{entryOf(recs[0])},
		failed: []*entry{failedEntry(r, recs[1], errors.New("boom"))},
	}
	if err := r.record(out, r.leaseToken()); !errors.Is(err, errLostLead) {
		t.Fatalf("record after the takeover: %v; want errLostLead", err)
	}
	got := map[int64]verdict{}
	if err := r.checkOnce([]event{{rec: recs[1], isRec: true}}, got); !errors.Is(err, errLostLead) {
		t.Fatalf("check after the takeover: %v; want errLostLead", err)
	}
	for _, rec := range recs {
		now, err := st.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if now.Status != outbox.StatusPending || now.Attempts != 0 {
			t.Errorf("%s after the fenced record: %s with %d attempts; want PENDING, untouched", rec.AggregateID, now.Status, now.Attempts)
		}
	}
	var deferred int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM outbox_cdc_deferred").Scan(&deferred); err != nil {
		t.Fatal(err)
	}
	if deferred != 0 {
		t.Errorf("%d aggregates deferred by the fenced relay; want none", deferred)
	}
	if l := r.lead.Load(); l == nil || !errors.Is(l.lostErr(), errLostLead) {
		t.Errorf("the relay's lead after the fenced record: %v; want lost", l)
	}
}
