package sqlname_test

import (
	"strings"
	"testing"

	"github.com/outbox-dev/outbox/internal/sqlname"
)

// Each rule accepts what it allows and otherwise names the field, the
// value and the rule broken.
func TestRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for nil
	}{
		{"schema", sqlname.Schema("Schema", "outbox_1"), ""},
		{"schema, 63 bytes", sqlname.Schema("Schema", "a"+strings.Repeat("b", 62)), ""},
		{"schema, 64 bytes", sqlname.Schema("Schema", "a"+strings.Repeat("b", 63)), `Schema "a` + strings.Repeat("b", 63) + `" must match ^[a-z_][a-z0-9_]{0,62}$`},
		{"schema, upper case", sqlname.Schema("Schema", "Outbox"), `Schema "Outbox" must match ^[a-z_][a-z0-9_]{0,62}$`},
		{"schema, empty", sqlname.Schema("Schema", ""), `Schema "" must match ^[a-z_][a-z0-9_]{0,62}$`},
		{"schema, pg_", sqlname.Schema("Schema", "pg_x"), `Schema "pg_x" must not start with pg_ (reserved by PostgreSQL)`},
		{"prefix", sqlname.Prefix("TablePrefix", "outbox_", false), ""},
		{"prefix, empty", sqlname.Prefix("TablePrefix", "", false), `TablePrefix "" must match ^[a-z_][a-z0-9_]{0,39}$`},
		{"prefix, empty allowed", sqlname.Prefix("TablePrefix", "", true), ""},
		{"prefix, quote", sqlname.Prefix("TablePrefix", `a"b`, true), `TablePrefix "a\"b" must be empty or match ^[a-z_][a-z0-9_]{0,39}$`},
		{"prefix, 41 bytes", sqlname.Prefix("TablePrefix", strings.Repeat("a", 41), false), `TablePrefix "` + strings.Repeat("a", 41) + `" must match ^[a-z_][a-z0-9_]{0,39}$`},
		{"prefix, sqlite_", sqlname.Prefix("TablePrefix", "sqlite_x", true), `TablePrefix "sqlite_x" must not start with sqlite_ (reserved by SQLite)`},
	} {
		got := ""
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Fit keeps a name within the limit as it is, and cuts a longer one to
// the limit with a hash that keeps two long names apart.
func TestFit(t *testing.T) {
	t.Parallel()
	short := "outbox_" + strings.Repeat("a", 56)
	if got := sqlname.Fit(short); got != short {
		t.Fatalf("Fit(%d bytes) = %q, want it unchanged", len(short), got)
	}
	a, b := sqlname.Fit(short+"1"), sqlname.Fit(short+"2")
	if len(a) != sqlname.MaxIdent || len(b) != sqlname.MaxIdent || a == b {
		t.Fatalf("Fit of two long names = %q, %q: want %d bytes each, distinct", a, b, sqlname.MaxIdent)
	}
	if !strings.HasPrefix(a, short[:46]+"_") {
		t.Fatalf("Fit = %q, want the first 46 bytes of the name first", a)
	}
}
