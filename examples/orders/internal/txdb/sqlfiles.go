package txdb

import (
	"context"
	"fmt"
	"io/fs"
	"path"

	"github.com/outbox-dev/outbox/examples/orders/internal/pgschema"
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

// Migrate applies ddl, a script of CREATE ... IF NOT EXISTS statements:
// on PostgreSQL with pgschema.Apply (one transaction under an advisory lock
// keyed by purpose and schema), on SQLite in one write transaction, which
// the write lock serialises with any other process's.
func Migrate(ctx context.Context, db DB, purpose, schema, ddl string) error {
	switch d := db.(type) {
	case pgDB:
		return pgschema.Apply(ctx, d.pool, purpose, schema, ddl)
	default:
		return db.InTx(ctx, func(tx Tx) error {
			if _, err := tx.Exec(ctx, ddl); err != nil {
				return fmt.Errorf("create the tables of %s: %w", purpose, err)
			}
			return nil
		})
	}
}
