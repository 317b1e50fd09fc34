package cdc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cdc"
)

// Remove waits while a relay streams from the slot (the slot keeps its WAL
// and the relay its stream), and once the relay stopped removes the slot,
// the publication and the registry row; removing again is no error.
func TestRemove_WaitsForTheRelayThenLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r := e.start(e.config(e.newSink(nil)))
	e.waitLeader(r, 30*time.Second)
	slot := cdc.DefaultSlot(e.schema)

	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := cdc.Remove(short, e.pool, e.schema, "", ""); !errors.Is(err, cdc.ErrSlotInUse) || sqlstate(err) != "55006" {
		t.Fatalf("Remove while the relay streams = %v, want ErrSlotInUse with PostgreSQL's object_in_use", err)
	}
	if n := e.cdcObjects(slot); n != 3 {
		t.Fatalf("after a Remove that gave up: %d of slot, publication and registry row left, want all 3", n)
	}

	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cdc.Remove(ctx, e.pool, e.schema, "", ""); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if n := e.cdcObjects(slot); n != 0 {
		t.Fatalf("after Remove: %d of slot, publication and registry row left, want 0", n)
	}
	if err := cdc.Remove(ctx, e.pool, e.schema, "", ""); err != nil {
		t.Fatalf("Remove again: %v", err)
	}
	if err := cdc.Remove(ctx, e.pool, e.schema, "Bad-Slot", ""); !errors.Is(err, cdc.ErrInvalidConfig) {
		t.Fatalf("Remove with a bad slot name = %v, want ErrInvalidConfig", err)
	}
}

// A relay that keeps streaming holds the slot past RemoveWait: Remove gives
// up then with ErrSlotInUse and PostgreSQL's error naming the walsender,
// not with the caller's deadline, and removes nothing.
func TestRemove_SlotStreamedPastTheWait_ReturnsErrSlotInUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r := e.start(e.config(e.newSink(nil)))
	e.waitLeader(r, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), cdc.RemoveWait+time.Minute)
	defer cancel()
	err := cdc.Remove(ctx, e.pool, e.schema, "", "")
	if !errors.Is(err, cdc.ErrSlotInUse) || sqlstate(err) != "55006" || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Remove of a streamed slot = %v, want ErrSlotInUse with PostgreSQL's object_in_use", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Remove returned only when the caller's context ended: %v", err)
	}
	if n := e.cdcObjects(cdc.DefaultSlot(e.schema)); n != 3 {
		t.Fatalf("after a Remove that gave up: %d of slot, publication and registry row left, want all 3", n)
	}
}

// A drop that PostgreSQL refuses for another reason than a walsender
// holding the slot (here: a role without the REPLICATION attribute) is
// returned at once with PostgreSQL's error; Remove does not wait for the
// slot or the caller's deadline.
func TestRemove_DropRefused_ReturnsTheRealErrorAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	slot := cdc.DefaultSlot(e.schema)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		t.Fatal(err)
	}
	pool := e.poolAs(e.schema + "_norepl")

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := cdc.Remove(ctx, pool, e.schema, "", "")
	if sqlstate(err) != "42501" || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Remove by a role without REPLICATION = %v, want PostgreSQL's insufficient_privilege", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Remove returned only when the caller's context ended: %v", err)
	}
	var n int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil || n != 1 {
		t.Fatalf("slot count after the refused Remove = %d, %v; want the slot kept", n, err)
	}
}

// poolAs returns a pool on the test database logged in as a new role
// without REPLICATION (nor superuser), dropped when the test ends.
func (e *env) poolAs(role string) *pgxpool.Pool {
	e.t.Helper()
	ctx := context.Background()
	quoted := pgx.Identifier{role}.Sanitize()
	if _, err := e.pool.Exec(ctx, "CREATE ROLE "+quoted+" LOGIN NOSUPERUSER NOREPLICATION"); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if _, err := e.pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+quoted); err != nil {
			e.t.Logf("drop role %s: %v", role, err)
		}
	})
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	return pool
}

// sqlstate returns the SQLSTATE of the PostgreSQL error err wraps, or "".
func sqlstate(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	return ""
}

// cdcObjects counts what exists of the slot, its publication (named like
// it) and its row in outbox_cdc_slots.
func (e *env) cdcObjects(slot string) int {
	e.t.Helper()
	var n int
	err := e.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1) +
		(SELECT count(*) FROM pg_publication WHERE pubname = $1) +
		(SELECT count(*) FROM outbox_cdc_slots WHERE slot_name = $1)`, slot).Scan(&n)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}
