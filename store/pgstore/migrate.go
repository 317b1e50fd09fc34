package pgstore

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// Migration is one numbered schema change.
type Migration struct {
	// Version orders migrations; Migrate applies each version once.
	Version int
	// Name describes the change ("create_outbox").
	Name string
	// SQL is the statement text. It contains the placeholders {{schema}}
	// (the quoted schema identifier) and {{channel_literal}} (the NOTIFY
	// channel as a string literal), which Migrate fills in.
	SQL string
}

var migrationNameRe = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.up\.sql$`)

// migrations is the parsed, sorted list of embedded migrations.
var migrations = mustLoadMigrations()

func mustLoadMigrations() []Migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("pgstore: read embedded migrations: %v", err))
	}
	var out []Migration
	seen := map[int]bool{}
	for _, e := range entries {
		m := migrationNameRe.FindStringSubmatch(e.Name())
		if m == nil {
			panic(fmt.Sprintf("pgstore: embedded migration %q is not named NNN_name.up.sql", e.Name()))
		}
		v, _ := strconv.Atoi(m[1])
		if seen[v] {
			panic(fmt.Sprintf("pgstore: two embedded migrations have version %d", v))
		}
		seen[v] = true
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic(fmt.Sprintf("pgstore: read embedded migration %s: %v", e.Name(), err))
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// Migrations returns the embedded migrations in version order, with their
// SQL unrendered (see [Migration.SQL]). The CLI lists them with it.
func Migrations() []Migration {
	return append([]Migration(nil), migrations...)
}

// Migrate creates the schema if it is absent and applies, in order, every
// embedded migration not yet recorded in <schema>.outbox_migrations. It runs
// in one transaction, so either all pending migrations are applied or none.
//
// With [Config.Partitioning] set, Migrate then makes outbox_messages a table
// partitioned by created_at (in the same transaction) and creates the
// default partition and the partitions from now to Partitioning.Ahead
// intervals ahead; see [Partitioning] and [Store.EnsurePartitions]. A plain
// table with rows keeps them: it becomes the partition
// outbox_messages_legacy, for everything created before the first new
// partition. Once partitioned, the table stays so, whatever the Config of
// later runs; the interval cannot be changed.
//
// Migrate is idempotent, and safe when several processes run it at once: a
// transaction-scoped advisory lock, keyed by the schema, serialises them, and
// each one that waited finds the versions already recorded.
func (s *Store) Migrate(ctx context.Context) error {
	_, err := s.ApplyMigrations(ctx)
	return err
}

// ApplyMigrations is [Store.Migrate], and returns the migrations it applied
// (their SQL rendered for the schema), in version order: none when the
// schema was up to date.
func (s *Store) ApplyMigrations(ctx context.Context) ([]Migration, error) {
	var applied []Migration
	err := s.migrate(ctx, func(m Migration) { applied = append(applied, m) })
	return applied, ExplainPoolerError(err)
}

// migrate runs Migrate, calling onApply for each migration it applies; the
// migrations count as applied only if it returns nil.
func (s *Store) migrate(ctx context.Context, onApply func(Migration)) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: begin: %w", err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit

	if _, err := tx.Exec(ctx, s.q.migrateLock, s.migrateLockKey()); err != nil {
		return fmt.Errorf("pgstore: migrate: take advisory lock: %w", err)
	}
	if _, err := tx.Exec(ctx, s.q.migrateSetup); err != nil {
		return fmt.Errorf("pgstore: migrate: create schema %s and outbox_migrations: %w", s.cfg.Schema, err)
	}
	rows, err := tx.Query(ctx, s.q.migrateApplied)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[int(v)] = true
	}
	for _, m := range s.migrations {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("pgstore: migrate: apply %03d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, s.q.migrateRecord, m.Version, m.Name); err != nil {
			return fmt.Errorf("pgstore: migrate: record %03d_%s: %w", m.Version, m.Name, err)
		}
		onApply(m)
	}
	if s.cfg.Partitioning.Interval > 0 {
		if err := s.partition(ctx, tx); err != nil {
			return fmt.Errorf("pgstore: migrate: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: commit: %w", err)
	}
	return nil
}

// migrateLockKey is the advisory lock key that serialises Migrate for this
// store's schema.
func (s *Store) migrateLockKey() int64 {
	return s.lockKey("outbox.pgstore.migrate:")
}

// lockKey is an advisory lock key for prefix and this store's schema.
func (s *Store) lockKey(prefix string) int64 {
	h := fnv.New64a()
	h.Write([]byte(prefix + s.cfg.Schema))
	return int64(h.Sum64())
}
