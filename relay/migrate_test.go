package relay_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A relay started before the outbox tables exist loses nothing and needs
// no restart: it logs the missing tables with the fix once, not at every
// retry, and once Migrate has run it says so and publishes.
func TestRelay_UnmigratedSchema_LogsTheFixOnceAndGoesOnAfterMigrate(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	q := &countingQueue{Queue: st}
	logs := &lockedBuffer{}
	snk := &fakeSink{}
	startRelay(t, relay.Config{Store: q, Sink: snk, Workers: 3, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})

	eventually(t, 20*time.Second, "six claims failing for the missing tables", func() bool { return q.notMigrated.Load() >= 6 })
	const missing = "outbox tables missing"
	if n := strings.Count(logs.String(), missing); n != 1 {
		t.Fatalf("%q logged %d times over %d failed claims, want once:\n%s", missing, n, q.notMigrated.Load(), logs)
	}
	fix := `no outbox tables in schema \"` + schema + `\": run 'outbox migrate --schema ` + schema + `'`
	if !strings.Contains(logs.String(), fix) {
		t.Errorf("the log does not say %s:\n%s", fix, logs)
	}

	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := &bundle{pool: pool, store: st, schema: schema}
	b.enqueue(t, msg("1", 1))
	eventually(t, 20*time.Second, "the message published after Migrate", func() bool {
		_, published := snk.snapshot()
		return len(published) == 1
	})
	if n := strings.Count(logs.String(), "outbox tables found; the relay goes on"); n != 1 {
		t.Errorf("the recovery is logged %d times, want once:\n%s", n, logs)
	}
}

// countingQueue counts the claims that failed for missing tables.
type countingQueue struct {
	store.Queue
	notMigrated atomic.Int64
}

func (q *countingQueue) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	c, err := q.Queue.Claim(ctx, p)
	if errors.Is(err, store.ErrNotMigrated) {
		q.notMigrated.Add(1)
	}
	return c, err
}

// lockedBuffer is a bytes.Buffer that a logger writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
