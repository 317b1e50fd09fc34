package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/claim"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// mode reads the outbox's mode, failing the test on an error.
func (b *bundle) mode(t *testing.T) pgstore.ModeState {
	t.Helper()
	m, err := b.Store.Mode(pgstoretest.Context(t))
	if err != nil {
		t.Fatalf("Mode: %v", err)
	}
	return m
}

// before017 undoes migration 017: the outbox is as an older binary left it.
func (b *bundle) before017(t *testing.T) {
	t.Helper()
	b.Exec(t, `DROP TABLE {{schema}}.outbox_relay_mode;
		DROP FUNCTION {{schema}}.outbox_mode_follows_cursor() CASCADE;
		DELETE FROM {{schema}}.outbox_migrations WHERE version = 17`)
}

func TestMode_ANewOutboxIsInClaimMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.mode(t)
	if m.Mode != pgstore.ModeClaim || !m.Recorded || m.By != "migration 017" || time.Since(m.Since) > time.Minute {
		t.Fatalf("Mode = %+v, want claim recorded by migration 017 just now", m)
	}
}

// recordCDCSlot records slot as package cdc does when its relay creates
// it (the table outbox_cdc_slots, which the relay creates), at the given
// time.
func (b *bundle) recordCDCSlot(t *testing.T, slot string, at time.Time) {
	t.Helper()
	b.Exec(t, `CREATE TABLE IF NOT EXISTS {{schema}}.outbox_cdc_slots (slot_name text PRIMARY KEY, publication text NOT NULL,
		consistent_lsn pg_lsn NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), created_by text NOT NULL)`)
	b.Exec(t, `INSERT INTO {{schema}}.outbox_cdc_slots VALUES ($1, $1, '0/0', $2, 'r')`, slot, at)
}

// createSlot creates the logical replication slot name in the database
// that conn is connected to (the test's pool when conn is nil), and drops
// it when the test ends.
func (b *bundle) createSlot(t *testing.T, conn *pgx.Conn, name string) {
	t.Helper()
	var q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	} = b.Pool
	if conn != nil {
		q = conn
	}
	if _, err := q.Exec(pgstoretest.Context(t), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name); err != nil {
		t.Fatalf("create slot %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := q.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()", name); err != nil {
			t.Errorf("drop slot %s: %v", name, err)
		}
	})
}

// otherDatabase connects to another database of the test's server, and
// closes the connection when the test ends.
func otherDatabase(t *testing.T) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = map[bool]string{true: "template1", false: "postgres"}[cfg.Database == "postgres"]
	conn, err := pgx.ConnectConfig(pgstoretest.Context(t), cfg)
	if err != nil {
		t.Skipf("no other database to put a slot in: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Migration 017 records the mode an existing outbox is in, and until it
// runs Mode derives the same. CDC mode needs a slot the CDC relay recorded
// that still exists in the outbox's database: an outbox whose slot was
// dropped, as the way back to polling used to leave it (or whose only slot
// of that name is another database's), is in claim mode.
func TestMode_Migration017KeepsTheModeOfAnExistingOutbox(t *testing.T) {
	t.Parallel()
	recorded := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name  string
		want  pgstore.Mode
		state func(t *testing.T, b *bundle) time.Time // sets the mode up, returns since when
	}{
		{"claim", pgstore.ModeClaim, func(*testing.T, *bundle) time.Time { return time.Time{} }},
		{"cursor", pgstore.ModeCursor, func(t *testing.T, b *bundle) time.Time {
			if err := b.Store.EnableCursor(pgstoretest.Context(t)); err != nil {
				t.Fatal(err)
			}
			var at time.Time
			if err := b.Pool.QueryRow(pgstoretest.Context(t), b.SQL(`SELECT enabled_at FROM {{schema}}.outbox_cursor`)).Scan(&at); err != nil {
				t.Fatal(err)
			}
			return at
		}},
		{"cdc_slot_exists", pgstore.ModeCDC, func(t *testing.T, b *bundle) time.Time {
			slot := "outbox_" + b.Schema
			b.createSlot(t, nil, slot)
			b.recordCDCSlot(t, slot, recorded)
			b.recordCDCSlot(t, "gone_"+b.Schema, recorded.Add(-time.Hour)) // an older slot, dropped
			return recorded
		}},
		{"claim_recorded_slot_dropped", pgstore.ModeClaim, func(t *testing.T, b *bundle) time.Time {
			b.recordCDCSlot(t, "outbox_"+b.Schema, recorded)
			return time.Time{}
		}},
		{"claim_slot_in_another_database", pgstore.ModeClaim, func(t *testing.T, b *bundle) time.Time {
			slot := "outbox_" + b.Schema
			b.createSlot(t, otherDatabase(t), slot)
			b.recordCDCSlot(t, slot, recorded)
			return time.Time{}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.before017(t)
			since := c.state(t, b)
			if m := b.mode(t); m.Mode != c.want || m.Recorded {
				t.Fatalf("Mode before 017 = %+v, want %s derived, not recorded", m, c.want)
			}
			if _, err := b.Store.SetMode(pgstoretest.Context(t), pgstore.ModeClaim, "t"); !errors.Is(err, pgstore.ErrModeSwitch) ||
				!strings.Contains(err.Error(), "migration 017") {
				t.Fatalf("SetMode before 017 = %v, want ErrModeSwitch naming migration 017", err)
			}
			if err := b.Store.Migrate(pgstoretest.Context(t)); err != nil {
				t.Fatal(err)
			}
			m := b.mode(t)
			if m.Mode != c.want || !m.Recorded || m.By != "migration 017" {
				t.Fatalf("Mode after 017 = %+v, want %s recorded by the migration", m, c.want)
			}
			if !since.IsZero() && !m.Since.Equal(since) {
				t.Errorf("Since = %s, want %s (when the outbox entered the mode)", m.Since, since)
			}
		})
	}
}

// An outbox in claim mode with a slot the CDC relay recorded (the row an
// older release left when the slot was dropped, which migration 017 does
// not take for CDC mode) is refused cursor mode, and the refusal names the
// commands that forget the slot; they do.
func TestSetMode_CursorRefusedWhileACDCSlotIsRecorded_NamesTheWayOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	b.recordCDCSlot(t, "outbox_"+b.Schema, time.Now())
	_, err := b.Store.SetMode(ctx, pgstore.ModeCursor, "t")
	if !errors.Is(err, pgstore.ErrModeSwitch) || !strings.Contains(err.Error(), "'outbox mode set cdc' and 'outbox mode set cursor'") {
		t.Fatalf("SetMode(cursor) with a recorded CDC slot = %v, want ErrModeSwitch naming the commands", err)
	}
	for _, m := range []pgstore.Mode{pgstore.ModeCDC, pgstore.ModeCursor} {
		if _, err := b.Store.SetMode(ctx, m, "t"); err != nil {
			t.Fatalf("SetMode(%s), as the refusal says: %v", m, err)
		}
	}
	var slots int
	if err := b.Pool.QueryRow(ctx, b.SQL(`SELECT count(*) FROM {{schema}}.outbox_cdc_slots`)).Scan(&slots); err != nil || slots != 0 {
		t.Fatalf("%d recorded CDC slots (%v) after the commands, want none", slots, err)
	}
	if m := b.mode(t); m.Mode != pgstore.ModeCursor {
		t.Fatalf("Mode = %+v, want cursor", m)
	}
}

