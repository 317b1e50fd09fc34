package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox/store"
)

// ErrNotMigrated is wrapped by the store's errors, and by those of packages
// ops and cdc, when the outbox tables are not in the schema: Migrate ("outbox
// migrate") has not run on it, or Config.Schema names the wrong schema. The
// message names the schema and the command that fixes it. It is
// [store.ErrNotMigrated], so that the relay, which knows only package store,
// can test for it.
var ErrNotMigrated = store.ErrNotMigrated

// PostgreSQL's codes for a missing table, function and schema.
const (
	codeUndefinedTable    = "42P01" // undefined_table
	codeUndefinedFunction = "42883" // undefined_function
	codeInvalidSchemaName = "3F000" // invalid_schema_name
)

// notMigratedError says which outbox table is missing and how to fix it;
// pg is PostgreSQL's error about it, if there was one.
type notMigratedError struct {
	msg string
	pg  *pgconn.PgError
}

func (e *notMigratedError) Error() string { return e.msg }

func (e *notMigratedError) Unwrap() []error {
	if e.pg == nil {
		return []error{ErrNotMigrated}
	}
	return []error{ErrNotMigrated, e.pg}
}

// migrateHint is the command that creates the outbox tables in schema.
func migrateHint(schema string) string {
	return fmt.Sprintf("run 'outbox migrate --schema %s'", schema)
}

// noTables is the error for a schema without outbox_messages.
func noTables(schema string, pg *pgconn.PgError) error {
	return &notMigratedError{fmt.Sprintf("no outbox tables in schema %q: %s", schema, migrateHint(schema)), pg}
}

// NotMigrated returns err as an error wrapping [ErrNotMigrated] that says
// how to fix it when err is PostgreSQL's undefined_table (42P01) about a
// table in schema, undefined_function (42883) about an outbox_ function in
// schema (one of a later migration, such as outbox_message_states of
// migration 016), or invalid_schema_name (3F000) about schema, and err
// itself otherwise (nil for nil). The message reads
//
//	no outbox tables in schema "orders": run 'outbox migrate --schema orders'
//
// or, when the missing table is another one (of a later migration, or one
// that a query reads before outbox_messages), that the schema lacks it. The
// CDC relay's own tables (outbox_cdc_*), which it creates itself, are left
// alone. The store's methods return their errors through it; callers that
// run their own queries on the outbox tables (package ops, the CLI) can do
// the same.
func NotMigrated(schema string, err error) error {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok || errors.Is(err, ErrNotMigrated) {
		return err
	}
	switch {
	case pgErr.Code == codeInvalidSchemaName && strings.Contains(pgErr.Message, `"`+schema+`"`):
		return noTables(schema, pgErr)
	case pgErr.Code == codeUndefinedFunction:
		if missing := missingFunction(schema, pgErr); missing != nil {
			return missing
		}
		return err
	case pgErr.Code != codeUndefinedTable:
		return err
	}
	// PostgreSQL names a qualified relation "schema.table".
	i := strings.Index(pgErr.Message, `"`+schema+`.`)
	if i < 0 {
		return err
	}
	table, _, _ := strings.Cut(pgErr.Message[i+len(schema)+2:], `"`)
	switch {
	case strings.HasPrefix(table, "outbox_cdc_"):
		return err // created by the CDC relay, not by the migrations
	case table == "outbox_messages":
		return noTables(schema, pgErr)
	}
	return &notMigratedError{fmt.Sprintf("schema %q lacks the outbox table %s: %s", schema, table, migrateHint(schema)), pgErr}
}

// missingFunction is NotMigrated for undefined_function, or nil when the
// function is not an outbox function of schema. PostgreSQL names the
// function as called, schema.name(argument types), unquoted.
func missingFunction(schema string, pg *pgconn.PgError) error {
	_, fn, ok := strings.Cut(pg.Message, "function "+schema+".outbox_")
	if !ok {
		return nil
	}
	name, _, _ := strings.Cut("outbox_"+fn, "(")
	return &notMigratedError{fmt.Sprintf("schema %q lacks the outbox function %s: %s", schema, name, migrateHint(schema)), pg}
}

// notMigrated is [NotMigrated] for this store's schema.
func (s *Store) notMigrated(err error) error { return NotMigrated(s.cfg.Schema, err) }

// explain names the fix of the set-up errors a caller can meet: missing
// outbox tables (NotMigrated) and pgx's cached statements behind a
// transaction pooler (ExplainPoolerError).
func (s *Store) explain(err error) error { return ExplainPoolerError(s.notMigrated(err)) }

// CheckMigrated reports whether the outbox tables are in the store's schema
// with one cheap query (queries/check_migrated.sql): nil, an error wrapping
// [ErrNotMigrated] that says how to fix it, or the database's error. The
// relay's readiness check (/readyz) runs it.
func (s *Store) CheckMigrated(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, s.q.checkMigrated); err != nil {
		return fmt.Errorf("pgstore: %w", s.explain(err))
	}
	return nil
}
