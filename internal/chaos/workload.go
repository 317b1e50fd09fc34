package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
)

// probers is the number of goroutines enqueueing directly.
const probers = 2

// rejectMarker starts the customer id of every request that must be
// rejected: no order and no event may ever carry it.
const rejectMarker = "REJECT-"

// orderPool holds the ids of placed orders; the most recent are the hot ones.
type orderPool struct {
	mu  sync.Mutex
	ids []string
}

func (p *orderPool) add(id string) {
	p.mu.Lock()
	p.ids = append(p.ids, id)
	p.mu.Unlock()
}

// pick returns an order: usually one of the hot most recent ones, so that
// clients race on them; otherwise any.
func (p *orderPool) pick(rng *rand.Rand, hot int) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.ids)
	if n == 0 {
		return "", false
	}
	if rng.Float64() < 0.7 {
		return p.ids[n-1-rng.IntN(min(n, hot))], true
	}
	return p.ids[rng.IntN(n)], true
}

// startWorkload starts the HTTP clients and the probers; they stop when
// ctx is done.
func (h *harness) startWorkload(ctx context.Context, wg *sync.WaitGroup) {
	pool := &orderPool{}
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range h.cfg.Clients {
		rng := rand.New(rand.NewPCG(uint64(h.seed), uint64(1000+i)))
		wg.Go(func() { h.httpClient(ctx, i, rng, client, pool) })
	}
	for i := range probers {
		rng := rand.New(rand.NewPCG(uint64(h.seed), uint64(2000+i)))
		wg.Go(func() { h.prober(ctx, i, rng) })
	}
}

// httpClient places, pays, ships and cancels orders, and sends invalid
// and oversized requests, until ctx is done.
func (h *harness) httpClient(ctx context.Context, id int, rng *rand.Rand, client *http.Client, pool *orderPool) {
	for n := 0; ctx.Err() == nil; n++ {
		base := h.ordersURLs[rng.IntN(len(h.ordersURLs))]
		r := rng.Float64()
		switch {
		case r < 0.45:
			body := fmt.Sprintf(`{"customerId":"C-%d","amount":"%d.%02d","currency":"EUR","items":[{"sku":"BOOK-1","quantity":%d},{"sku":"MUG-1","quantity":1}]}`,
				rng.IntN(100), 1+rng.IntN(500), rng.IntN(100), 1+rng.IntN(3))
			key := fmt.Sprintf("chaos-%d-%d-%d", h.seed, id, n)
			retry := rng.Float64() < 0.1
			status, o, err := h.post(ctx, client, base+"/orders", body, key)
			q := Request{Kind: "place", Outcome: outcome(status, err, http.StatusCreated)}
			if q.Outcome == OutcomeOK {
				q.AggregateID, q.Version = o.ID, o.Version
				pool.add(o.ID)
			}
			h.record(q)
			if q.Outcome == OutcomeOK && retry { // the client retries: the same order must come back
				status, again, err := h.post(ctx, client, h.ordersURLs[rng.IntN(len(h.ordersURLs))]+"/orders", body, key)
				if err == nil && status == http.StatusCreated && again.ID != o.ID {
					h.record(Request{Kind: "retry", Outcome: OutcomeOK, AggregateID: again.ID, Marker: "idempotency key " + key + " gave a second order " + again.ID})
				}
			}
		case r < 0.85:
			orderID, ok := pool.pick(rng, 2*h.cfg.HotAggregates)
			if !ok {
				continue
			}
			step := []string{"pay", "pay", "ship", "cancel"}[rng.IntN(4)]
			status, o, err := h.post(ctx, client, base+"/orders/"+orderID+"/"+step, "", "")
			q := Request{Kind: step, Outcome: outcome(status, err, http.StatusOK), AggregateID: orderID}
			if q.Outcome == OutcomeOK {
				q.Version = o.Version
			}
			h.record(q)
		case r < 0.97:
			marker := fmt.Sprintf("%s%d-%d", rejectMarker, id, n)
			bodies := []string{
				fmt.Sprintf(`{"customerId":%q,"amount":"-5.00","currency":"EUR","items":[{"sku":"BOOK-1","quantity":1}]}`, marker),
				fmt.Sprintf(`{"customerId":%q,"amount":"10.00","currency":"EUR","items":[{"sku":"BOOK-1","quantity":0}]}`, marker),
				fmt.Sprintf(`{"customerId":%q,"amount":"0","currency":"EUR"}`, marker),
			}
			status, _, err := h.post(ctx, client, base+"/orders", bodies[rng.IntN(len(bodies))], "")
			h.record(Request{Kind: "invalid", Outcome: outcome(status, err, http.StatusBadRequest, http.StatusUnprocessableEntity), Marker: marker})
		default: // an oversized request body
			marker := fmt.Sprintf("%s%d-%d", rejectMarker, id, n)
			body := fmt.Sprintf(`{"customerId":%q,"amount":"10.00","currency":"EUR","note":%q}`, marker, strings.Repeat("x", 200<<10))
			status, _, err := h.post(ctx, client, base+"/orders", body, "")
			h.record(Request{Kind: "oversized", Outcome: outcome(status, err, http.StatusRequestEntityTooLarge), Marker: marker})
		}
		sleep(ctx, arrival(rng, h.cfg.Rate/float64(h.cfg.Clients)))
	}
}