// SetMode records who switched and when, does nothing for the mode the
// outbox is in, and refuses a mode it does not know.
func TestSetMode_IsIdempotentAndRecordsWho(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	if sw, err := b.Store.SetMode(ctx, pgstore.ModeClaim, "alice"); err != nil || sw.From != sw.To {
		t.Fatalf("SetMode(claim) on claim = %+v, %v; want nothing done", sw, err)
	}
	if m := b.mode(t); m.By != "migration 017" {
		t.Fatalf("a switch that did nothing recorded %+v", m)
	}
	sw, err := b.Store.SetMode(ctx, pgstore.ModeCursor, "alice")
	if err != nil || sw.From != pgstore.ModeClaim || sw.To != pgstore.ModeCursor {
		t.Fatalf("SetMode(cursor) = %+v, %v", sw, err)
	}
	first := b.mode(t)
	if first.Mode != pgstore.ModeCursor || first.By != "alice" {
		t.Fatalf("Mode = %+v, want cursor by alice", first)
	}
	if sw, err := b.Store.SetMode(ctx, pgstore.ModeCursor, "bob"); err != nil || sw.From != sw.To {
		t.Fatalf("SetMode(cursor) again = %+v, %v; want nothing done", sw, err)
	}
	if m := b.mode(t); m != first {
		t.Fatalf("Mode after a repeated switch = %+v, want %+v", m, first)
	}
	if _, err := b.Store.SetMode(ctx, "polling", "alice"); err == nil || !strings.Contains(err.Error(), "claim, cursor or cdc") {
		t.Fatalf("SetMode(polling) = %v, want an error naming the modes", err)
	}
	if sw, err := b.Store.SetMode(ctx, pgstore.ModeCDC, ""); err != nil || sw.From != pgstore.ModeCursor {
		t.Fatalf("SetMode(cdc) = %+v, %v", sw, err)
	}
	var role string
	if err := b.Pool.QueryRow(ctx, "SELECT session_user").Scan(&role); err != nil {
		t.Fatal(err)
	}
	if m := b.mode(t); m.Mode != pgstore.ModeCDC || m.By != role {
		t.Fatalf("Mode = %+v, want cdc by the database role %s", m, role)
	}
	var active bool
	if err := b.Pool.QueryRow(ctx, b.SQL(`SELECT active FROM {{schema}}.outbox_cursor`)).Scan(&active); err != nil || active {
		t.Fatalf("outbox_cursor.active = %v (%v) in cdc mode, want false", active, err)
	}
}

