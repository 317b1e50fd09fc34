package demo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/examples/orders/billing"
	"github.com/outbox-dev/outbox/examples/orders/inventory"
	"github.com/outbox-dev/outbox/examples/orders/orderservice"
)

// Check is one invariant and whether it held.
type Check struct {
	Name string
	OK   bool
	// Problems are the first violations found (at most a few), empty if OK.
	Problems []string
}

// maxProblems is how many violations a check lists.
const maxProblems = 5

func (c *Check) fail(format string, args ...any) {
	c.OK = false
	if len(c.Problems) < maxProblems {
		c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
	}
}

// outboxCounts sums the counts of both outboxes: unsent (PENDING,
// IN_FLIGHT, FAILED), SENT and DEAD_LETTER.
type outboxCounts struct{ unsent, sent, dead int64 }

func countOutboxes(ctx context.Context, stores ...outboxStore) (outboxCounts, error) {
	var c outboxCounts
	for _, st := range stores {
		m, err := st.Counts(ctx)
		if err != nil {
			return c, err
		}
		c.unsent += m[outbox.StatusPending] + m[outbox.StatusInFlight] + m[outbox.StatusFailed]
		c.sent += m[outbox.StatusSent]
		c.dead += m[outbox.StatusDeadLetter]
	}
	return c, nil
}

// stockLevels is each SKU's available and reserved units.
type stockLevels map[string][2]int64

func readStock(ctx context.Context, inv *inventory.Inventory) (stockLevels, error) {
	out := stockLevels{}
	for sku := range demoStock() {
		a, r, err := inv.Stock(ctx, sku)
		if err != nil {
			return nil, err
		}
		out[sku] = [2]int64{a, r}
	}
	return out, nil
}

// checker runs the invariants over the system's state.
type checker struct {
	b          *backend
	load       *load
	audit      *audit
	stockStart stockLevels
	billing    *consumerStats
	inventory  *consumerStats
}

// run checks every invariant and returns the checks in a fixed order.
func (c *checker) run(ctx context.Context) ([]Check, error) {
	orders := c.load.snapshot()
	effects := Check{Name: "every accepted order is stored with all its events on the topic, one invoice and one reservation in the state its events imply", OK: true}
	reservedUnits, shippedUnits := map[string]int64{}, map[string]int64{}
	for _, o := range orders {
		id := o.ID.String()
		stored, err := c.b.orders.Get(ctx, o.ID)
		switch {
		case errors.Is(err, orderservice.ErrNotFound):
			effects.fail("order %s was accepted but is not in the order database", id)
			continue
		case err != nil:
			return nil, err
		case stored.Version != o.Version || stored.Status != o.Status:
			effects.fail("order %s is %s version %d in the database; the service answered %s version %d", id, stored.Status, stored.Version, o.Status, o.Version)
		}
		if n := c.audit.events(id); int64(n) != o.Version {
			effects.fail("order %s (version %d) has %d distinct events on the topic; want %d", id, o.Version, n, o.Version)
		}
		inv, err := c.b.billing.Invoice(ctx, id)
		switch {
		case errors.Is(err, billing.ErrNotFound):
			effects.fail("order %s has no invoice", id)
		case err != nil:
			return nil, err
		case inv.Status != wantInvoice(o):
			effects.fail("order %s (%s) has a %s invoice; want %s", id, o.Status, inv.Status, wantInvoice(o))
		}
		if wantInvoice(o) == billing.StatusCredited {
			if _, err := c.b.billing.CreditNote(ctx, id); errors.Is(err, billing.ErrNotFound) {
				effects.fail("order %s was cancelled after payment but has no credit note", id)
			} else if err != nil {
				return nil, err
			}
		}
		r, err := c.b.inventory.Reservation(ctx, id)
		switch {
		case errors.Is(err, inventory.ErrNotFound):
			effects.fail("order %s has no reservation", id)
			continue
		case err != nil:
			return nil, err
		case r.Status != inventory.StatusRejected && r.Status != wantReservation(o):
			effects.fail("order %s (%s) has a %s reservation; want %s (or REJECTED)", id, o.Status, r.Status, wantReservation(o))
		}
		for _, it := range r.Items {
			switch r.Status {
			case inventory.StatusReserved:
				reservedUnits[it.SKU] += int64(it.Quantity)
			case inventory.StatusShipped:
				shippedUnits[it.SKU] += int64(it.Quantity)
			}
		}
	}

	counts, err := countOutboxes(ctx, c.b.ordersOutbox, c.b.inventoryOutbox)
	if err != nil {
		return nil, err
	}
	lost := Check{Name: "nothing lost: every outbox message was published and marked sent", OK: true}
	if counts.unsent > 0 {
		lost.fail("%d outbox messages are still unsent", counts.unsent)
	}
	dead := Check{Name: "no dead letters, no parked messages", OK: true}
	if counts.dead > 0 {
		dead.fail("%d dead letters in the outboxes", counts.dead)
	}
	if n := c.billing.parked.Load() + c.inventory.parked.Load(); n > 0 {
		dead.fail("%d messages parked by the consumers", n)
	}

	dups := Check{Name: "duplicates absorbed: stock moved once per order, however often its events came", OK: true}
	stockEnd, err := readStock(ctx, c.b.inventory)
	if err != nil {
		return nil, err
	}
	for _, sku := range slices.Sorted(maps.Keys(stockEnd)) {
		start, end := c.stockStart[sku], stockEnd[sku]
		if got, want := end[1]-start[1], reservedUnits[sku]; got != want {
			dups.fail("%s: %d units more reserved than at start; this run's reservations hold %d", sku, got, want)
		}
		if got, want := (start[0]+start[1])-(end[0]+end[1]), shippedUnits[sku]; got != want {
			dups.fail("%s: %d units left the stock; this run's shipped reservations hold %d", sku, got, want)
		}
	}

	contract := Check{Name: "the order service answered every request as its contract says (invalid ones 400, no valid one refused)", OK: true}
	if n := c.load.unexpected.Load(); n > 0 {
		msg, _ := c.load.lastError.Load().(string)
		contract.fail("%d unexpected answers, the last: %s", n, msg)
	}
	return []Check{effects, lost, dead, dups, contract}, nil
}

// wantInvoice is the invoice status an order's events lead to.
func wantInvoice(o placedOrder) string {
	switch {
	case o.Status == orderservice.StatusCancelled && o.CancelledFrom == orderservice.StatusPaid:
		return billing.StatusCredited
	case o.Status == orderservice.StatusCancelled:
		return billing.StatusVoid
	case o.Status == orderservice.StatusPlaced:
		return billing.StatusOpen
	default: // PAID, SHIPPED
		return billing.StatusPaid
	}
}

// wantReservation is the reservation status an order's events lead to,
// unless the inventory rejected the order.
func wantReservation(o placedOrder) string {
	switch o.Status {
	case orderservice.StatusCancelled:
		return inventory.StatusReleased
	case orderservice.StatusShipped:
		return inventory.StatusShipped
	default:
		return inventory.StatusReserved
	}
}

// failed returns the names of the checks that failed.
func failed(checks []Check) []string {
	var out []string
	for _, c := range checks {
		if !c.OK {
			out = append(out, c.Name+": "+strings.Join(c.Problems, "; "))
		}
	}
	return out
}
