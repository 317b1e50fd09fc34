package pgstore_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// enqueueRoundRobin enqueues n messages over the aggregates ids of type
// Order, one after the other, in one transaction.
func (b *bundle) enqueueRoundRobin(t *testing.T, n int, ids ...string) {
	t.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = pgstoretest.Msg("Order", ids[i%len(ids)])
	}
	if err := pgx.BeginFunc(pgstoretest.Context(t), b.Pool, func(tx pgx.Tx) error { return b.Store.Enqueue(pgstoretest.Context(t), tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
}

// blockHead makes the head of aggregate Order/id a FAILED message that is
// not due for an hour, as after a failed publish.
func (b *bundle) blockHead(t *testing.T, id string) {
	t.Helper()
	b.Exec(t, `UPDATE {{schema}}.outbox_messages SET status = 'FAILED', attempts = 1,
	               next_attempt_at = now() + interval '1 hour'
	           WHERE seq = (SELECT min(seq) FROM {{schema}}.outbox_messages
	                        WHERE aggregate_type = 'Order' AND aggregate_id = $1)`, id)
}

// The claim's work does not grow with the backlog of a few aggregates: the
// scan of outbox_messages_due reads at most a span of entries past the first
// due message, where the unbounded scan read every message behind the
// aggregates' heads (20,000 messages over 10 aggregates: 23 messages/s).
func TestClaim_ScanOfTheDueIndexIsBoundedBehindHotAggregates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit = 100
	span := pgstore.ClaimSpan(limit)
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprint("hot-", i)
	}
	b.enqueueRoundRobin(t, 5000, ids...)
	b.Exec(t, "ANALYZE {{schema}}.outbox_messages")

	ctx := pgstoretest.Context(t)
	tx := b.genericClaim(t, "hot_claim")
	var plan []struct{ Plan planNode }
	var raw []byte
	err := tx.QueryRow(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE hot_claim(%d, 'explain', '%s', 60000, 0, %d, '', '')",
		limit, uuid.New(), span)).Scan(&raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("plan %s: %v", raw, err)
	}
	var read float64
	plan[0].Plan.walk(func(n planNode) {
		if n.IndexName == "outbox_messages_due" {
			t.Logf("%s on %s: %v rows, %v removed, %v loops", n.NodeType, n.IndexName, n.ActualRows, n.RowsRemovedByFilter, n.ActualLoops)
			read += (n.ActualRows + n.RowsRemovedByFilter) * n.ActualLoops
		}
	})
	claimed := plan[0].Plan.ActualRows
	if claimed != float64(len(ids)) {
		t.Errorf("claimed %v messages, want the %d heads", claimed, len(ids))
	}
	// The span itself, the first due message and the check for anything
	// due beyond the span.
	if read > float64(span)+2 {
		t.Errorf("the claim read %v entries of outbox_messages_due for %d heads, want at most the span %d and 2", read, len(ids), span)
	}
	t.Logf("read %v entries of outbox_messages_due", read)
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	NodeType            string     `json:"Node Type"`
	IndexName           string     `json:"Index Name"`
	ActualRows          float64    `json:"Actual Rows"`
	ActualLoops         float64    `json:"Actual Loops"`
	RowsRemovedByFilter float64    `json:"Rows Removed by Filter"`
	Plans               []planNode `json:"Plans"`
}

func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}

