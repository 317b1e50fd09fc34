package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
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

var migrationNameRe = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.up\.sql$`)

// migrations is the parsed, sorted list of embedded migrations.
var migrations = mustLoadMigrations()

func mustLoadMigrations() []Migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("sqlitestore: read embedded migrations: %v", err))
	}
	var out []Migration
	seen := map[int]bool{}
	for _, e := range entries {
		m := migrationNameRe.FindStringSubmatch(e.Name())
		if m == nil {
			panic(fmt.Sprintf("sqlitestore: embedded migration %q is not named NNN_name.up.sql", e.Name()))
		}
		v, _ := strconv.Atoi(m[1])
		if seen[v] {
			panic(fmt.Sprintf("sqlitestore: two embedded migrations have version %d", v))
		}
		seen[v] = true
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic(fmt.Sprintf("sqlitestore: read embedded migration %s: %v", e.Name(), err))
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// Migrations returns the embedded migrations in version order, with their
// SQL unrendered (see [Migration.SQL]).
func Migrations() []Migration {
	return append([]Migration(nil), migrations...)
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
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: begin: %w", err)
	}
	defer tx.Rollback() // a no-op after Commit

	if _, err := tx.ExecContext(ctx, s.q.migrateSetup); err != nil {
		return fmt.Errorf("sqlitestore: migrate: create %smigrations: %w", s.cfg.TablePrefix, err)
	}
	rows, err := tx.QueryContext(ctx, s.q.migrateApplied)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: read applied versions: %w", err)
	}
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("sqlitestore: migrate: read applied versions: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: read applied versions: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: read applied versions: %w", err)
	}
	var done []Migration
	for _, m := range s.migrations {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("sqlitestore: migrate: apply %03d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, s.q.migrateRecord, m.Version, m.Name); err != nil {
			return fmt.Errorf("sqlitestore: migrate: record %03d_%s: %w", m.Version, m.Name, err)
		}
		done = append(done, m)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: commit: %w", err)
	}
	for _, m := range done {
		s.cfg.Logger.Info("applied outbox migration", slog.Int("version", m.Version), slog.String("name", m.Name),
			slog.String("table_prefix", s.cfg.TablePrefix))
	}
	return nil
}
