package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

func TestHandle_FirstDeliveryIsProcessed_SecondIsDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	var runs int
	fn := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		runs++
		return b.applyEffect(ctx, tx, m)
	}
	if res, err := b.inbox.Handle(ctx, "billing", m, fn); err != nil || res != inbox.Processed {
		t.Fatalf("first Handle = %v, %v; want processed", res, err)
	}
	if res, err := b.inbox.Handle(ctx, "billing", m, fn); err != nil || res != inbox.Duplicate {
		t.Fatalf("second Handle = %v, %v; want duplicate", res, err)
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1 (not at all for the duplicate)", runs)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	if !b.marked(t, "billing", m.ID) {
		t.Error("message not recorded as processed")
	}
}

func TestHandle_ConcurrentDuplicateDelivery_HasExactlyOneEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	const deliveries = 6
	m := msg()
	observer := pgtest.Pool(t, b.schema)
	var calls atomic.Int32
	fn := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		calls.Add(1)
		if err := b.applyEffect(ctx, tx, m); err != nil {
			return err
		}
		// Hold the transaction open until every other delivery is blocked
		// on our uncommitted record, so that they really overlap.
		return waitForInsertWaiters(ctx, observer, b.schema, deliveries-1)
	}
	results, errs := handleConcurrently(ctx, b.inbox, "billing", m, fn, deliveries)
	for _, err := range errs {
		if err != nil {
			t.Errorf("Handle: %v", err)
		}
	}
	if got := countResults(results); got[inbox.Processed] != 1 || got[inbox.Duplicate] != deliveries-1 {
		t.Errorf("results %v, want 1 processed and %d duplicates", got, deliveries-1)
	}
	if calls.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", calls.Load())
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Errorf("%d effects, want exactly 1", n)
	}
}

func TestHandle_ConcurrentDelivery_WhenTheFirstFails_AnotherAppliesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	const deliveries = 5
	m := msg()
	observer := pgtest.Pool(t, b.schema)
	boom := errors.New("boom")
	var calls atomic.Int32
	fn := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		call := calls.Add(1)
		if err := b.applyEffect(ctx, tx, m); err != nil {
			return err
		}
		// The first holder fails once all others wait on it; the next one
		// gets through and waits for the remaining ones before it commits.
		if err := waitForInsertWaiters(ctx, observer, b.schema, deliveries-int(call)); err != nil {
			return err
		}
		if call == 1 {
			return boom
		}
		return nil
	}
	results, errs := handleConcurrently(ctx, b.inbox, "billing", m, fn, deliveries)
	var failed int
	for _, err := range errs {
		if errors.Is(err, boom) {
			failed++
		} else if err != nil {
			t.Errorf("Handle: %v", err)
		}
	}
	if got := countResults(results); failed != 1 || got[inbox.Processed] != 1 || got[inbox.Duplicate] != deliveries-2 {
		t.Errorf("results %v with %d failed, want 1 failed, 1 processed, %d duplicates", got, failed, deliveries-2)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Errorf("%d effects, want exactly 1", n)
	}
}

// handleConcurrently starts n Handle calls of the same message at once.
func handleConcurrently(ctx context.Context, ib *inbox.Inbox, consumer string, m inbox.Message, fn inbox.HandlerFunc, n int) ([]inbox.Result, []error) {
	results, errs := make([]inbox.Result, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = ib.Handle(ctx, consumer, m, fn)
		})
	}
	close(start)
	wg.Wait()
	return results, errs
}

func countResults(rs []inbox.Result) map[inbox.Result]int {
	out := map[inbox.Result]int{}
	for _, r := range rs {
		out[r]++
	}
	return out
}

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

func TestHandle_HandlerFailsAfterItsEffect_LeavesNeitherEffectNorMark(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	boom := errors.New("boom")
	_, err := b.inbox.Handle(ctx, "billing", m, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := b.applyEffect(ctx, tx, m); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Handle error = %v, want it to wrap the handler's error", err)
	}
	if n := b.effects(t, m.ID); n != 0 {
		t.Errorf("%d effects after the failure, want 0", n)
	}
	if b.marked(t, "billing", m.ID) {
		t.Error("failed message recorded as processed")
	}

	// Delivered again, it is applied once.
	if res, err := b.inbox.Handle(ctx, "billing", m, b.applyEffect); err != nil || res != inbox.Processed {
		t.Fatalf("Handle after the failure = %v, %v; want processed", res, err)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Errorf("%d effects after the retry, want 1", n)
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

func TestHandle_UniqueViolationInTheHandler_IsAnErrorNotADuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.exec(t, "CREATE TABLE {{schema}}.invoices (order_id text PRIMARY KEY)")
	invoice := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		_, err := tx.Exec(ctx, b.sql("INSERT INTO {{schema}}.invoices (order_id) VALUES ($1)"), m.AggregateID)
		return err
	}
	first, second := msg(), msg() // two events of one order
	if res, err := b.inbox.Handle(ctx, "billing", first, invoice); err != nil || res != inbox.Processed {
		t.Fatalf("first Handle = %v, %v", res, err)
	}
	res, err := b.inbox.Handle(ctx, "billing", second, invoice)
	var pgErr *pgconn.PgError
	if res == inbox.Duplicate || !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("Handle = %v, %v; want the handler's unique violation as an error, not a duplicate", res, err)
	}
	if b.marked(t, "billing", second.ID) {
		t.Error("message whose handler failed recorded as processed")
	}
}

func TestHandle_EachConsumerProcessesAMessageOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	for _, consumer := range []string{"billing", "inventory-service", "billing"} {
		want := inbox.Processed
		if consumer == "billing" && b.marked(t, consumer, m.ID) {
			want = inbox.Duplicate
		}
		if res, err := b.inbox.Handle(ctx, consumer, m, b.applyEffect); err != nil || res != want {
			t.Errorf("Handle by %s = %v, %v; want %v", consumer, res, err, want)
		}
	}
	if n := b.effects(t, m.ID); n != 2 {
		t.Errorf("%d effects, want 2 (one per consumer)", n)
	}
}

func TestHandle_PermanentErrorStaysVisible(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.inbox.Handle(testCtx(t), "billing", msg(), func(context.Context, pgx.Tx, inbox.Message) error {
		return fmt.Errorf("unknown event version 7: %w", inbox.ErrPermanent)
	})
	if !errors.Is(err, inbox.ErrPermanent) {
		t.Errorf("Handle error = %v, want it to wrap ErrPermanent", err)
	}
}

func TestHandle_RejectsWhatItCannotDeduplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	noID := msg()
	noID.ID = uuid.Nil
	if _, err := b.inbox.Handle(ctx, "billing", noID, b.applyEffect); !errors.Is(err, inbox.ErrMalformed) {
		t.Errorf("Handle(message without id) error = %v, want ErrMalformed", err)
	}
	if _, err := b.inbox.Handle(ctx, "", msg(), b.applyEffect); err == nil {
		t.Error("Handle with an empty consumer name succeeded")
	}
	if _, err := b.inbox.Handle(ctx, "billing", msg(), nil); err == nil {
		t.Error("Handle with a nil handler succeeded")
	}
	if n := b.count(t, "SELECT count(*) FROM {{schema}}.inbox_processed"); n != 0 {
		t.Errorf("%d messages recorded, want 0", n)
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