// The cursor's flag, which the relays read, and the recorded mode never
// disagree: EnableCursor and DisableCursor record the mode, and a change
// of the flag by an older binary (plain SQL here) is recorded too.
func TestMode_TheCursorFlagAndTheRecordAgree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.Store.EnableCursor(pgstoretest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if m := b.mode(t); m.Mode != pgstore.ModeCursor {
		t.Fatalf("after EnableCursor: %+v, want cursor", m)
	}
	b.Exec(t, `UPDATE {{schema}}.outbox_cursor SET active = false`)
	if m := b.mode(t); m.Mode != pgstore.ModeClaim {
		t.Fatalf("after the flag was cleared: %+v, want claim", m)
	}
	b.Exec(t, `UPDATE {{schema}}.outbox_cursor SET active = true`)
	if m := b.mode(t); m.Mode != pgstore.ModeCursor {
		t.Fatalf("after the flag was set: %+v, want cursor", m)
	}
	if moved, err := b.Store.DisableCursor(pgstoretest.Context(t)); err != nil || moved != 0 {
		t.Fatalf("DisableCursor = %d, %v", moved, err)
	}
	if m := b.mode(t); m.Mode != pgstore.ModeClaim {
		t.Fatalf("after DisableCursor: %+v, want claim", m)
	}
}

// Claim mode to cursor mode and back with SetMode while messages are
// written: the Store of the claim-mode relay refuses its claims once it
// sees the switch (ErrNotClaimMode), and a relay on a Cursor takes over,
// as a relay that follows the mode does; the switch back is refused while
// that relay leads, and made once it stopped. Every message is published
// once, in order per aggregate.
func TestSetMode_ClaimToCursorAndBack_NothingLostOrderKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	snk := &pgstoretest.RecordingSink{}
	newStore := func() *pgstore.Store {
		st, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	startRelay := func(id string, strat strategy.Strategy) func() {
		rl, err := relay.New(relay.Config{Strategy: strat, Sink: snk, ID: id, PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := rl.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := rl.Stop(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	var (
		wg      sync.WaitGroup
		done    = make(chan struct{})
		written int
	)
	wg.Add(1)
	go func() { // one message of each of 5 aggregates every 10 ms
		defer wg.Done()
		for ; ; written++ {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			var msgs []outbox.Message
			for a := range 5 {
				msgs = append(msgs, pgstoretest.Msg("Order", fmt.Sprint("o-", a)))
			}
			if err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error { return b.Store.Enqueue(ctx, tx, msgs...) }); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 20 s: %s", what)
			}
		}
	}

	st := newStore()
	stop := startRelay("A", claim.New(st))
	waitFor("claim mode publishes", func() bool { return snk.Count() > 50 })
	if sw, err := b.Store.SetMode(ctx, pgstore.ModeCursor, "t"); err != nil || sw.From != pgstore.ModeClaim {
		t.Fatalf("SetMode(cursor) = %+v, %v", sw, err)
	}
	waitFor("the claim-mode relay's Store refuses", func() bool {
		_, err := st.Claim(ctx, store.ClaimParams{Owner: "probe", Limit: 0, Lease: time.Second})
		return errors.Is(err, pgstore.ErrNotClaimMode)
	})
	stop()
	cur := cursor.New(newStore()).Queue()
	stop = startRelay("B", cur.Strategy)
	waitFor("the relay leads the cursor", func() bool { leading, _ := cur.Leading(); return leading })
	sent := snk.Count()
	waitFor("cursor mode publishes", func() bool { return snk.Count() > sent+50 })
	if _, err := b.Store.SetMode(ctx, pgstore.ModeClaim, "t"); !errors.Is(err, pgstore.ErrModeSwitch) ||
		!strings.Contains(err.Error(), "stop the relays first") {
		t.Fatalf("SetMode(claim) while a relay leads = %v, want ErrModeSwitch saying to stop the relays", err)
	}
	stop()
	time.Sleep(100 * time.Millisecond) // QUEUED while no relay runs
	if sw, err := b.Store.SetMode(ctx, pgstore.ModeClaim, "t"); err != nil || sw.From != pgstore.ModeCursor || sw.Requeued == 0 {
		t.Fatalf("SetMode(claim) = %+v, %v; want the unsent QUEUED messages requeued", sw, err)
	}
	stop = startRelay("C", claim.New(newStore()))
	defer stop()
	time.Sleep(200 * time.Millisecond)
	close(done)
	wg.Wait()
	waitFor("every message published", func() bool { return snk.Count() >= 5*written })
	var all []int64
	for agg, got := range snk.ByAggregate() {
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("aggregate %s published out of order or twice: %v", agg, got)
		}
		all = append(all, got...)
	}
	if len(all) != 5*written {
		t.Errorf("%d messages published, want the %d written", len(all), 5*written)
	}
}
