package migrate_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/outbox-dev/outbox/internal/migrate"
)

// files is a migrations directory "m" holding the named files.
func files(names ...string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for _, n := range names {
		fsys["m/"+n] = &fstest.MapFile{Data: []byte("-- " + n)}
	}
	return fsys
}

// Load returns the migrations in version order, whatever order the
// directory lists them in, with their names and SQL.
func TestLoad_ReadsMigrationsInVersionOrder(t *testing.T) {
	t.Parallel()
	ms, err := migrate.Load(files("010_ten.up.sql", "002_two.up.sql", "001_one.up.sql", "003_three.up.sql",
		"004_4.up.sql", "005_5.up.sql", "006_6.up.sql", "007_7.up.sql", "008_8.up.sql", "009_9.up.sql"), "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 10 {
		t.Fatalf("Load gave %d migrations, want 10", len(ms))
	}
	for i, m := range ms {
		if m.Version != i+1 || m.SQL != "-- "+m.File() {
			t.Errorf("migration %d: version %d, file %s, SQL %q", i, m.Version, m.File(), m.SQL)
		}
	}
	if ms[0].Name != "one" || ms[9].Name != "ten" || ms[9].File() != "010_ten.up.sql" {
		t.Errorf("names %q ... %q (%s), want one ... ten (010_ten.up.sql)", ms[0].Name, ms[9].Name, ms[9].File())
	}
}

// Load refuses numbering that would lose or double a migration, and names
// that are not NNN_name.up.sql, with an error naming the files at fault and
// the rule.
func TestLoad_RejectsBadNumberingNamingTheFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files []string
		want  []string
	}{
		{"gap", []string{"001_a.up.sql", "002_b.up.sql", "004_d.up.sql"},
			[]string{"m/004_d.up.sql follows m/002_b.up.sql", "no gap (003 is missing)"}},
		{"duplicate", []string{"001_a.up.sql", "002_b.up.sql", "002_c.up.sql", "003_d.up.sql"},
			[]string{"m/002_b.up.sql and m/002_c.up.sql", "same version 2"}},
		{"not from 1", []string{"002_b.up.sql", "003_c.up.sql"},
			[]string{"m/002_b.up.sql has version 2", "start at 1"}},
		{"from 0", []string{"000_z.up.sql", "001_a.up.sql"},
			[]string{"m/000_z.up.sql has version 0", "start at 1"}},
		{"two digits", []string{"01_a.up.sql"}, []string{"m/01_a.up.sql is not a migration file named NNN_name.up.sql"}},
		{"upper case", []string{"001_A.up.sql"}, []string{"m/001_A.up.sql is not"}},
		{"down migration", []string{"001_a.up.sql", "001_a.down.sql"}, []string{"m/001_a.down.sql is not"}},
		{"no name", []string{"001.up.sql"}, []string{"m/001.up.sql is not"}},
	} {
		_, err := migrate.Load(files(tc.files...), "m")
		if err == nil {
			t.Errorf("%s: Load(%v) succeeded", tc.name, tc.files)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Load(%v) = %q; want it to say %q", tc.name, tc.files, err, w)
			}
		}
	}
	if _, err := migrate.Load(files(), "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Load of a missing directory = %v; want an error naming it", err)
	}
}

// MustLoad panics on embedded migrations that Load refuses, naming the
// package they belong to.
func TestMustLoad_PanicsNamingTheOwner(t *testing.T) {
	t.Parallel()
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "pgstore: embedded migrations") || !strings.Contains(r, "003 is missing") {
			t.Errorf("MustLoad panicked with %q; want the owner and the problem", r)
		}
	}()
	migrate.MustLoad("pgstore", files("001_a.up.sql", "002_b.up.sql", "004_d.up.sql"), "m")
}

// Render fills in each migration's SQL and leaves the list it was given
// alone; Copy converts to a user's own type, nil to nil.
func TestRenderAndCopy(t *testing.T) {
	t.Parallel()
	ms := []migrate.Migration{{Version: 1, Name: "a", SQL: "CREATE {{x}}"}}
	got := migrate.Render(ms, func(s string) string { return strings.ReplaceAll(s, "{{x}}", "y") })
	if got[0].SQL != "CREATE y" || ms[0].SQL != "CREATE {{x}}" {
		t.Errorf("Render: %q, original now %q", got[0].SQL, ms[0].SQL)
	}
	type own struct {
		Version int
		Name    string
		SQL     string
	}
	if c := migrate.Copy[own](got); len(c) != 1 || c[0] != (own{1, "a", "CREATE y"}) {
		t.Errorf("Copy = %+v", c)
	}
	if c := migrate.Copy[own](nil); c != nil {
		t.Errorf("Copy(nil) = %#v, want nil", c)
	}
}

// Lock keys are stable (existing deployments' processes must agree with
// new ones) and differ by name.
func TestLockKey_IsTheFNV1aHashOfTheName(t *testing.T) {
	t.Parallel()
	// FNV-1a 64 of "" is its offset basis.
	if got := migrate.LockKey(""); uint64(got) != 0xcbf29ce484222325 {
		t.Errorf("LockKey(\"\") = %#x, want the FNV-1a offset basis", uint64(got))
	}
	if got := migrate.LockKey("a"); uint64(got) != 0xaf63dc4c8601ec8c {
		t.Errorf("LockKey(\"a\") = %#x, want FNV-1a 64 of \"a\", 0xaf63dc4c8601ec8c", uint64(got))
	}
	if migrate.LockKey("outbox.pgstore.migrate:a") == migrate.LockKey("outbox.pgstore.migrate:b") {
		t.Error("two schemas share a lock key")
	}
}
