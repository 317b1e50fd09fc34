package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// wakeWithin is how long a wake-up may take to arrive.
const wakeWithin = 5 * time.Second

// quietFor is how long a test watches for a wake-up that must not come.
// Waiting longer cannot make a correct store fail.
const quietFor = 300 * time.Millisecond

// listen listens as an idle relay would: registered with Store.Idle, so
// that committed enqueues notify.
func listen(t *testing.T, s *pgstore.Store) (<-chan struct{}, context.CancelFunc) {
	t.Helper()
	ch, cancel := listenOnly(t, s)
	if err := s.Idle(context.Background(), "relay-"+t.Name(), time.Minute); err != nil {
		t.Fatalf("Idle: %v", err)
	}
	return ch, cancel
}

// listenOnly listens without registering as idle.
func listenOnly(t *testing.T, s *pgstore.Store) (<-chan struct{}, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := s.Notifications(ctx)
	if err != nil {
		t.Fatalf("Notifications: %v", err)
	}
	return ch, cancel
}

// Enqueues notify only while a relay is registered as idle: a NOTIFY
// serializes commits database-wide, so writers must not pay for it while
// the relays are busy (or absent). Busy and expiry end the registration.
func TestNotifications_OnlyWhileARelayIsIdle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	ch, _ := listenOnly(t, b.Store)
	b.Enqueue(t, pgstoretest.Msg("Order", "1"))
	expectQuiet(t, ch, "enqueue with no idle relay")

	if err := b.Store.Idle(ctx, "r1", time.Minute); err != nil {
		t.Fatal(err)
	}
	b.Enqueue(t, pgstoretest.Msg("Order", "2"))
	expectWake(t, ch, "enqueue with relay r1 idle")

	if err := b.Store.Busy(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	b.Enqueue(t, pgstoretest.Msg("Order", "3"))
	expectQuiet(t, ch, "enqueue after r1 became busy")

	if err := b.Store.Idle(ctx, "r2", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	b.Enqueue(t, pgstoretest.Msg("Order", "4"))
	expectQuiet(t, ch, "enqueue after r2's registration expired")
}

func expectWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
	case <-time.After(wakeWithin):
		t.Fatalf("%s: no wake-up within %v", what, wakeWithin)
	}
}

func expectQuiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: unexpected wake-up", what)
	case <-time.After(quietFor):
	}
}

func TestNotifications_WakeOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	ch, _ := listen(t, b.Store)

	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := b.Store.Enqueue(ctx, tx, pgstoretest.Msg("Order", "1")); err != nil {
		t.Fatal(err)
	}
	expectQuiet(t, ch, "before commit")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expectWake(t, ch, "after commit")
}

func TestNotifications_RolledBackEnqueueDoesNotWake(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	ch, _ := listen(t, b.Store)
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Store.Enqueue(ctx, tx, pgstoretest.Msg("Order", "1")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	expectQuiet(t, ch, "after rollback")
}

func TestNotifications_OtherSchemaDoesNotWake(t *testing.T) {
	t.Parallel()
	b, other := setup(t), setup(t)
	ch, _ := listen(t, b.Store)
	other.Enqueue(t, pgstoretest.Msg("Order", "1"))
	expectQuiet(t, ch, "enqueue in another schema")
	b.Enqueue(t, pgstoretest.Msg("Order", "1"))
	expectWake(t, ch, "enqueue in own schema")
}

func TestNotifications_ChannelClosesWhenContextDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ch, cancel := listen(t, b.Store)
	cancel()
	deadline := time.After(wakeWithin)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed after cancel")
		}
	}
}

// listenerPID finds the backend of the store's listening connection.
func (b *bundle) listenerPID(t *testing.T) int32 {
	t.Helper()
	var pid int32
	err := b.Pool.QueryRow(pgstoretest.Context(t),
		"SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query = $2",
		pgstore.ListenApplicationName, "LISTEN "+pgx.Identifier{pgstore.ChannelName(b.Schema)}.Sanitize(),
	).Scan(&pid)
	if err != nil {
		t.Fatalf("find listening backend: %v", err)
	}
	return pid
}

func TestNotifications_SurviveTerminatedConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	ch, _ := listen(t, b.Store)
	old := b.listenerPID(t)
	var ok bool
	if err := b.Pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", old).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend = %v, %v", ok, err)
	}
	// After reconnecting, the store sends one wake-up for what it may have
	// missed; by then it listens again.
	expectWake(t, ch, "after reconnect")
	if pid := b.listenerPID(t); pid == old {
		t.Fatalf("listening backend is still %d", pid)
	}
	b.Enqueue(t, pgstoretest.Msg("Order", "1"))
	expectWake(t, ch, "enqueue after reconnect")
}

func TestNotifications_ReturnsErrorWhenDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	ctx := pgstoretest.Context(t)
	// Nothing listens on port 1; the pool does not connect until used.
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/test?connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := s.Notifications(ctx); err == nil || ch != nil {
		t.Errorf("Notifications = %v, %v; want an error", ch, err)
	}
}
