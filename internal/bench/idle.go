package bench

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
)

// idleWarmUp is how long the idle relay runs before counting starts, so
// that connecting, LISTEN and the first claims are not counted.
const idleWarmUp = 2 * time.Second

// idleWarmUpFor is idleWarmUp, and in cursor mode long enough for the
// leader's first lease renewal (due when a third of the lease has passed)
// to have happened too. The first time a connection runs a statement pgx
// prepares it in a round trip of its own; the renewal is the one idle
// statement that first runs 10 s (a third of the default lease) in, and
// counting that one-off round trip would measure the start, not the idle
// cost. Later renewals (every 10 s, one of them inside the window) ride in
// a poll's round trip. Measured: 12-13 round trips in 10 s with 2 s of
// warm-up, 10 with this.
func idleWarmUpFor(cfg Config) time.Duration {
	if !cfg.Cursor {
		return idleWarmUp
	}
	lease := cfg.Relay.Lease
	if lease <= 0 {
		lease = relay.DefaultLease
	}
	return max(idleWarmUp, lease/3+3*time.Second) // + start-up and a poll interval
}

// idleTraffic is how many messages the idle phase's relay publishes before
// it becomes idle.
const idleTraffic = 1000

// runIdle starts a relay, has it publish idleTraffic messages, and then
// counts, over cfg.IdleWindow while nothing is enqueued, the statements it
// runs and the writes it makes to its database connections (pool and
// LISTEN connection both). An idle relay in production has published
// before, and what it does while idle depends on that: in claim mode its
// claims start at a claim floor above seq 0, which an outbox that never
// had a message does not give it.
func (r *runner) runIdle(ctx context.Context, rep *Report) error {
	s, err := r.newScenario(ctx, "idle", 2)
	if err != nil {
		return err
	}
	defer s.close()
	var (
		c         wireCounter
		published atomic.Int64
	)
	hooks := relay.Hooks{Published: func(outbox.Record, time.Duration) { published.Add(1) }}
	rr, err := r.startRelay(ctx, s, "bench-idle", nil, hooks, c.instrument)
	if err != nil {
		return err
	}
	defer rr.stop()
	const label = "idle: traffic before"
	if err := s.loadBacklog(ctx, idleTraffic, idleTraffic, label); err != nil {
		return err
	}
	if err := r.await(ctx, label, published.Load, idleTraffic, time.Now()); err != nil {
		return err
	}
	warm := idleWarmUpFor(r.cfg)
	r.prog.printf("warming up for %s", warm)
	if err := sleepCtx(ctx, warm); err != nil {
		return err
	}
	stmts0, writes0 := c.statements.Load(), c.writes.Load()
	start := time.Now()
	r.prog.printf("counting queries for %s", r.cfg.IdleWindow)
	if err := sleepCtx(ctx, r.cfg.IdleWindow); err != nil {
		return err
	}
	stmts, writes := c.statements.Load()-stmts0, c.writes.Load()-writes0
	window := time.Since(start).Seconds()
	rep.Idle = &IdleReport{
		WindowSeconds: window,
		Statements:    stmts, StatementsPerSecond: float64(stmts) / window,
		RoundTrips: writes, RoundTripsPerSecond: float64(writes) / window,
	}
	return nil
}

// wireCounter counts what a pool sends: statements, through a pgx
// QueryTracer and BatchTracer, and socket writes, through a wrapped DialFunc. Both carry
// over to the LISTEN connection, which pgstore opens with a copy of the
// pool's connection configuration.
type wireCounter struct {
	statements atomic.Int64
	writes     atomic.Int64
}

// instrument adds the counters to a pool configuration.
func (c *wireCounter) instrument(pc *pgxpool.Config) {
	pc.ConnConfig.Tracer = statementTracer{&c.statements}
	dial := pc.ConnConfig.DialFunc
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, writes: &c.writes}, nil
	}
}

type statementTracer struct{ n *atomic.Int64 }

func (t statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	return ctx
}

func (statementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The statements of a pgx batch (pgstore sends the relay's claims and marks
// as batches, several statements in one round trip) count one each.

func (statementTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (t statementTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	t.n.Add(1)
}

func (statementTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countingConn counts Write calls: pgx writes each request (a statement,
// a ping, a sync) with one call, TLS or not.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
