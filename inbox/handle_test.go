package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// waitForInsertWaiters waits until n backends are blocked on a lock while
// inserting into the schema's inbox_processed: n deliveries of the message
// wait for the transaction that recorded it first.
func waitForInsertWaiters(ctx context.Context, observer interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		var waiting int
		err := observer.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%inbox_processed%'`, schema).Scan(&waiting)
		if err != nil {
			return fmt.Errorf("count lock waiters: %w", err)
		}
		if waiting >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d deliveries waiting on the lock, want %d: %w", waiting, n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestHandle_BackendKilledBeforeCommit_LeavesNeitherEffectNorMark(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	admin := pgtest.Pool(t, b.schema)
	_, err := b.inbox.Handle(ctx, "billing", m, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := b.applyEffect(ctx, tx, m); err != nil {
			return err
		}
		var pid int
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			return err
		}
		// Kill the handler's connection and wait until it is gone; the
		// handler then returns nil as if all went well.
		var ok bool
		if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", pid).Scan(&ok); err != nil || !ok {
			return fmt.Errorf("pg_terminate_backend = %v, %v", ok, err)
		}
		return nil
	})
	if err == nil {
		t.Fatal("Handle succeeded although its connection was killed before the commit")
	}
	if n := b.effects(t, m.ID); n != 0 {
		t.Errorf("%d effects, want 0", n)
	}
	if b.marked(t, "billing", m.ID) {
		t.Error("message recorded as processed although its transaction died")
	}
	if res, err := b.inbox.Handle(ctx, "billing", m, b.applyEffect); err != nil || res != inbox.Processed {
		t.Fatalf("Handle after the crash = %v, %v; want processed", res, err)
	}
}

func TestResult_String(t *testing.T) {
	t.Parallel()
	for r, want := range map[inbox.Result]string{inbox.Processed: "processed", inbox.Duplicate: "duplicate", 0: "Result(0)"} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d).String() = %q, want %q", int(r), got, want)
		}
	}
}
