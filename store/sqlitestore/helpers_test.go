package sqlitestore_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// bundle is what most tests need: a migrated store in a database file of
// its own.
type bundle struct {
	path  string
	db    *sql.DB
	store *sqlitestore.Store
}

func setup(t *testing.T) *bundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	db := open(t, path)
	s, err := sqlitestore.New(db, sqlitestore.Config{Logger: quiet})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Migrate(testCtx(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return &bundle{path: path, db: db, store: s}
}

// quiet drops the store's logs in tests.
var quiet = slog.New(slog.DiscardHandler)

// open opens path with Open and closes it when the test ends.
func open(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlitestore.Open(testCtx(t), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// testCtx is a context that ends with the test, bounded to 45 s.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// msg returns a valid message of the aggregate with a fresh id.
func msg(aggregateType, aggregateID string) outbox.Message {
	return outbox.Message{
		ID:            uuid.New(),
		AggregateType: aggregateType,
		AggregateID:   aggregateID,
		EventType:     "Happened",
		Payload:       []byte(`{"n":1}`),
	}
}

// enqueue commits msgs in one transaction of db.
func enqueue(ctx context.Context, db *sql.DB, s *sqlitestore.Store, msgs ...outbox.Message) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.Enqueue(ctx, tx, msgs...); err != nil {
		return err
	}
	return tx.Commit()
}

func (b *bundle) enqueue(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	if err := enqueue(testCtx(t), b.db, b.store, msgs...); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
}

func (b *bundle) get(t *testing.T, id uuid.UUID) outbox.Record {
	t.Helper()
	r, err := b.store.Get(testCtx(t), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}

// insertUnchecked writes m into outbox_messages with plain SQL, with
// headers (JSON text) as given, after dropping migration 002's triggers
// from this database: as a row written before that migration. m.Headers is
// ignored.
func insertUnchecked(ctx context.Context, db *sql.DB, m outbox.Message, headers string) error {
	_, err := db.ExecContext(ctx, `
		DROP TRIGGER IF EXISTS outbox_messages_headers_are_strings;
		DROP TRIGGER IF EXISTS outbox_messages_headers_are_strings_on_update;
		INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, event_type, payload, headers)
		VALUES (?, ?, ?, ?, ?, ?)`,
		m.ID.String(), m.AggregateType, m.AggregateID, m.EventType, m.Payload, headers)
	return err
}
