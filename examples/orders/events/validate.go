package events

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/outbox-dev/outbox/examples/orders/money"
)

// The contract's limits on identifiers.
const (
	// MaxOrderIDLen bounds orderId: it is the aggregate id, which the
	// outbox limits to 255 bytes.
	MaxOrderIDLen = 255
	// MaxCustomerIDLen bounds customerId.
	MaxCustomerIDLen = 100
)

// skuRe is the contract's rule for a SKU.
var skuRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidSKU reports whether s is a well-formed SKU: 1-64 characters of
// letters, digits, '.', '_' and '-'.
func ValidSKU(s string) bool { return skuRe.MatchString(s) }

// ValidID reports whether s is a well-formed identifier of at most maxLen
// bytes: not empty, UTF-8, no control characters, no surrounding spaces.
func ValidID(s string, maxLen int) bool {
	return s != "" && len(s) <= maxLen && strings.TrimSpace(s) == s && utf8.ValidString(s) &&
		!strings.ContainsFunc(s, unicode.IsControl)
}

// problems collects the broken rules of one payload, one per field.
type problems []string

func (p *problems) add(field, rule string, args ...any) {
	*p = append(*p, field+" "+fmt.Sprintf(rule, args...))
}

// err is nil without problems, else one error listing them all.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return errors.New(strings.Join(p, "; "))
}

func (p *problems) id(field, v string, maxLen int) {
	switch {
	case v == "":
		p.add(field, "is missing")
	case !ValidID(v, maxLen):
		p.add(field, "must be at most %d bytes of UTF-8 without control characters or surrounding spaces", maxLen)
	}
}

func (p *problems) time(field string, t time.Time) {
	if t.IsZero() {
		p.add(field, "is missing")
	}
}

func (p *problems) items(field string, items []Item, atLeastOne bool) {
	if atLeastOne && len(items) == 0 {
		p.add(field, "must have at least one item")
	}
	for i, it := range items {
		if !ValidSKU(it.SKU) {
			p.add(fmt.Sprintf("%s[%d].sku", field, i), "must be 1-64 letters, digits, '.', '_' or '-'")
		}
		if it.Quantity < 1 {
			p.add(fmt.Sprintf("%s[%d].quantity", field, i), "must be at least 1")
		}
	}
}

func (p *problems) firstVersion(v int64) {
	if v != 1 {
		p.add("version", "must be 1 for OrderPlaced, not %d", v)
	}
}

func (p *problems) laterVersion(v int64) {
	if v < 2 {
		p.add("version", "must be at least 2 (OrderPlaced is version 1), not %d", v)
	}
}

func (p *problems) currency(field, code string) {
	if !money.IsCurrency(code) {
		p.add(field, "%q is not an accepted ISO 4217 code", code)
	}
}

func (e OrderPlaced) validate() error {
	var p problems
	p.id("orderId", e.OrderID, MaxOrderIDLen)
	p.id("customerId", e.CustomerID, MaxCustomerIDLen)
	if e.Total.AmountMinor < 1 || e.Total.AmountMinor > money.MaxAmountMinor {
		p.add("total.amountMinor", "must be from 1 to %d, not %d", money.MaxAmountMinor, e.Total.AmountMinor)
	}
	p.currency("total.currency", e.Total.Currency)
	if e.Items == nil {
		p.add("items", "is missing (an empty list when the order has none)")
	}
	p.items("items", e.Items, false)
	p.firstVersion(e.Version)
	p.time("placedAt", e.PlacedAt)
	return p.err()
}

func (e OrderPlacedV1) validate() error {
	var p problems
	p.id("orderId", e.OrderID, MaxOrderIDLen)
	p.id("customerId", e.CustomerID, MaxCustomerIDLen)
	switch minor, err := money.ParseAmount(e.Amount); {
	case e.Amount == "":
		p.add("amount", "is missing")
	case err != nil || minor < 1:
		p.add("amount", "must be a decimal string with at most two decimals from 0.01 to %s, not %q",
			money.FormatAmount(money.MaxAmountMinor), e.Amount)
	}
	p.currency("currency", e.Currency)
	p.items("items", e.Items, false)
	p.firstVersion(e.Version)
	p.time("placedAt", e.PlacedAt)
	return p.err()
}

func (e OrderPaid) validate() error {
	var p problems
	p.id("orderId", e.OrderID, MaxOrderIDLen)
	p.laterVersion(e.Version)
	p.time("paidAt", e.PaidAt)
	return p.err()
}

func (e OrderShipped) validate() error {
	var p problems
	p.id("orderId", e.OrderID, MaxOrderIDLen)
	p.laterVersion(e.Version)
	p.time("shippedAt", e.ShippedAt)
	return p.err()
}

func (e OrderCancelled) validate() error {
	var p problems
	p.id("orderId", e.OrderID, MaxOrderIDLen)
	p.laterVersion(e.Version)
	if e.PreviousStatus != StatusPlaced && e.PreviousStatus != StatusPaid {
		p.add("previousStatus", "must be %s or %s, not %q", StatusPlaced, StatusPaid, e.PreviousStatus)
	}
	p.time("cancelledAt", e.CancelledAt)
	return p.err()
}

func (e StockReserved) validate() error {
	var p problems
	p.id("orderId", e.OrderID, MaxOrderIDLen)
	p.items("items", e.Items, true)
	p.time("reservedAt", e.ReservedAt)
	return p.err()
}

func (e StockReleased) validate() error {
	var p problems
	p.id("orderId", e.OrderID, MaxOrderIDLen)
	p.items("items", e.Items, true)
	p.time("releasedAt", e.ReleasedAt)
	return p.err()
}

func (e StockRejected) validate() error {
	var p problems
	p.id("orderId", e.OrderID, MaxOrderIDLen)
	if len(e.Lines) == 0 {
		p.add("lines", "must have at least one line")
	}
	for i, l := range e.Lines {
		f := func(name string) string { return fmt.Sprintf("lines[%d].%s", i, name) }
		if !ValidSKU(l.SKU) {
			p.add(f("sku"), "must be 1-64 letters, digits, '.', '_' or '-'")
		}
		if l.Quantity < 1 {
			p.add(f("quantity"), "must be at least 1")
		}
		if l.Available < 0 {
			p.add(f("available"), "must not be negative")
		}
		if l.Problem != ProblemUnknownSKU && l.Problem != ProblemInsufficientStock {
			p.add(f("problem"), "must be %s or %s, not %q", ProblemUnknownSKU, ProblemInsufficientStock, l.Problem)
		}
	}
	p.time("rejectedAt", e.RejectedAt)
	return p.err()
}
