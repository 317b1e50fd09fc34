package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"modernc.org/sqlite" // pure Go, no cgo
)

// BusyTimeout is how long a connection from [Open] waits for the write lock
// (another connection's write transaction) before it gives up with
// SQLITE_BUSY ("database is locked").
const BusyTimeout = 10 * time.Second

// Open opens (creating it if needed) the SQLite database file at path, with
// the settings an outbox needs, through the pure-Go driver modernc.org/sqlite
// (driver name "sqlite"). Use the returned *sql.DB for the application's own
// transactions too. Every connection it opens has:
//
//   - journal_mode=WAL: readers never block the writer and the writer never
//     blocks readers, so the relay's claims and the application's reads run
//     side by side;
//   - busy_timeout=10000: a connection that finds the write lock taken waits
//     for it, up to [BusyTimeout], instead of failing at once;
//   - _txlock=immediate: every read-write transaction (db.BeginTx without
//     ReadOnly) takes the write lock at BEGIN. A transaction that started
//     as a reader and wants to write later cannot wait for the lock
//     (SQLite answers SQLITE_BUSY at once, whatever the busy timeout), so
//     taking it up front is what makes "database is locked" impossible;
//   - synchronous=NORMAL: in WAL mode a commit survives a crash of the
//     process; only a power loss or OS crash may lose the last commits;
//   - foreign_keys=ON, for the application's own tables.
//
// On top of that, the writes of one process queue for the write lock in Go
// (FIFO once a writer has waited 10ms) rather than in SQLite's busy
// handler, which polls and can starve a writer under a steady stream of
// others: a read-write transaction queues at BEGIN and leaves the queue at
// COMMIT or ROLLBACK, and a statement run with ExecContext outside a
// transaction queues for its run. Every *sql.DB that Open returns for the
// same path shares the queue. Reads, read-only transactions and QueryContext
// outside a transaction do not queue; a write run that way (INSERT ...
// RETURNING with db.QueryContext) still works, under busy_timeout alone. A
// write that waits [BusyTimeout] in the queue fails with
// [ErrWriteLockTimeout]. Start transactions with BeginTx, not by executing
// BEGIN: the queue does not see those.
//
// path is a file system path, not a URI; it must not contain '?', and an
// in-memory database (":memory:") is refused, since every connection of the
// pool would get a database of its own. Open pings the database and checks
// that WAL mode took effect. Close the *sql.DB when done.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	switch {
	case path == "":
		return nil, errors.New("sqlitestore: open: empty path")
	case strings.ContainsRune(path, '?'):
		return nil, fmt.Errorf("sqlitestore: open %q: path must not contain '?'", path)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return nil, fmt.Errorf("sqlitestore: open %q: need a file path (in-memory databases and URIs are not supported)", path)
	}
	base, err := sqlite.NewConnector(path + "?" + dsnParams())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	db := sql.OpenDB(gatedConnector{base: base, gate: gateFor(path)})
	mode, err := journalMode(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: journal mode is %q, not WAL (is the file on a network file system?)", path, mode)
	}
	return db, nil
}

// journalMode opens the first connection, which switches the file to WAL,
// and reads the journal mode back. Switching a file that is still in
// rollback-journal mode needs an exclusive lock, and SQLite answers
// SQLITE_BUSY for it at once, without its busy handler, while another
// process (or *sql.DB) writes to the new file; so a busy answer is retried
// here, for up to BusyTimeout. Once a file is in WAL mode the switch is a
// no-op that takes no lock.
func journalMode(ctx context.Context, db *sql.DB) (string, error) {
	deadline := time.Now().Add(BusyTimeout)
	wait := time.Millisecond
	for {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return mode, err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (primary code 5, any
// extended code).
func isBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == sqliteBusy
}

// sqliteBusy is SQLite's primary result code SQLITE_BUSY.
const sqliteBusy = 5

// dsnParams are the modernc.org/sqlite connection parameters that Open sets.
func dsnParams() string {
	v := url.Values{}
	v.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	v.Add("_pragma", "journal_mode(WAL)")
	v.Add("_pragma", "synchronous(NORMAL)")
	v.Add("_pragma", "foreign_keys(ON)")
	v.Set("_txlock", "immediate")
	return v.Encode()
}
