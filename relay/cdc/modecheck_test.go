package cdc_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// waitSetupBlocked waits until a backend waits for the advisory lock of
// the setup of cfg's relays (held by holdSetup).
func (e *env) waitSetupBlocked(cfg cdc.Config, within time.Duration) {
	e.t.Helper()
	key := cdc.SetupLockKey(cfg)
	deadline := time.Now().Add(within)
	for {
		var waiting bool
		err := e.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted
			  AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid)`, key).Scan(&waiting)
		if err != nil {
			e.t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no relay waits for the setup lock within %s", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A switch out of CDC mode that commits after a relay became active and
// checked the mode, but before it set up its slot: the switch finds no
// walsender, drops the slot and forgets it; the relay then creates a new
// one, finds the outbox in claim mode before it streams, drops the slot it
// made and stops with ErrNotCDCMode. No slot is left to keep WAL, and
// nothing streams in claim mode.
func TestModeSwitch_BetweenCheckAndSetup_LeavesNoSlotAndStopsTheRelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	snk := e.newSink(nil)
	a := e.newRelay(e.config(snk))
	e.waitLeader(a, 20*time.Second)
	logs := &syncBuffer{}
	cfg := e.config(snk)
	cfg.ID = "standby"
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b := e.newRelay(cfg)
	waitOutput(t, logs, "standing by", 20*time.Second)

	release := e.holdSetup(cfg)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitSetupBlocked(cfg, 20*time.Second) // b is active, checked the mode, and sets up
	slot := cdc.DefaultSlot(e.schema)
	if sw := e.setMode(pgstore.ModeClaim); sw.From != pgstore.ModeCDC || len(sw.DroppedSlots) != 1 {
		t.Fatalf("SetMode(claim) = %+v, want from cdc with the slot dropped", sw)
	}
	release()
	released = true

	waitStopped(t, b, 30*time.Second)
	if err := b.Err(); !errors.Is(err, cdc.ErrNotCDCMode) || !strings.Contains(err.Error(), "in claim mode") {
		t.Fatalf("the relay stopped with %v, want ErrNotCDCMode naming claim mode", err)
	}
	if n := e.cdcObjects(slot); n != 0 {
		t.Fatalf("%d of slot, publication and registry row left after the relay stopped, want 0", n)
	}
	if strings.Contains(logs.String(), "active: streaming from the slot") {
		t.Fatal("the relay streamed from the slot in claim mode")
	}
}

// The outbox's mode record changes while the relay streams, in a way that
// does not wait for the CDC relays (SetMode refuses while one streams): the
// relay notices at its next lease renewal and stops, with an error that
// wraps ErrNotCDCMode and says how to drop the slot.
func TestModeChange_WhileStreaming_StopsTheRelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r := e.newRelay(e.config(e.newSink(nil)))
	e.waitLeader(r, 20*time.Second)
	e.enqueue(seqMessage("a", 0))
	e.consumed(1, 20*time.Second)
	if _, err := e.pool.Exec(context.Background(), `UPDATE outbox_relay_mode SET mode = 'claim'`); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	waitStopped(t, r, 2*cdc.DefaultLeaderLease)
	err := r.Err()
	if !errors.Is(err, cdc.ErrNotCDCMode) || !strings.Contains(err.Error(), "'outbox mode set claim'") {
		t.Fatalf("the relay stopped with %v, want ErrNotCDCMode saying how to drop the slot", err)
	}
	t.Logf("stopped %s after the change (lease %s)", time.Since(changed).Round(time.Millisecond), cdc.DefaultLeaderLease)
}
