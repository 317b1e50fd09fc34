package pgmigrate_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/migrate"
	"github.com/outbox-dev/outbox/internal/migrate/pgmigrate"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// Locked runs one fn at a time per key, across pools: a second caller
// waits until the first one's transaction ends, and sees its work.
func TestLocked_SerialisesCallersOfOneKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	pool, schema := pgtest.Schema(t)
	other := pgtest.Pool(t, schema)
	if _, err := pool.Exec(ctx, "CREATE TABLE n (v int)"); err != nil {
		t.Fatal(err)
	}
	key := migrate.LockKey("outbox.test.locked:" + schema)
	var inside, most atomic.Int32
	run := func(p *pgxpool.Pool) error {
		return pgmigrate.Locked(ctx, p, key, func(tx pgx.Tx) error {
			n := inside.Add(1)
			defer inside.Add(-1)
			if n > most.Load() {
				most.Store(n)
			}
			// Each caller counts the rows, then adds one: callers that
			// overlapped would count alike.
			var c int32
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM n").Scan(&c); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
			_, err := tx.Exec(ctx, "INSERT INTO n VALUES ($1)", c)
			return err
		})
	}
	var wg sync.WaitGroup
	for _, p := range []*pgxpool.Pool{pool, other, pool, other} {
		wg.Go(func() {
			if err := run(p); err != nil {
				t.Errorf("Locked: %v", err)
			}
		})
	}
	wg.Wait()
	rows, err := pool.Query(ctx, "SELECT v FROM n ORDER BY v")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || !slices.Equal(got, []int32{0, 1, 2, 3}) || most.Load() != 1 {
		t.Errorf("callers counted %v (%v), at most %d inside at once; want 0, 1, 2, 3 and one at a time", got, err, most.Load())
	}
	boom := errors.New("boom")
	if err := pgmigrate.Locked(ctx, pool, key, func(pgx.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Locked = %v, want fn's error", err)
	}
}
