// Package sqlfiles reads the reference order system's SQL texts, one set
// per dialect, and applies a service's DDL. Each service keeps its
// PostgreSQL texts in sql/ and its SQLite texts in sql/sqlite/, runs them
// with database/sql on either (PostgreSQL through pgx's stdlib driver), and
// passes the same Go values to both: what differs between the dialects is
// in the texts, not in the Go code.
package sqlfiles

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"

	"github.com/outbox-dev/outbox/examples/orders/internal/pgschema"
)

// Dialect names the SQL a database speaks.
type Dialect string

// The dialects.
const (
	PostgreSQL Dialect = "postgres"
	SQLite     Dialect = "sqlite"
)

// Dir returns where a service keeps the SQL texts of dialect d, under its
// embedded "sql" directory: "sql" for PostgreSQL, "sql/sqlite" for SQLite.
func Dir(d Dialect) string {
	if d == SQLite {
		return "sql/sqlite"
	}
	return "sql"
}

// Load reads the SQL text of each file named in files (file name ->
// destination) from fsys for dialect d. PostgreSQL texts get the quoted
// schema for {{schema}} (the caller checked it with pgschema.Check);
// SQLite has no schemas: a service's tables are the database file's.
func Load(fsys fs.FS, d Dialect, schema string, files map[*string]string) error {
	for dst, name := range files {
		b, err := fs.ReadFile(fsys, path.Join(Dir(d), name))
		if err != nil {
			return fmt.Errorf("read embedded %s SQL %s: %w", d, name, err)
		}
		*dst = string(b)
		if d == PostgreSQL {
			*dst = pgschema.Render(*dst, schema)
		}
	}
	return nil
}

// Migrate applies ddl, a script of CREATE ... IF NOT EXISTS statements, to
// db of dialect d: on PostgreSQL with pgschema.Apply (one transaction under
// an advisory lock keyed by purpose and schema), on SQLite in one write
// transaction, which the write lock serialises with any other process's.
func Migrate(ctx context.Context, db *sql.DB, d Dialect, purpose, schema, ddl string) error {
	if d == PostgreSQL {
		return pgschema.Apply(ctx, db, purpose, schema, ddl)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create the tables of %s: %w", purpose, err)
	}
	return tx.Commit()
}