// arrival is the wait before the next request of a Poisson process of
// rate per second.
func arrival(rng *rand.Rand, rate float64) time.Duration {
	return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
}

// outcome classifies an HTTP answer: the wanted status is ok (or, for a
// request that must be refused, rejected); another 4xx is rejected; no
// answer or a 5xx is indeterminate.
func outcome(status int, err error, want ...int) string {
	if err != nil || status >= 500 || status == 0 {
		return OutcomeIndeterminate
	}
	for _, w := range want {
		if status == w {
			if w >= 400 {
				return OutcomeRejected
			}
			return OutcomeOK
		}
	}
	if status >= 400 {
		return OutcomeRejected
	}
	return OutcomeOK // an unexpected 2xx: the checker's marker check decides
}

type orderJSON struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

func (h *harness) post(ctx context.Context, client *http.Client, url, body, key string) (int, orderJSON, error) {
	var o orderJSON
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return 0, o, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, o, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, o, err
	}
	if resp.StatusCode < 300 {
		if err := json.Unmarshal(data, &o); err != nil || o.ID == "" {
			return 0, o, fmt.Errorf("undecodable answer %q: %v", data, err)
		}
	}
	return resp.StatusCode, o, nil
}

// prober enqueues events directly on a few hot aggregates (and fresh cold
// ones), each transaction holding the aggregate's advisory lock so that
// enqueue order is commit order; one in ten is rolled back on purpose.
func (h *harness) prober(ctx context.Context, id int, rng *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		agg := fmt.Sprintf("hot-%d", rng.IntN(h.cfg.HotAggregates))
		if rng.Float64() < 0.2 {
			agg = fmt.Sprintf("cold-%d-%d", id, n)
		}
		rollback := rng.Float64() < 0.1
		msg := outbox.Message{ID: uuid.Must(uuid.NewV7()), AggregateType: "ChaosProbe", AggregateID: agg,
			EventType: "Probe", Topic: topicProbe, Payload: fmt.Appendf(nil, `{"prober":%d,"n":%d}`, id, n)}
		err := h.enqueue(ctx, msg, 0, rollback)
		q := Request{Kind: "probe", AggregateID: agg, EventID: msg.ID.String(), Outcome: OutcomeOK}
		switch {
		case rollback && err == nil:
			q.Outcome = OutcomeRejected
		case err != nil:
			q.Outcome = OutcomeIndeterminate
		}
		h.record(q)
		sleep(ctx, arrival(rng, h.cfg.ProbeRate/probers))
	}
}

// errRollback makes enqueue roll back on purpose.
var errRollback = fmt.Errorf("chaos: rolled back on purpose")

// enqueue writes msg in a transaction of its own that holds its
// aggregate's advisory lock, stays open for hold, and then commits (or
// rolls back). It returns nil for a commit, or a rollback on purpose.
func (h *harness) enqueue(ctx context.Context, msg outbox.Message, hold time.Duration, rollback bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hold+15*time.Second)
	defer cancel()
	err := pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "chaos:"+msg.AggregateID); err != nil {
			return err
		}
		if err := h.store.Enqueue(ctx, tx, msg); err != nil {
			return err
		}
		if hold > 0 {
			time.Sleep(hold)
		}
		if rollback {
			return errRollback
		}
		return nil
	})
	if rollback && err == errRollback {
		return nil
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
