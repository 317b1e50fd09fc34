package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ListenApplicationName is the application_name of the connection that
// [Store.Notifications] holds, so operators can tell it apart in
// pg_stat_activity.
const ListenApplicationName = "outbox-listen"

// Reconnect backoff of the listening connection.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// ListenProbeTimeout bounds the wait, in [Store.Notifications], for the
// notification that shows LISTEN works on the connection.
const ListenProbeTimeout = 5 * time.Second

// ErrListenNotDelivered is returned by [Store.Notifications] when a
// notification sent after LISTEN did not arrive on the listening connection
// within ListenProbeTimeout: the connection goes through a pooler in
// transaction mode (PgBouncer), which gives the LISTEN to whichever server
// connection ran it and hands that one to other clients afterwards.
var ErrListenNotDelivered = errors.New("pgstore: notifications: LISTEN does not deliver notifications on this connection " +
	"(a connection pooler in transaction mode, such as PgBouncer?); turn LISTEN off (relay.Config.DisableListen, outbox relay --no-listen)")

// Idle registers relay owner as idle for d: until then, or until [Store.Busy],
// every transaction that enqueues messages sends a NOTIFY at commit. While no
// relay is registered, enqueues send none, so writers keep PostgreSQL's
// group commit (a NOTIFY serializes commits database-wide).
func (s *Store) Idle(ctx context.Context, owner string, d time.Duration) error {
	if _, err := s.pool.Exec(ctx, s.q.idle, owner, d.Milliseconds()); err != nil {
		return fmt.Errorf("pgstore: idle: %w", s.explain(err))
	}
	return nil
}

// Busy withdraws owner's idle registration.
func (s *Store) Busy(ctx context.Context, owner string) error {
	if _, err := s.pool.Exec(ctx, s.q.busy, owner); err != nil {
		return fmt.Errorf("pgstore: busy: %w", s.explain(err))
	}
	return nil
}

// Notifications listens for committed enqueues and returns a channel that
// receives a value soon after each transaction that enqueued messages into
// this store's schema commits while a relay is registered as idle
// ([Store.Idle]). Wake-ups are coalesced: the channel holds at
// most one pending value, and a burst of commits may give one value.
//
// It holds one dedicated connection (not from the pool, with the pool's
// connection settings and application_name "outbox-listen") for as long as
// ctx lives. If that connection is lost, it reconnects with backoff and then
// sends one wake-up, because notifications sent while it was away are lost.
// The channel is closed when ctx is done. The returned error is about the
// first connection only; later failures are logged to Config.Logger and
// retried.
//
// Before it returns, it sends a notification on the channel through the
// pool and waits up to [ListenProbeTimeout] for it on the listening
// connection (other relays listening on the schema wake once for it).
// Without it, it returns [ErrListenNotDelivered]: behind a pooler in
// transaction mode a LISTEN does not last beyond its own transaction.
func (s *Store) Notifications(ctx context.Context) (<-chan struct{}, error) {
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.probeListen(ctx, conn); err != nil {
		closeConn(conn)
		return nil, err
	}
	ch := make(chan struct{}, 1)
	go s.listenLoop(ctx, conn, ch)
	return ch, nil
}

// listen opens the dedicated connection and LISTENs on the store's channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: notifications: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("pgstore: notifications: listen on %s: %w", s.channel, err)
	}
	return conn, nil
}

// probeListen sends a notification with a random payload through the pool
// and waits for it on conn, which LISTENs on the store's channel.
func (s *Store) probeListen(ctx context.Context, conn *pgx.Conn) error {
	payload := "outbox-listen-probe " + uuid.NewString()
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", s.channel, payload); err != nil {
		return fmt.Errorf("pgstore: notifications: send probe on %s: %w", s.channel, ExplainPoolerError(err))
	}
	wctx, cancel := context.WithTimeout(ctx, ListenProbeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		switch {
		case err == nil && n.Payload == payload:
			return nil
		case err == nil: // an enqueue's, or another relay's probe
		case ctx.Err() == nil && wctx.Err() != nil:
			return fmt.Errorf("%w: none arrived within %s", ErrListenNotDelivered, ListenProbeTimeout)
		default:
			return fmt.Errorf("pgstore: notifications: wait for probe: %w", err)
		}
	}
}

// listenLoop turns notifications on conn into wake-ups on ch until ctx is
// done, reconnecting when the connection fails.
func (s *Store) listenLoop(ctx context.Context, conn *pgx.Conn, ch chan<- struct{}) {
	defer close(ch)
	for {
		_, err := conn.WaitForNotification(ctx)
		if err == nil {
			wake(ch)
			continue
		}
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		s.cfg.Logger.Warn("pgstore: listening connection lost; reconnecting",
			slog.String("schema", s.cfg.Schema), slog.Any("error", err))
		conn = s.reconnect(ctx)
		if conn == nil {
			return // ctx done
		}
		s.cfg.Logger.Info("pgstore: listening connection restored", slog.String("schema", s.cfg.Schema))
		// Notifications sent while the connection was down are lost.
		wake(ch)
	}
}

// reconnect retries listen with exponential backoff until it succeeds or
// ctx is done (then it returns nil).
func (s *Store) reconnect(ctx context.Context) *pgx.Conn {
	backoff := listenBackoffMin
	t := time.NewTimer(backoff)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		conn, err := s.listen(ctx)
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		backoff = min(2*backoff, listenBackoffMax)
		s.cfg.Logger.Warn("pgstore: reconnect of listening connection failed",
			slog.String("schema", s.cfg.Schema), slog.Duration("retry_in", backoff), slog.Any("error", err))
		t.Reset(backoff)
	}
}

// wake sends a wake-up unless one is already pending.
func wake(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// closeConn closes conn with a bounded wait, whatever state it is in.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx) // the connection is being dropped either way
}
