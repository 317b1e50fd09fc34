package sqlitestore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// ErrWriteLockTimeout is returned (wrapped) by a write, through a *sql.DB
// from [Open], that waited [BusyTimeout] for another write transaction of
// the same process to end. Like SQLite's own SQLITE_BUSY it means that a
// write transaction stays open far too long, or that a goroutine holding
// one waits for a second write on another connection.
var ErrWriteLockTimeout = errors.New("sqlitestore: timed out waiting for the write lock")

// writeGate lets the write transactions of this process ask SQLite for its
// single write lock one at a time.
//
// SQLite's own wait for the lock (busy_timeout) is polling: a waiting
// connection sleeps, for up to 100ms at a time, and retries. It is not fair:
// under a steady stream of writes a waiter can keep waking just after the
// lock was taken again, and give up with SQLITE_BUSY ("database is locked")
// after the timeout. Within one process the gate replaces that contest with
// a lock that works like sync.Mutex: a free gate goes to whoever asks first,
// which keeps a busy writer going without a hand-over (fast), but once the
// longest waiter has waited starveAfter, the gate is handed to it directly
// and newcomers queue behind (fair). Writers in other processes still meet
// at SQLite's lock, under busy_timeout.
type writeGate struct {
	timeout time.Duration // how long acquire waits: BusyTimeout

	mu      sync.Mutex
	held    bool
	waiters []*gateWaiter // oldest first
}

// gateWaiter is one goroutine waiting for the gate.
type gateWaiter struct {
	since   time.Time
	wake    chan struct{} // buffered 1: the gate was released, try again
	granted bool          // the gate was handed over: the waiter holds it
}

// starveAfter is how long the longest waiter waits before the gate is
// handed to it rather than left to whoever asks next.
const starveAfter = 10 * time.Millisecond

// gates holds one writeGate per database file of the process, keyed by the
// absolute path, so that every *sql.DB that Open returns for a file shares it.
var gates sync.Map // string -> *writeGate

func gateFor(path string) *writeGate {
	key := path
	if abs, err := filepath.Abs(path); err == nil {
		key = abs
	}
	g, _ := gates.LoadOrStore(key, &writeGate{timeout: BusyTimeout})
	return g.(*writeGate)
}

// starving reports whether the longest waiter has waited starveAfter.
// g.mu must be held.
func (g *writeGate) starving() bool {
	return len(g.waiters) > 0 && time.Since(g.waiters[0].since) >= starveAfter
}

// acquire waits for the gate, until ctx is done or g.timeout passed.
func (g *writeGate) acquire(ctx context.Context) error {
	g.mu.Lock()
	if !g.held && !g.starving() {
		g.held = true
		g.mu.Unlock()
		return nil
	}
	w := &gateWaiter{since: time.Now(), wake: make(chan struct{}, 1)}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()

	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	for {
		var err error
		select {
		case <-w.wake:
		case <-ctx.Done():
			err = ctx.Err()
		case <-timer.C:
			err = fmt.Errorf("%w: another write transaction of this process held it for %v", ErrWriteLockTimeout, g.timeout)
		}
		g.mu.Lock()
		switch {
		case w.granted:
			g.mu.Unlock()
			if err != nil {
				g.release() // handed over just as the wait ended: pass it on
			}
			return err
		case err == nil && !g.held:
			g.held = true
			g.remove(w)
			g.mu.Unlock()
			return nil
		case err != nil:
			g.remove(w)
			g.wakeFirst() // in case this waiter swallowed a wake-up
			g.mu.Unlock()
			return err
		}
		g.mu.Unlock() // someone else got in first: wait for the next release
	}
}

// release gives the gate back: to the longest waiter directly if it has
// waited starveAfter, otherwise to whoever asks first, waking the longest
// waiter so that it can ask.
func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.starving() {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		w.granted = true // g.held stays true: it now belongs to w
		select {
		case w.wake <- struct{}{}:
		default: // it has a wake-up pending already, and will see granted
		}
		return
	}
	g.held = false
	g.wakeFirst()
}

// wakeFirst tells the longest waiter that the gate may be free. g.mu must be
// held.
func (g *writeGate) wakeFirst() {
	if len(g.waiters) == 0 {
		return
	}
	select {
	case g.waiters[0].wake <- struct{}{}:
	default: // it has a wake-up pending already
	}
}

// remove drops w from the waiters. g.mu must be held.
func (g *writeGate) remove(w *gateWaiter) {
	if i := slices.Index(g.waiters, w); i >= 0 {
		g.waiters = slices.Delete(g.waiters, i, i+1)
	}
}

// gatedConnector opens modernc.org/sqlite connections wrapped in gatedConn.
type gatedConnector struct {
	base driver.Connector
	gate *writeGate
}

func (c gatedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := conn.(driverConn); !ok {
		conn.Close()
		return nil, fmt.Errorf("sqlitestore: driver connection %T lacks the context-aware methods", conn)
	}
	return &gatedConn{conn: conn, gate: c.gate}, nil
}

