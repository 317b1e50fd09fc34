package modes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/modes"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func newStore(t *testing.T) (*pgxpool.Pool, *pgstore.Store) {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema, LeaderLease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool, st
}

func enqueue(t testing.TB, pool *pgxpool.Pool, st *pgstore.Store, agg string, n int) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"n": n})
	m := outbox.Message{AggregateType: "Order", AggregateID: agg, EventType: "OrderPlaced", Payload: payload}
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, m) }); err != nil {
		t.Errorf("enqueue: %v", err)
	}
}

// sink records what it published.
type sink struct {
	mu  sync.Mutex
	got []outbox.Record
}

func (s *sink) Publish(_ context.Context, recs []outbox.Record) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, recs...)
	return make([]error, len(recs))
}

func (s *sink) Close() error { return nil }

func (s *sink) published() []outbox.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]outbox.Record(nil), s.got...)
}

// inOrder checks that each aggregate's messages were published in seq
// order, each at least once, and returns how many distinct ones were.
func inOrder(t *testing.T, recs []outbox.Record) int {
	t.Helper()
	last := map[string]int64{}
	seen := map[int64]bool{}
	for _, r := range recs {
		if r.Seq < last[r.AggregateID] {
			t.Errorf("aggregate %s: seq %d published after %d", r.AggregateID, r.Seq, last[r.AggregateID])
		}
		last[r.AggregateID] = max(last[r.AggregateID], r.Seq)
		seen[r.Seq] = true
	}
	return len(seen)
}

func startRelay(t *testing.T, strat *modes.Strategy, s *sink) {
	t.Helper()
	r, err := relay.New(relay.Config{Strategy: strat, Sink: s, PollInterval: 20 * time.Millisecond, Lease: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
}

// A relay follows "outbox mode set cursor" while messages are being
// enqueued and published: every message is published, in order per
// aggregate, and the relay then runs the cursor strategy.
func TestStrategy_FollowsASwitchToCursorWithMessagesInFlight(t *testing.T) {
	pool, st := newStore(t)
	strat := modes.New(st, nil)
	s := &sink{}
	startRelay(t, strat, s)

	const perAgg, aggs = 60, 6
	var writers sync.WaitGroup
	for a := range aggs {
		writers.Go(func() {
			for n := range perAgg {
				enqueue(t, pool, st, fmt.Sprintf("agg-%d", a), n)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := st.SetMode(context.Background(), pgstore.ModeCursor, "test"); err != nil {
		t.Fatalf("switch to cursor mode: %v", err)
	}
	writers.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for inOrder(t, s.published()) < perAgg*aggs {
		if time.Now().After(deadline) {
			t.Fatalf("published %d of %d messages", inOrder(t, s.published()), perAgg*aggs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := strat.Mode(); got != pgstore.ModeCursor {
		t.Errorf("the strategy runs %q after the switch, want cursor", got)
	}
}

// A batch claimed before the switch is marked through the claim strategy
// that claimed it: its message becomes SENT.
func TestStrategy_MarksAClaimFromBeforeTheSwitchWhereItWasMade(t *testing.T) {
	pool, st := newStore(t)
	enqueue(t, pool, st, "a", 1)
	strat := modes.New(st, nil)
	ctx := context.Background()
	c, err := strat.Claim(ctx, store.ClaimParams{Owner: "t", Limit: 10, Lease: 10 * time.Second})
	if err != nil || len(c.Records) != 1 {
		t.Fatalf("claim: %v, %d records", err, len(c.Records))
	}
	if _, err := st.SetMode(ctx, pgstore.ModeCursor, "test"); err != nil {
		t.Fatalf("switch to cursor mode: %v", err)
	}
	n, _, err := strat.MarkSent(ctx, c.Token, []int64{c.Records[0].Seq}, nil)
	if err != nil || n != 1 {
		t.Fatalf("mark sent after the switch: %d marked, %v; want 1", n, err)
	}
	rec, err := st.Get(ctx, c.Records[0].ID)
	if err != nil || rec.Status != outbox.StatusSent {
		t.Fatalf("message after the mark: %v, %v; want SENT", rec.Status, err)
	}
}

// An outbox in CDC mode is not this strategy's: its claims fail with
// ErrCDCMode, which says what to run.
func TestStrategy_RefusesAnOutboxInCDCMode(t *testing.T) {
	pool, st := newStore(t)
	enqueue(t, pool, st, "a", 1)
	ctx := context.Background()
	if _, err := st.SetMode(ctx, pgstore.ModeCDC, "test"); err != nil {
		t.Fatalf("switch to CDC mode: %v", err)
	}
	c, err := modes.New(st, nil).Claim(ctx, store.ClaimParams{Owner: "t", Limit: 10, Lease: 10 * time.Second})
	if !errors.Is(err, modes.ErrCDCMode) || len(c.Records) != 0 {
		t.Fatalf("claim in CDC mode: %d records, %v; want none and ErrCDCMode", len(c.Records), err)
	}
}
