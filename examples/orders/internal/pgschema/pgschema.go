// Package pgschema creates the order system's own tables: it validates a
// schema name from configuration, fills it into embedded SQL, and applies
// a service's DDL idempotently and safely when several processes start at
// once.
package pgschema

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// nameRe is the rule for a schema name: lower case, so that quoted and
// unquoted spellings agree, and at most 63 bytes.
var nameRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

//go:embed lock.sql
var lockSQL string

// ErrInvalidName is wrapped by [Check]'s error.
var ErrInvalidName = errors.New("invalid schema name")

// Check reports whether name is usable as a schema: it must match
// ^[a-z_][a-z0-9_]{0,62}$ and not start with "pg_".
func Check(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%w: %q must match %s", ErrInvalidName, name, nameRe)
	}
	if strings.HasPrefix(name, "pg_") {
		return fmt.Errorf("%w: %q must not start with pg_ (reserved by PostgreSQL)", ErrInvalidName, name)
	}
	return nil
}

// Render replaces every {{schema}} in sql by the quoted identifier of
// schema, which the caller has checked with [Check].
func Render(sql, schema string) string {
	return strings.ReplaceAll(sql, "{{schema}}", pgx.Identifier{schema}.Sanitize())
}

// Apply runs ddl, a script of CREATE ... IF NOT EXISTS statements already
// rendered, on db (PostgreSQL through pgx's stdlib driver) in one
// transaction under a transaction-scoped advisory lock keyed by purpose and
// schema. So it is idempotent, and processes that start at once wait for
// each other instead of racing on CREATE SCHEMA. ddl runs without
// arguments, in the simple protocol, which takes several statements.
func Apply(ctx context.Context, db *sql.DB, purpose, schema, ddl string) error {
	h := fnv.New64a()
	h.Write([]byte("outbox.examples." + purpose + ":" + schema))
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, lockSQL, int64(h.Sum64())); err != nil {
		return fmt.Errorf("take the advisory lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create the tables in schema %s: %w", schema, err)
	}
	return tx.Commit()
}
