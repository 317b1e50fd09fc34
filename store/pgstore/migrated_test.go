package pgstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Before Migrate, and with a schema that does not exist, the store's
// readiness check and its methods fail with ErrNotMigrated and name the
// command that fixes it; after Migrate the check passes.
func TestStore_UnmigratedSchemaIsNamedWithTheFix(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	for _, name := range []string{schema, "no_such_schema_" + schema[len(schema)-8:]} {
		st, err := pgstore.New(pool, pgstore.Config{Schema: name})
		if err != nil {
			t.Fatal(err)
		}
		want := `no outbox tables in schema "` + name + `": run 'outbox migrate --schema ` + name + `'`
		ctx := pgstoretest.Context(t)
		_, claimErr := st.Claim(ctx, store.ClaimParams{Owner: "t", Limit: 1, Lease: time.Second})
		for what, err := range map[string]error{
			"CheckMigrated": st.CheckMigrated(ctx),
			"Claim":         claimErr,
			"Enqueue": pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				return st.Enqueue(ctx, tx, outbox.Message{AggregateType: "Order", AggregateID: "1", EventType: "E", Payload: []byte(`{}`)})
			}),
			"EnableCursor": st.EnableCursor(ctx),
		} {
			if !errors.Is(err, pgstore.ErrNotMigrated) || !errors.Is(err, store.ErrNotMigrated) || !strings.Contains(err.Error(), want) {
				t.Errorf("schema %s: %s = %v; want ErrNotMigrated saying %s", name, what, err, want)
			}
		}
	}

	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(pgstoretest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if err := st.CheckMigrated(pgstoretest.Context(t)); err != nil {
		t.Errorf("CheckMigrated after Migrate = %v, want nil", err)
	}
}

// A schema with outbox_messages but without a later migration's table is
// named as incomplete, with that table.
func TestStore_IncompleteMigrationNamesTheMissingTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.Pool.Exec(pgstoretest.Context(t), "DROP TABLE "+pgx.Identifier{b.Schema, "outbox_attempts"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	err := b.Store.CheckMigrated(pgstoretest.Context(t))
	want := `schema "` + b.Schema + `" lacks the outbox table outbox_attempts`
	if !errors.Is(err, pgstore.ErrNotMigrated) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckMigrated = %v; want ErrNotMigrated saying %s", err, want)
	}
}

// NotMigrated leaves every other error alone, and so it does with a
// missing table of another schema, or one the CDC relay creates.
func TestNotMigrated_LeavesOtherErrorsAlone(t *testing.T) {
	t.Parallel()
	other := &pgconn.PgError{Code: "42P01", Message: `relation "elsewhere.orders" does not exist`}
	cdcTable := &pgconn.PgError{Code: "42P01", Message: `relation "outbox.outbox_cdc_slots" does not exist`}
	for _, err := range []error{nil, errors.New("boom"), &pgconn.PgError{Code: "23505", Message: "duplicate key"}, other, cdcTable} {
		if got := pgstore.NotMigrated("outbox", err); got != err {
			t.Errorf("NotMigrated(%v) = %v, want it unchanged", err, got)
		}
	}
	mine := &pgconn.PgError{Code: "42P01", Message: `relation "outbox.outbox_messages" does not exist`}
	got := pgstore.NotMigrated("outbox", mine)
	if !errors.Is(got, pgstore.ErrNotMigrated) {
		t.Fatalf("NotMigrated(%v) = %v, want ErrNotMigrated", mine, got)
	}
	if pg, ok := errors.AsType[*pgconn.PgError](got); !ok || pg != mine {
		t.Errorf("NotMigrated dropped PostgreSQL's error from the chain: %v", got)
	}
}

// A missing outbox function of the schema (one of a later migration, such
// as outbox_message_states of migration 016) is named with the fix; a
// missing function of another schema, or not of the outbox, is left alone.
func TestNotMigrated_NamesAMissingOutboxFunction(t *testing.T) {
	t.Parallel()
	mine := &pgconn.PgError{Code: "42883", Message: "function outbox.outbox_message_states(text[], boolean) does not exist"}
	got := pgstore.NotMigrated("outbox", mine)
	want := `schema "outbox" lacks the outbox function outbox_message_states: run 'outbox migrate --schema outbox'`
	if !errors.Is(got, pgstore.ErrNotMigrated) || got.Error() != want {
		t.Errorf("NotMigrated(%v) = %v; want ErrNotMigrated saying %s", mine, got, want)
	}
	if pg, ok := errors.AsType[*pgconn.PgError](got); !ok || pg != mine {
		t.Errorf("NotMigrated dropped PostgreSQL's error from the chain: %v", got)
	}
	for _, err := range []error{
		&pgconn.PgError{Code: "42883", Message: "function elsewhere.outbox_message_states() does not exist"},
		&pgconn.PgError{Code: "42883", Message: "function outbox.my_function(integer) does not exist"},
		fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "42883", Message: "function lower(integer) does not exist"}),
	} {
		if got := pgstore.NotMigrated("outbox", err); got != err {
			t.Errorf("NotMigrated(%v) = %v, want it unchanged", err, got)
		}
	}
}
