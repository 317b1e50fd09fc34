package orderservice

import (
	"errors"
	"fmt"

	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/money"
)

// checkPlaceOrder applies the rules of PlaceOrder and returns the amount in
// minor units, or a *FieldError for the first field that breaks one.
func checkPlaceOrder(req PlaceOrder) (int64, error) {
	bad := func(field, rule string, args ...any) (int64, error) {
		return 0, &FieldError{Field: field, Rule: fmt.Sprintf(rule, args...)}
	}
	switch {
	case req.CustomerID == "":
		return bad("customerId", "is required")
	case !events.ValidID(req.CustomerID, events.MaxCustomerIDLen):
		return bad("customerId", "must be at most %d bytes of UTF-8 without control characters or surrounding spaces", events.MaxCustomerIDLen)
	}
	if req.Amount == "" {
		return bad("amount", "is required")
	}
	amount, err := money.ParseAmount(req.Amount)
	switch {
	case errors.Is(err, money.ErrNegative):
		return bad("amount", "must not be negative")
	case errors.Is(err, money.ErrPrecision):
		return bad("amount", "must have at most two decimals")
	case errors.Is(err, money.ErrRange):
		return bad("amount", "must be at most %s", money.FormatAmount(money.MaxAmountMinor))
	case err != nil:
		return bad("amount", `must be a decimal number such as "150.00"`)
	case amount == 0:
		return bad("amount", "must be greater than 0")
	}
	switch {
	case req.Currency == "":
		return bad("currency", "is required")
	case !money.IsCurrency(req.Currency):
		return bad("currency", "must be an ISO 4217 code the shop accepts (%v)", money.Currencies())
	}
	if len(req.Items) > MaxItems {
		return bad("items", "must have at most %d lines", MaxItems)
	}
	seen := make(map[string]int, len(req.Items))
	for i, it := range req.Items {
		field := func(name string) string { return fmt.Sprintf("items[%d].%s", i, name) }
		switch {
		case it.SKU == "":
			return bad(field("sku"), "is required")
		case !events.ValidSKU(it.SKU):
			return bad(field("sku"), "must be 1-64 letters, digits, '.', '_' or '-'")
		case it.Quantity < 1 || it.Quantity > MaxQuantity:
			return bad(field("quantity"), "must be from 1 to %d", MaxQuantity)
		}
		if j, dup := seen[it.SKU]; dup {
			return bad(field("sku"), "repeats items[%d].sku; put the quantities on one line", j)
		}
		seen[it.SKU] = i
	}
	return amount, nil
}

// validIdempotencyKey: 1-255 visible ASCII characters.
func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}