func (c gatedConnector) Driver() driver.Driver { return c.base.Driver() }

// driverConn is what every modernc.org/sqlite connection implements; the
// wrapper forwards all of it, so that database/sql keeps using the context
// aware paths and the driver's connection checks.
type driverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// gatedConn passes each write through the gate: a read-write transaction
// holds it from BEGIN to COMMIT or ROLLBACK, and a statement executed
// outside a transaction (ExecContext) for its run. Queries outside a
// transaction and read-only transactions do not take it. database/sql uses a
// connection from one goroutine at a time, but may roll back from another
// when a context ends, hence the mutex.
type gatedConn struct {
	conn driver.Conn
	gate *writeGate

	mu    sync.Mutex
	inTx  bool // a transaction is open on the connection
	holds bool // that transaction holds the gate
}

var (
	_ driverConn                        = (*gatedConn)(nil)
	_ interface{ Unwrap() driver.Conn } = (*gatedConn)(nil)
	_ driver.StmtExecContext            = (*gatedStmt)(nil)
	_ driver.StmtQueryContext           = (*gatedStmt)(nil)
	_ interface{ Unwrap() driver.Stmt } = (*gatedStmt)(nil)
	_ interface{ Unwrap() driver.Tx }   = (*gatedTx)(nil)
)

// Unwrap returns the modernc.org/sqlite connection, for sqlite.Limit and
// other driver functions used through sql.Conn.Raw.
func (c *gatedConn) Unwrap() driver.Conn { return c.conn }

func (c *gatedConn) inner() driverConn { return c.conn.(driverConn) }

func (c *gatedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *gatedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.inner().PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &gatedStmt{stmt: st, conn: c}, nil
}

func (c *gatedConn) Close() error {
	err := c.conn.Close()
	c.endTx() // a transaction cannot outlive its connection
	return err
}

func (c *gatedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if !opts.ReadOnly {
		if err := c.gate.acquire(ctx); err != nil {
			return nil, err
		}
	}
	tx, err := c.inner().BeginTx(ctx, opts)
	if err != nil {
		if !opts.ReadOnly {
			c.gate.release()
		}
		return nil, err
	}
	c.mu.Lock()
	c.inTx, c.holds = true, !opts.ReadOnly
	c.mu.Unlock()
	return &gatedTx{tx: tx, conn: c}, nil
}

// endTx records that the connection's transaction ended and gives up the
// gate if it held it. Calling it again is a no-op.
func (c *gatedConn) endTx() {
	c.mu.Lock()
	holds := c.holds
	c.inTx, c.holds = false, false
	c.mu.Unlock()
	if holds {
		c.gate.release()
	}
}

// outsideTx reports whether a statement on the connection runs on its own
// (autocommit) rather than inside a transaction.
func (c *gatedConn) outsideTx() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.inTx
}

// gated runs fn holding the gate when the connection is outside a
// transaction.
func gated[T any](ctx context.Context, c *gatedConn, fn func() (T, error)) (T, error) {
	if !c.outsideTx() {
		return fn()
	}
	if err := c.gate.acquire(ctx); err != nil {
		var zero T
		return zero, err
	}
	defer c.gate.release()
	return fn()
}

func (c *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return gated(ctx, c, func() (driver.Result, error) { return c.inner().ExecContext(ctx, query, args) })
}

func (c *gatedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.inner().QueryContext(ctx, query, args)
}

func (c *gatedConn) Ping(ctx context.Context) error { return c.inner().Ping(ctx) }

func (c *gatedConn) ResetSession(ctx context.Context) error { return c.inner().ResetSession(ctx) }

func (c *gatedConn) IsValid() bool { return c.inner().IsValid() }

// gatedTx gives the gate back when the transaction ends.
type gatedTx struct {
	tx   driver.Tx
	conn *gatedConn
}

func (t *gatedTx) Unwrap() driver.Tx { return t.tx }

func (t *gatedTx) Commit() error {
	defer t.conn.endTx()
	return t.tx.Commit()
}

func (t *gatedTx) Rollback() error {
	defer t.conn.endTx()
	return t.tx.Rollback()
}

// gatedStmt takes the gate for a prepared statement executed outside a
// transaction, like gatedConn.ExecContext.
type gatedStmt struct {
	stmt driver.Stmt
	conn *gatedConn
}

func (s *gatedStmt) Unwrap() driver.Stmt { return s.stmt }

func (s *gatedStmt) Close() error  { return s.stmt.Close() }
func (s *gatedStmt) NumInput() int { return s.stmt.NumInput() }

func (s *gatedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), namedValues(args))
}

func (s *gatedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), namedValues(args))
}

func (s *gatedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return gated(ctx, s.conn, func() (driver.Result, error) {
		return s.stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	})
}

func (s *gatedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func namedValues(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}
