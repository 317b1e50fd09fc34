package pgstore

import (
	"context"
	"embed"

	"github.com/outbox-dev/outbox/internal/migrate"
	"github.com/outbox-dev/outbox/internal/migrate/pgmigrate"
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

// migrations are the embedded migrations in version order, unrendered.
var migrations = migrate.MustLoad("pgstore", migrationFiles, "migrations")

// Migrations returns the embedded migrations in version order, with their
// SQL unrendered (see [Migration.SQL]). The CLI lists them with it.
func Migrations() []Migration {
	return migrate.Copy[Migration](migrations)
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
	plan := migrate.Plan{Owner: "pgstore", Table: migrate.Table{Schema: s.cfg.Schema, Name: "outbox_migrations"},
		LockKey: s.migrateLockKey(), Migrations: s.migrations}
	var partition func(context.Context, pgmigrate.Tx) error
	if s.cfg.Partitioning.Interval > 0 {
		partition = func(ctx context.Context, tx pgmigrate.Tx) error { return s.partition(ctx, tx.Tx) }
	}
	applied, err := migrate.Run(ctx, pgmigrate.Begin(s.pool), plan, partition)
	return migrate.Copy[Migration](applied), ExplainPoolerError(err)
}

// migrateLockKey is the advisory lock key that serialises Migrate for this
// store's schema.
func (s *Store) migrateLockKey() int64 {
	return s.lockKey("outbox.pgstore.migrate:")
}

// lockKey is an advisory lock key for prefix and this store's schema.
func (s *Store) lockKey(prefix string) int64 {
	return migrate.LockKey(prefix + s.cfg.Schema)
}
