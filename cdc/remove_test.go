package cdc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/cdc"
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
	if err := cdc.Remove(short, e.pool, e.schema, "", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Remove while the relay streams = %v, want context.DeadlineExceeded", err)
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