// When the claims find their heads by aggregate, successive claims go
// round all aggregates: each starts after the last aggregate the previous
// one served, and wraps around at the last, instead of serving the first
// aggregates in key order again as soon as their next messages are due.
// The conformance suite checks this with Claim and MarkSent; this is the
// relay's round trip, MarkSentAndClaim, which keeps the rotation too.
func TestClaim_ClaimsByAggregateGoRoundTheAggregates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit = 5
	span := int(pgstore.ClaimSpan(limit))
	// A blocked aggregate whose backlog fills the span, then 30 aggregates
	// with 4 messages each.
	b.enqueueRoundRobin(t, 2*span, "blocked")
	b.blockHead(t, "blocked")
	ids := make([]string, 30)
	for i := range ids {
		ids[i] = fmt.Sprintf("agg-%02d", i)
	}
	b.enqueueRoundRobin(t, 4*len(ids), ids...)

	ctx := pgstoretest.Context(t)
	p := store.ClaimParams{Owner: "relay-" + t.Name(), Limit: limit, Lease: time.Minute}
	served := map[string]int{}
	c, err := b.Store.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	// Twelve claims of five can serve each of the 30 aggregates twice.
	const rounds = 2
	for range rounds * len(ids) / limit {
		seqs := make([]int64, 0, len(c.Records))
		for _, r := range c.Records {
			served[r.AggregateID]++
			seqs = append(seqs, r.Seq)
		}
		if _, c, err = b.Store.MarkSentAndClaim(ctx, c.Token, seqs, p); err != nil {
			t.Fatal(err)
		}
	}
	if len(served) != len(ids) {
		t.Errorf("claims of %d served %d aggregates, want all %d: %v", limit, len(served), len(ids), served)
	}
	for id, n := range served {
		if n != rounds {
			t.Errorf("aggregate %s served %d times in %d rounds", id, n, rounds)
		}
	}
}

// Relays that claim at the same time, with the heads beyond the span so
// that the scan by aggregate finds them, still hold at most one message of
// an aggregate at a time, take each aggregate's messages in seq order, and
// never take one twice.
func TestClaim_ConcurrentClaimsByAggregateKeepTheAggregatesOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit, relays, per = 5, 4, 5
	span := int(pgstore.ClaimSpan(limit))
	b.enqueueRoundRobin(t, 2*span, "blocked")
	b.blockHead(t, "blocked")
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = fmt.Sprintf("agg-%02d", i)
	}
	b.enqueueRoundRobin(t, per*len(ids), ids...)

	ctx := pgstoretest.Context(t)
	var (
		mu       sync.Mutex
		inFlight = map[string]int64{} // aggregate -> seq held by a claim
		last     = map[string]int64{} // aggregate -> last seq claimed
		claimed  = map[int64]bool{}
		done     atomic.Int64
		errs     []string
	)
	want := int64(per * len(ids))
	var wg sync.WaitGroup
	for i := range relays {
		s, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema})
		if err != nil {
			t.Fatal(err)
		}
		p := store.ClaimParams{Owner: fmt.Sprint("relay-", i), Limit: limit, Lease: time.Minute}
		wg.Go(func() {
			deadline := time.Now().Add(20 * time.Second)
			for done.Load() < want && time.Now().Before(deadline) {
				c, err := s.Claim(ctx, p)
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					return
				}
				mu.Lock()
				for _, r := range c.Records {
					k := r.AggregateID
					switch {
					case claimed[r.Seq]:
						errs = append(errs, fmt.Sprintf("seq %d claimed twice", r.Seq))
					case inFlight[k] != 0:
						errs = append(errs, fmt.Sprintf("%s: seq %d claimed while %d is held", k, r.Seq, inFlight[k]))
					case r.Seq < last[k]:
						errs = append(errs, fmt.Sprintf("%s: seq %d claimed after %d", k, r.Seq, last[k]))
					}
					claimed[r.Seq], inFlight[k], last[k] = true, r.Seq, r.Seq
				}
				// Released before the mark commits: a later message of the
				// aggregate is claimable only after that.
				for _, r := range c.Records {
					delete(inFlight, r.AggregateID)
				}
				mu.Unlock()
				if len(c.Records) == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				n, err := s.MarkSent(ctx, c.Token, pgstoretest.Seqs(c.Records))
				if err != nil || n != int64(len(c.Records)) {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("MarkSent = %d, %v", n, err))
					mu.Unlock()
					return
				}
				done.Add(n)
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if got := done.Load(); got != want {
		t.Errorf("%d relays sent %d of %d messages", relays, got, want)
	}
}
