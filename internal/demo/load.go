package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/examples/orders/orderservice"
)

// maxInFlight bounds the load generator's concurrent customers.
const maxInFlight = 16

// placedOrder is an order the service accepted, as the load generator last
// saw it (status and version from the service's answers).
type placedOrder struct {
	ID      uuid.UUID
	Status  orderservice.Status
	Version int64
	// CancelledFrom is the status a cancelled order had before.
	CancelledFrom orderservice.Status
}

// load places orders over HTTP at a steady rate and moves some of them
// through their lifecycle.
type load struct {
	base   string
	client *http.Client
	rate   float64
	seed   uint64

	mu     sync.Mutex
	orders []*placedOrder

	placed, rejected, paid, shipped, cancelled atomic.Int64
	// visits counts the customers' visits; every tenth, the first
	// included, sends an invalid order.
	visits atomic.Int64
	// unexpected are answers that break the service's contract: an invalid
	// order accepted, a valid one refused, a transition refused.
	unexpected atomic.Int64
	// serverErrors are 5xx answers: the service could not do the request
	// (on an overloaded machine, a write that waited too long for the
	// database) and wrote nothing, or the load re-reads the order to learn
	// what it did.
	serverErrors atomic.Int64
	lastError    atomic.Value // string
}

// run places orders until ctx ends and waits for the customers in progress.
func (l *load) run(ctx context.Context) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxInFlight)
	tick := time.NewTicker(time.Duration(float64(time.Second) / l.rate))
	defer tick.Stop()
	for n := uint64(0); ; n++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // the service is slower than the rate: skip this tick
		}
		rng := rand.New(rand.NewPCG(l.seed, n))
		wg.Go(func() {
			defer func() { <-sem }()
			l.customer(ctx, rng)
		})
	}
}

var skus = []string{"BOOK-1", "MUG-1", "PEN-1"}

// customer is one customer's visit: an invalid order one visit in ten (the
// first, the eleventh, ...), otherwise an order that is then paid, shipped or cancelled, or left.
// When ctx ends the customer takes no further step, but a request already
// sent runs to its answer, so that what the load knows of each order is
// what the service committed.
func (l *load) customer(ctx context.Context, rng *rand.Rand) {
	stop := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if l.visits.Add(1)%10 == 1 {
		bad := []string{
			`{"customerId":"C-%d","amount":"12.345","currency":"EUR","items":[{"sku":"BOOK-1","quantity":1}]}`,
			`{"customerId":"C-%d","amount":"10.00","currency":"XXX","items":[{"sku":"BOOK-1","quantity":1}]}`,
			`{"customerId":"C-%d","amount":"-5.00","currency":"EUR","items":[{"sku":"BOOK-1","quantity":1}]}`,
		}[rng.IntN(3)]
		status, _, err := l.post(ctx, "/orders", fmt.Sprintf(bad, rng.IntN(1000)))
		switch {
		case err != nil:
		case status == http.StatusBadRequest:
			l.rejected.Add(1)
		default:
			l.fail("an invalid order got %d, not 400", status)
		}
		return
	}
	items := []map[string]any{{"sku": skus[rng.IntN(len(skus))], "quantity": 1 + rng.IntN(3)}}
	if rng.IntN(8) == 0 {
		items = append(items, map[string]any{"sku": "LAMP-1", "quantity": 1 + rng.IntN(2)}) // scarce: rejected once gone
	}
	body, _ := json.Marshal(map[string]any{
		"customerId": fmt.Sprintf("C-%d", rng.IntN(1000)),
		"amount":     fmt.Sprintf("%d.%02d", 1+rng.IntN(500), rng.IntN(100)),
		"currency":   []string{"EUR", "USD", "GBP"}[rng.IntN(3)],
		"items":      items,
	})
	var o orderservice.Order
	status, resp, err := l.post(ctx, "/orders", string(body))
	if err != nil {
		return
	}
	if status >= 500 {
		l.serverErrors.Add(1) // nothing committed; an order whose commit went through unseen is not checked
		return
	}
	if status != http.StatusCreated || json.Unmarshal(resp, &o) != nil {
		l.fail("a valid order got %d: %s", status, resp)
		return
	}
	po := &placedOrder{ID: o.ID, Status: o.Status, Version: o.Version}
	l.mu.Lock()
	l.orders = append(l.orders, po)
	l.mu.Unlock()
	l.placed.Add(1)

	var actions []string
	switch p := rng.IntN(100); {
	case p < 40:
		actions = []string{"pay", "ship"}
	case p < 55:
		actions = []string{"pay"}
	case p < 65:
		actions = []string{"pay", "cancel"}
	case p < 75:
		actions = []string{"cancel"}
	}
	for _, a := range actions {
		if !sleepCtx(stop, time.Duration(rng.IntN(200))*time.Millisecond) {
			return
		}
		status, resp, err := l.post(ctx, "/orders/"+o.ID.String()+"/"+a, "")
		if err != nil {
			return
		}
		var after orderservice.Order
		if status >= 500 {
			l.serverErrors.Add(1)
			l.reconcile(ctx, po)
			return
		}
		if status != http.StatusOK || json.Unmarshal(resp, &after) != nil {
			l.fail("%s of order %s got %d: %s", a, o.ID, status, resp)
			return
		}
		l.mu.Lock()
		if a == "cancel" {
			po.CancelledFrom = po.Status
		}
		po.Status, po.Version = after.Status, after.Version
		l.mu.Unlock()
		map[string]*atomic.Int64{"pay": &l.paid, "ship": &l.shipped, "cancel": &l.cancelled}[a].Add(1)
	}
}

// reconcile reads the order again after an answer that did not say what
// happened, and takes its status and version as the service stored them.
func (l *load) reconcile(ctx context.Context, po *placedOrder) {
	for range 10 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.base+"/orders/"+po.ID.String(), nil)
		if err != nil {
			return
		}
		resp, err := l.client.Do(req)
		if err != nil {
			return
		}
		var o orderservice.Order
		err = json.NewDecoder(resp.Body).Decode(&o)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && err == nil {
			l.mu.Lock()
			if o.Status == orderservice.StatusCancelled && po.Status != orderservice.StatusCancelled {
				po.CancelledFrom = po.Status
			}
			po.Status, po.Version = o.Status, o.Version
			l.mu.Unlock()
			return
		}
		if !sleepCtx(ctx, time.Second) {
			return
		}
	}
	l.fail("order %s could not be read back after a server error", po.ID)
}

// post sends a JSON POST. An error means no answer, which is counted as
// unexpected: the service answers every request.
func (l *load) post(ctx context.Context, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.base+path, bytes.NewBufferString(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.client.Do(req)
	if err != nil {
		l.fail("POST %s: %v", path, err)
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (l *load) fail(format string, args ...any) {
	l.unexpected.Add(1)
	l.lastError.Store(fmt.Sprintf(format, args...))
}

// snapshot returns a copy of the accepted orders.
func (l *load) snapshot() []placedOrder {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]placedOrder, len(l.orders))
	for i, o := range l.orders {
		out[i] = *o
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
