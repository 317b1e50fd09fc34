package pgschema_test

import (
	"errors"
	"testing"

	"github.com/outbox-dev/outbox/examples/orders/internal/pgschema"
)

func TestCheck_AcceptsOnlyPlainLowerCaseIdentifiers(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"orders", "_x", "billing_2", "a23456789012345678901234567890123456789012345678901234567890123"} {
		if err := pgschema.Check(ok); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Orders", "1x", "a-b", `o"; DROP SCHEMA x; --`, "pg_orders",
		"a234567890123456789012345678901234567890123456789012345678901234"} {
		if err := pgschema.Check(bad); !errors.Is(err, pgschema.ErrInvalidName) {
			t.Errorf("Check(%q) = %v; want ErrInvalidName", bad, err)
		}
	}
}

func TestRender_QuotesTheSchemaEverywhere(t *testing.T) {
	t.Parallel()
	got := pgschema.Render("CREATE SCHEMA IF NOT EXISTS {{schema}}; SELECT 1 FROM {{schema}}.t", "orders")
	if want := `CREATE SCHEMA IF NOT EXISTS "orders"; SELECT 1 FROM "orders".t`; got != want {
		t.Errorf("Render = %q; want %q", got, want)
	}
}
