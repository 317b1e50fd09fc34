package sqlitestore

import (
	"context"
	"embed"
	"log/slog"

	"github.com/outbox-dev/outbox/internal/migrate"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// Migration is one numbered schema change.
type Migration struct {
	// Version orders migrations; Migrate applies each version once.
	Version int
	// Name describes the change ("create_outbox").
	Name string
	// SQL is the statement text. It contains the placeholders {{prefix}}
	// (the table prefix, inside quoted identifiers) and {{now_ms}} (the
	// database clock in unix milliseconds), which Migrate fills in.
	SQL string
}

// migrations are the embedded migrations in version order, unrendered.
var migrations = migrate.MustLoad("sqlitestore", migrationFiles, "migrations")

// Migrations returns the embedded migrations in version order, with their
// SQL unrendered (see [Migration.SQL]).
func Migrations() []Migration {
	return migrate.Copy[Migration](migrations)
}

// Migrate creates <prefix>migrations if it is absent and applies, in order,
// every embedded migration not yet recorded there. It runs in one write
// transaction (SQLite's DDL is transactional), so either all pending
// migrations are applied or none.
//
// Migrate is idempotent, and safe when several processes run it at once:
// with a *sql.DB from [Open] its transaction takes the write lock at BEGIN,
// so they run one after the other, and each one that waited finds the
// versions already recorded.
func (s *Store) Migrate(ctx context.Context) error {
	plan := migrate.Plan{Owner: "sqlitestore", Table: migrate.Table{Name: s.cfg.TablePrefix + "migrations"},
		Migrations: s.migrations}
	applied, err := migrate.Run(ctx, migrate.SQLite(s.db), plan, nil)
	for _, m := range applied {
		s.cfg.Logger.Info("applied outbox migration", slog.Int("version", m.Version), slog.String("name", m.Name),
			slog.String("table_prefix", s.cfg.TablePrefix))
	}
	return err
}
