package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A transaction that enqueued first but commits last is not skipped: its
// message goes out once it commits. Meanwhile other aggregates flow, and
// within the aggregate the relay follows the documented rule (enqueue order
// among the messages visible when it claims): the message committed first
// went out first.
func TestRelay_LateCommitIsNotSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &fakeSink{}
	startRelay(t, fastConfig(b, s))
	ctx := context.Background()

	late := msg("X", 1)
	late.ID = uuid.Must(uuid.NewV7())
	lateTx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lateTx.Rollback(ctx)
	if err := b.store.Enqueue(ctx, lateTx, late); err != nil {
		t.Fatal(err)
	}

	early := msg("X", 2)
	early.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, early)
	eventually(t, 5*time.Second, "the message committed first is sent", func() bool {
		return b.get(t, early.ID).Status == outbox.StatusSent
	})
	// Many poll intervals with the late transaction open: other aggregates
	// keep flowing.
	for i := range 5 {
		other := msg(fmt.Sprintf("Y-%d", i), 1)
		other.ID = uuid.Must(uuid.NewV7())
		b.enqueue(t, other)
		eventually(t, 5*time.Second, "other aggregate sent while a transaction is open", func() bool {
			return b.get(t, other.ID).Status == outbox.StatusSent
		})
	}
	if err := lateTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the late-committed message is sent", func() bool {
		return b.get(t, late.ID).Status == outbox.StatusSent
	})
	_, published := s.snapshot()
	var order []uuid.UUID
	for _, rec := range published {
		if rec.AggregateID == "X" {
			order = append(order, rec.ID)
		}
	}
	if len(order) != 2 || order[0] != early.ID || order[1] != late.ID {
		t.Fatalf("aggregate X published as %v; want [%s (committed first) %s (committed late)]", order, early.ID, late.ID)
	}
}

// An idle transaction holding an xid (what stalls snapshot-xmin based
// relays) does not stall anything.
func TestRelay_IdleTransactionDoesNotStall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &fakeSink{}
	cfg := fastConfig(b, s)
	startRelay(t, cfg)
	ctx := context.Background()
	idle, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Rollback(ctx)
	if _, err := idle.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for i := range 50 {
		m := msg(fmt.Sprintf("I-%d", i%7), i)
		m.ID = uuid.Must(uuid.NewV7())
		ids = append(ids, m.ID)
		b.enqueue(t, m)
	}
	eventually(t, 10*time.Second, "all messages sent while an idle transaction is open", func() bool {
		for _, id := range ids {
			if b.get(t, id).Status != outbox.StatusSent {
				return false
			}
		}
		return true
	})
}

// Killing the relay's database connections (pg_terminate_backend) in the
// middle of the work: the relay reconnects by itself and delivers
// everything.
func TestRelay_RecoversFromKilledDatabaseConnections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	appName := "relay-" + uuid.NewString()[:8]
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	relayPool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relayPool.Close)
	relayStore, err := pgstore.New(relayPool, pgstore.Config{Schema: b.schema})
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeSink{}
	rcfg := fastConfig(b, s)
	rcfg.Store = relayStore
	rcfg.BatchSize = 10
	startRelay(t, rcfg)

	ctx := context.Background()
	var ids []uuid.UUID
	killed := int64(0)
	for round := range 10 {
		var batch []outbox.Message
		for i := range 50 {
			m := msg(fmt.Sprintf("K-%d", i), round)
			m.ID = uuid.Must(uuid.NewV7())
			ids = append(ids, m.ID)
			batch = append(batch, m)
		}
		b.enqueue(t, batch...)
		var n int64
		err := b.pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) k", appName).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		killed += n
		time.Sleep(30 * time.Millisecond)
	}
	if killed == 0 {
		t.Fatal("no relay connection was killed; the test proves nothing")
	}
	eventually(t, 30*time.Second, "every message SENT after connections were killed", func() bool {
		var unsent int
		if err := b.pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.outbox_messages WHERE status <> 'SENT'", pgx.Identifier{b.schema}.Sanitize())).Scan(&unsent); err != nil {
			t.Fatal(err)
		}
		return unsent == 0
	})
	_, published := s.snapshot()
	seen := map[uuid.UUID]bool{}
	for _, rec := range published {
		seen[rec.ID] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("message %s SENT but never published", id)
		}
	}
	t.Logf("killed %d connections; %d publishes for %d messages", killed, len(published), len(ids))
}
