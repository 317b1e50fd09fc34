package modes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// refusing is a strategy whose outbox left its mode: every claim, and
// every mark that claims the next batch, is refused.
type refusing struct {
	mu    sync.Mutex
	marks int
}

func (r *refusing) Claim(context.Context, store.ClaimParams) (store.Claim, error) {
	return store.Claim{}, fmt.Errorf("refusing: %w", pgstore.ErrNotCursorMode)
}

func (r *refusing) MarkSent(_ context.Context, _ uuid.UUID, seqs []int64, next *strategy.Next) (int64, *store.Claim, error) {
	if next != nil {
		return 0, nil, fmt.Errorf("refusing: %w", pgstore.ErrNotCursorMode)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks++
	return int64(len(seqs)), nil, nil
}

func (r *refusing) MarkFailed(context.Context, uuid.UUID, []store.Failure) (int64, error) {
	return 0, nil
}
func (r *refusing) Release(context.Context, uuid.UUID, []int64) (int64, error) { return 0, nil }
func (r *refusing) Wakeups() store.Notifier                                    { return nil }
func (r *refusing) Close(context.Context) error                                { return nil }

func cdcStore(t *testing.T) *pgstore.Store {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetMode(ctx, pgstore.ModeCDC, "test"); err != nil {
		t.Fatal(err)
	}
	return st
}

// Workers whose strategy refuses at once, on an outbox that went to CDC
// mode, each get ErrCDCMode: none is handed a strategy that is not there.
func TestFollow_ConcurrentWorkersIntoCDCModeEachGetErrCDCMode(t *testing.T) {
	s := New(cdcStore(t), nil)
	old := &refusing{}
	s.current, s.mode = old, pgstore.ModeCursor
	p := store.ClaimParams{Owner: "t", Limit: 1, Lease: time.Second}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.Claim(context.Background(), p) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrCDCMode) {
			t.Errorf("worker %d: %v; want ErrCDCMode", i, err)
		}
	}
	if m := s.Mode(); m != "" {
		t.Errorf("Mode() = %q in CDC mode; want none", m)
	}
}

// A mark that was to claim the next batch too, refused because the
// outbox switched, is marked alone at once: it neither fails nor waits
// for the relay's retry.
func TestMarkSent_RefusedNextClaimMarksAloneAtOnce(t *testing.T) {
	s := New(cdcStore(t), nil)
	old := &refusing{}
	s.current, s.mode = old, pgstore.ModeCursor
	next := &strategy.Next{Params: store.ClaimParams{Owner: "t", Limit: 1, Lease: time.Second}, Linger: func() bool { return true }}
	n, c, err := s.MarkSent(context.Background(), uuid.New(), []int64{1, 2}, next)
	if err != nil || n != 2 || c != nil || old.marks != 1 {
		t.Fatalf("MarkSent = %d, %v, %v with %d marks alone; want 2 marked alone, no claim", n, c, err, old.marks)
	}
}

// After Close, claims fail with ErrClosed and start nothing.
func TestClose_LaterClaimsFail(t *testing.T) {
	s := New(cdcStore(t), nil)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := s.Claim(context.Background(), store.ClaimParams{Owner: "t", Limit: 1, Lease: time.Second})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("claim after Close: %v; want ErrClosed", err)
	}
}
