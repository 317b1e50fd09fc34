package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func TestMigrate_SaysWhatItAppliedAndIsIdempotent(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	env := map[string]string{"OUTBOX_DATABASE_URL": pgtest.URL()}

	first := runCLI(t, env, "migrate", "--schema", schema)
	if first.code != exitOK {
		t.Fatalf("first migrate: exit %d, stderr:\n%s", first.code, first.stderr)
	}
	for _, m := range pgstore.Migrations() {
		if line := fmt.Sprintf("%03d %s", m.Version, m.Name); !strings.Contains(first.stdout, line) {
			t.Errorf("migrate output does not list %q:\n%s", line, first.stdout)
		}
	}
	all := pgstore.Migrations()
	span := fmt.Sprintf("%03d–%03d", all[0].Version, all[len(all)-1].Version)
	if want := "applied migrations " + span + " to schema " + schema + "\n"; !strings.HasPrefix(first.stdout, want) {
		t.Errorf("first migrate does not begin with %q:\n%s", want, first.stdout)
	}

	// The tables exist: a claim on the migrated schema works (and finds
	// nothing).
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatalf("pgstore.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	claim, err := st.Claim(ctx, store.ClaimParams{Owner: "migrate-test", Limit: 1, Lease: time.Second})
	if err != nil {
		t.Fatalf("claim after migrate: %v", err)
	}
	if len(claim.Records) != 0 {
		t.Fatalf("claim after migrate returned %d records, want 0", len(claim.Records))
	}

	second := runCLI(t, env, "migrate", "--schema", schema)
	if second.code != exitOK {
		t.Fatalf("second migrate: exit %d, stderr:\n%s", second.code, second.stderr)
	}
	if want := "schema " + schema + " was already up to date (migrations " + span + ")\n"; !strings.HasPrefix(second.stdout, want) {
		t.Errorf("second migrate does not begin with %q:\n%s", want, second.stdout)
	}
	if _, list, _ := strings.Cut(first.stdout, "\n"); !strings.HasSuffix(second.stdout, list) {
		t.Errorf("second migrate lists other migrations in place:\n%s\nthan the first:\n%s", second.stdout, first.stdout)
	}
}

func TestMigrate_ListPrintsMigrationsWithoutDatabase(t *testing.T) {
	t.Parallel()
	// No database URL and a port nothing listens on: --list must not connect.
	res := runCLI(t, map[string]string{"OUTBOX_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}, "migrate", "--list")
	if res.code != exitOK {
		t.Fatalf("migrate --list: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	migs := pgstore.Migrations()
	if got := strings.Count(res.stdout, "\n"); got != len(migs) {
		t.Errorf("migrate --list printed %d lines, want %d:\n%s", got, len(migs), res.stdout)
	}
	for _, m := range migs {
		if line := fmt.Sprintf("%03d %s", m.Version, m.Name); !strings.Contains(res.stdout, line) {
			t.Errorf("migrate --list does not list %q:\n%s", line, res.stdout)
		}
	}
}

func TestMigrate_WithoutDatabaseURLNamesFlagAndVariable(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "migrate")
	if res.code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, exitUsage, res.stderr)
	}
	for _, want := range []string{"--database-url", "OUTBOX_DATABASE_URL", "outbox migrate --help"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr does not mention %s:\n%s", want, res.stderr)
		}
	}
}

func TestMigrate_UnreachableDatabaseFailsWithoutShowingPassword(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "migrate", "--database-url", "postgres://app:s3cret-pw@127.0.0.1:1/app?connect_timeout=5")
	if res.code != exitError {
		t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, exitError, res.stderr)
	}
	if !strings.Contains(res.stderr, "connect to database postgres://app:xxxxx@127.0.0.1:1/app") {
		t.Errorf("stderr does not name the database with the password masked:\n%s", res.stderr)
	}
	if strings.Contains(res.stderr, "s3cret-pw") {
		t.Errorf("stderr shows the password:\n%s", res.stderr)
	}
}

func TestVersionRanges_JoinsConsecutiveVersions(t *testing.T) {
	t.Parallel()
	migs := func(vs ...int) (out []pgstore.Migration) {
		for _, v := range vs {
			out = append(out, pgstore.Migration{Version: v})
		}
		return out
	}
	for _, c := range []struct {
		vs   []int
		want string
	}{
		{[]int{12}, "012"},
		{[]int{1, 2, 3}, "001–003"},
		{[]int{3, 5, 6, 7, 9}, "003, 005–007, 009"},
	} {
		if got := versionRanges(migs(c.vs...)); got != c.want {
			t.Errorf("versionRanges(%v) = %q, want %q", c.vs, got, c.want)
		}
	}
}
