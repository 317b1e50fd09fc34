package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the raw driver, to stand in for another process

	"github.com/outbox-dev/outbox/store/sqlitestore"
)

func TestOpen_RefusesWhatIsNotAFilePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, path := range []string{"", ":memory:", "file:" + filepath.Join(dir, "a.db"), filepath.Join(dir, "a.db?mode=memory")} {
		if db, err := sqlitestore.Open(testCtx(t), path); err == nil {
			db.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
}

// Every connection of the pool, not only the first, gets the settings.
func TestOpen_EveryConnectionHasTheOutboxSettings(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	db := open(t, filepath.Join(t.TempDir(), "app.db"))
	var conns []*sql.Conn
	for range 3 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		for pragma, want := range map[string]string{
			"journal_mode": "wal", "busy_timeout": "10000", "synchronous": "1", "foreign_keys": "1",
		} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !strings.EqualFold(got, want) {
				t.Errorf("connection %d: %s = %s, want %s", i, pragma, got, want)
			}
		}
	}
	for _, c := range conns {
		c.Close()
	}
}

// A read-write transaction takes SQLite's write lock at BEGIN: another
// process (here a connection that bypasses Open) cannot start writing while
// it is open, even before it wrote anything.
func TestOpen_WriteTransactionTakesTheLockAtBegin(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "app.db")
	db := open(t, path)
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
	if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") {
		t.Errorf("BEGIN IMMEDIATE elsewhere during an open write transaction = %v, want SQLITE_BUSY", err)
	}
	if err == nil {
		other.ExecContext(ctx, "ROLLBACK")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Read-only transactions take no write lock.
	ro, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Rollback()
	if _, err := other.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Errorf("BEGIN IMMEDIATE elsewhere during a read-only transaction: %v", err)
	} else {
		other.ExecContext(ctx, "ROLLBACK")
	}
}

// Two handles that Open returned for one file queue their writers behind
// one another in the process, instead of meeting at SQLite's lock.
func TestOpen_HandlesOfOneFileShareTheWriteQueue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "app.db")
	db1, db2 := open(t, path), open(t, path)
	if _, err := db1.ExecContext(ctx, "CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db1.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := db2.ExecContext(short, "INSERT INTO t VALUES (1)"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write on the second handle while the first writes = %v, want it to wait until its context ends", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db2.ExecContext(ctx, "INSERT INTO t VALUES (2)")
		done <- err
	}()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("write after the first handle committed: %v", err)
	}
	// Reads never wait.
	tx, err = db1.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := db2.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Errorf("read during a write transaction = %d, %v; want 1", n, err)
	}
}

// A transaction whose context ends is rolled back by database/sql, and the
// next writer goes ahead: the queue is not left held.
func TestOpen_TransactionEndedByItsContextLetsTheNextWriterIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.Enqueue(ctx, tx, msg("Order", "1")); err != nil {
		t.Fatal(err)
	}
	cancel()
	next, cancelNext := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancelNext()
	m := msg("Order", "2")
	if err := enqueue(next, b.db, b.store, m); err != nil {
		t.Fatalf("enqueue after the first transaction's context ended: %v", err)
	}
	b.get(t, m.ID)
	if err := tx.Commit(); err == nil {
		t.Error("Commit of a transaction whose context ended succeeded")
	}
}

// Several processes (here: *sql.DBs with connections of their own) opening
// the same new file at once all succeed: switching a new file to WAL needs
// an exclusive lock, and SQLite answers SQLITE_BUSY for it at once instead
// of waiting in its busy handler, so Open must wait and retry itself.
func TestOpen_ConcurrentOpensOfANewFile(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "new.db")
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() {
				db, err := sqlitestore.Open(ctx, path)
				if err == nil {
					_, err = db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS t (x INTEGER)")
					for i := 0; err == nil && i < 5; i++ {
						_, err = db.ExecContext(ctx, "INSERT INTO t VALUES (?)", i)
					}
					db.Close()
				}
				errs <- err
			}()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
