package pgstore_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func TestMigrate_TwiceRecordsEachVersionOnce(t *testing.T) {
	t.Parallel()
	b := setup(t) // migrates once
	if err := b.Store.Migrate(pgstoretest.Context(t)); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	assertVersionsRecordedOnce(t, b)
}

func TestMigrate_ConcurrentCreatesSchemaAndRecordsOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, "public")
	schema := pgtest.NewSchemaName(t) // does not exist yet: Migrate creates it
	t.Cleanup(func() {
		ctx := pgstoretest.Context(t)
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema: %v", err)
		}
	})
	s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := pgstoretest.Context(t)
	start := make(chan struct{})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = s.Migrate(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	assertVersionsRecordedOnce(t, &bundle{&pgstoretest.Bundle{Pool: pool, Schema: schema, Store: s}})
}

func assertVersionsRecordedOnce(t *testing.T, b *bundle) {
	t.Helper()
	rows, err := b.Pool.Query(pgstoretest.Context(t), b.SQL("SELECT version, name FROM {{schema}}.outbox_migrations ORDER BY version"))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Version int32
		Name    string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	want := pgstore.Migrations()
	if len(got) != len(want) {
		t.Fatalf("outbox_migrations has %d rows %v, want %d", len(got), got, len(want))
	}
	for i, m := range want {
		if int(got[i].Version) != m.Version || got[i].Name != m.Name {
			t.Errorf("row %d = %+v, want version %d name %q", i, got[i], m.Version, m.Name)
		}
	}
}

func TestMigrations_AreNumberedAndTemplated(t *testing.T) {
	t.Parallel()
	ms := pgstore.Migrations()
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
	for i, m := range ms {
		if m.Version != i+1 {
			t.Errorf("migration %d has version %d, want %d", i, m.Version, i+1)
		}
		if m.Name == "" || !strings.Contains(m.SQL, "{{schema}}") {
			t.Errorf("migration %d: name %q, SQL without {{schema}} placeholder", m.Version, m.Name)
		}
	}
	// The list is a copy: changing it does not change the store's.
	ms[0].SQL = "DROP TABLE x"
	if pgstore.Migrations()[0].SQL == "DROP TABLE x" {
		t.Error("Migrations returned the package's own slice")
	}
}

func TestNew_RejectsInvalidSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, "public")
	for _, schema := range []string{
		"Outbox", "1outbox", "out-box", `out"box`, "out box", "outbox;drop", "ü",
		strings.Repeat("a", 64), "pg_outbox",
	} {
		_, err := pgstore.New(pool, pgstore.Config{Schema: schema})
		if !errors.Is(err, pgstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "Schema") {
			t.Errorf("New(Schema %q) error = %v, want ErrInvalidConfig naming Schema", schema, err)
		}
	}
}

func TestNew_AcceptsValidConfigAndDefaultsSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, "public")
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Schema() != "outbox" {
		t.Errorf("Schema() = %q, want outbox", s.Schema())
	}
	for _, schema := range []string{"_x", "a", "app_outbox_2", strings.Repeat("a", 63)} {
		if _, err := pgstore.New(pool, pgstore.Config{Schema: schema}); err != nil {
			t.Errorf("New(Schema %q): %v", schema, err)
		}
	}
	_, err = pgstore.New(pool, pgstore.Config{Limits: outbox.Limits{MaxPayloadBytes: -1}})
	if !errors.Is(err, pgstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "Limits.MaxPayloadBytes") {
		t.Errorf("negative MaxPayloadBytes: error = %v, want ErrInvalidConfig naming Limits.MaxPayloadBytes", err)
	}
	for _, lease := range []time.Duration{-time.Second, 500 * time.Millisecond} {
		_, err = pgstore.New(pool, pgstore.Config{LeaderLease: lease})
		if !errors.Is(err, pgstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "LeaderLease") {
			t.Errorf("LeaderLease %v: error = %v, want ErrInvalidConfig naming LeaderLease", lease, err)
		}
	}
}

func TestChannelName_FitsIdentifierLimitAndStaysDistinct(t *testing.T) {
	t.Parallel()
	if got := pgstore.ChannelName("orders"); got != "outbox_orders" {
		t.Errorf("ChannelName(orders) = %q", got)
	}
	a := pgstore.ChannelName(strings.Repeat("a", 62) + "b")
	b := pgstore.ChannelName(strings.Repeat("a", 62) + "c")
	if len(a) > 63 || len(b) > 63 || a == b {
		t.Errorf("long names: %q (%d), %q (%d): want distinct, at most 63 bytes", a, len(a), b, len(b))
	}
}

// ApplyMigrations reports what it applied: every migration on an empty
// schema, none on an up to date one.
func TestApplyMigrations_ReportsWhatItApplied(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	versions := func(ms []pgstore.Migration) (vs []int) {
		for _, m := range ms {
			vs = append(vs, m.Version)
		}
		return vs
	}
	all := versions(pgstore.Migrations())
	applied, err := st.ApplyMigrations(pgstoretest.Context(t))
	if err != nil || !slices.Equal(versions(applied), all) {
		t.Fatalf("first ApplyMigrations = %v, %v; want %v", versions(applied), err, all)
	}
	if applied, err = st.ApplyMigrations(pgstoretest.Context(t)); err != nil || len(applied) != 0 {
		t.Fatalf("ApplyMigrations on an up to date schema = %v, %v; want none", versions(applied), err)
	}
}
