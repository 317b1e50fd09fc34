package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/lifecycle"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/relay/modes"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// enqueueChunk is the number of messages per transaction when a backlog is
// loaded with Enqueue.
const enqueueChunk = 1000

// scenario is one migrated schema with the application's pool and store.
type scenario struct {
	r      *runner
	schema string
	pool   *pgxpool.Pool
	store  *pgstore.Store
	// cursor: the outbox is in cursor mode.
	cursor bool
}

// newScenario creates and migrates a fresh schema, with a pool of poolSize
// connections for the application side (writers, loads), with the outbox
// in the run's mode: cursor mode with cfg.Cursor, CDC mode when the CDC
// relay serves the live writes (cfg.Mode), else claim mode. Close drops
// it.
func (r *runner) newScenario(ctx context.Context, tag string, poolSize int32) (*scenario, error) {
	mode := pgstore.ModeClaim
	switch {
	case r.cfg.Cursor:
		mode = pgstore.ModeCursor
	case r.cfg.Mode != ModePolling: // the CDC relay serves the steady and latency phases
		mode = pgstore.ModeCDC
	}
	return r.newScenarioIn(ctx, tag, poolSize, mode)
}

// newScenarioIn is newScenario with the outbox in mode.
func (r *runner) newScenarioIn(ctx context.Context, tag string, poolSize int32, mode pgstore.Mode) (*scenario, error) {
	schema := newSchemaName(tag)
	pool, err := r.newPool(ctx, tag, poolSize, nil)
	if err != nil {
		return nil, err
	}
	s := &scenario{r: r, schema: schema, pool: pool, cursor: mode == pgstore.ModeCursor}
	st, err := r.newStore(pool, schema)
	if err == nil {
		s.store = st
		err = st.Migrate(ctx)
	}
	switch {
	case err != nil:
	case mode == pgstore.ModeCursor:
		err = st.EnableCursor(ctx)
	case mode == pgstore.ModeCDC:
		_, err = st.SetMode(ctx, pgstore.ModeCDC, "outbox bench")
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("set up schema %s: %w", schema, err)
	}
	return s, nil
}

// newStore returns a store on pool in schema, configured like cfg.Store.
func (r *runner) newStore(pool *pgxpool.Pool, schema string) (*pgstore.Store, error) {
	c := r.cfg.Store
	c.Schema = schema
	if c.Logger == nil {
		c.Logger = r.cfg.Logger
	}
	return pgstore.New(pool, c)
}

// close drops the schema and closes the pool, even after ctx ended.
func (s *scenario) close() {
	s.pool.Close()
	ctx, cancel := cleanupCtx()
	defer cancel()
	if _, err := s.r.admin.Exec(ctx, renderSQL("drop_schema.sql", s.schema)); err != nil {
		s.r.cfg.Logger.Warn("bench: drop schema", "schema", s.schema, "error", err)
	}
}

func (s *scenario) sql(name string) string { return renderSQL(name, s.schema) }

// exec runs an embedded SQL file on the scenario's pool.
func (s *scenario) exec(ctx context.Context, file string, args ...any) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.sql(file), args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", strings.TrimSuffix(file, ".sql"), err)
	}
	return tag.RowsAffected(), nil
}

// createOrders creates the writers' business table and primes the
// writers' connections.
func (s *scenario) createOrders(ctx context.Context) error {
	if _, err := s.exec(ctx, "create_orders.sql"); err != nil {
		return err
	}
	return s.prime(ctx)
}

// warmUp commits n messages one after the other, each in a business
// transaction, and waits until the relay has acknowledged them all. They are
// not measured: a relay that just started has used only the connection of
// its idle polls, and its other connections' backends pay for loading the
// outbox's catalog entries and preparing the relay's statements the first
// time; a relay that has been running has done that long ago.
func (s *scenario) warmUp(ctx context.Context, log *ackLog, n int) error {
	for range n {
		id := uuid.Must(uuid.NewV7())
		log.warmUp(id)
		if err := s.writeOrder(ctx, id); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return s.r.await(ctx, "warm-up", log.warmAcked.Load, int64(n), time.Now())
}

// prime opens every connection of the scenario's pool and runs one business
// transaction on each, rolled back, as an application's connections have
// done long before it is measured: otherwise the first second of a phase
// measures its writers connecting, preparing their statements and loading
// the tables' catalog entries into fresh backends (on the development
// machine 24 writers starting at once held up commits and the relay for
// about a second, 2% of a 10 s phase's messages), not the relay. The rolled
// back messages leave gaps in seq before the phase's first message.
func (s *scenario) prime(ctx context.Context) error {
	conns := make([]*pgxpool.Conn, 0, s.pool.Config().MaxConns)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("open the writers' connections: %w", err)
		}
		conns = append(conns, c)
	}
	insert := s.sql("insert_order.sql")
	for _, c := range conns {
		tx, err := c.Begin(ctx)
		if err != nil {
			return fmt.Errorf("prime a writer's connection: %w", err)
		}
		id := uuid.Must(uuid.NewV7())
		_, err = tx.Exec(ctx, insert, id, "c-42", "150.00")
		if err == nil {
			err = s.store.Enqueue(ctx, tx, s.r.message(id, id.String()))
		}
		if rerr := tx.Rollback(ctx); err == nil && rerr != nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("prime a writer's connection: %w", err)
		}
	}
	return nil
}

// message returns a benchmark message of the aggregate, with the
// configured payload size.
func (r *runner) message(id uuid.UUID, aggregateID string) outbox.Message {
	const head = `{"orderId":"%s","customerId":"c-42","amount":"150.00","currency":"EUR","pad":"`
	p := fmt.Sprintf(head, aggregateID)
	pad := max(r.cfg.PayloadBytes-len(p)-2, 0)
	p += strings.Repeat("x", pad) + `"}`
	return outbox.Message{
		ID: id, AggregateType: "Order", AggregateID: aggregateID, EventType: "OrderPlaced",
		Topic: r.cfg.Topic, Payload: []byte(p),
	}
}

// loadBacklog enqueues n messages, round robin over aggregates, in
// transactions of enqueueChunk messages, as an application would.
func (s *scenario) loadBacklog(ctx context.Context, n, aggregates int, label string) error {
	return s.loadBacklogOn(ctx, n, func(i int) int { return i % aggregates }, label)
}

// loadBacklogOn enqueues n messages, the i-th on aggregate number
// aggregateOf(i) (aggregate id "order-<number>"), in transactions of
// enqueueChunk messages, as an application would.
func (s *scenario) loadBacklogOn(ctx context.Context, n int, aggregateOf func(i int) int, label string) error {
	msgs := make([]outbox.Message, 0, enqueueChunk)
	last := time.Now()
	for i := 0; i < n; {
		msgs = msgs[:0]
		for ; i < n && len(msgs) < enqueueChunk; i++ {
			msgs = append(msgs, s.r.message(uuid.Nil, fmt.Sprintf("order-%d", aggregateOf(i))))
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.store.Enqueue(ctx, tx, msgs...) })
		if err != nil {
			return fmt.Errorf("load backlog: %w", err)
		}
		if time.Since(last) > time.Second {
			s.r.prog.printf("%s: enqueued %d of %d messages", label, i, n)
			last = time.Now()
		}
	}
	return nil
}

// analyze refreshes the planner's statistics of the outbox table, as
// autovacuum does on a live table. The drains run with fresh statistics, so
// that they measure the relay and not a plan made for an empty table (the
// claim phase measures that case on its own).
func (s *scenario) analyze(ctx context.Context) error {
	_, err := s.exec(ctx, "analyze.sql")
	return err
}

// vacuumEvery runs VACUUM (ANALYZE) on the outbox table every
// cfg.VacuumEvery until the returned stop is called; with VacuumEvery 0 it
// does nothing.
func (s *scenario) vacuumEvery(ctx context.Context) (stop func()) {
	d := s.r.cfg.VacuumEvery
	if d <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lifecycle.Every(ctx, d, func() bool {
			if _, err := s.r.admin.Exec(ctx, s.sql("vacuum.sql")); err != nil && ctx.Err() == nil {
				s.r.cfg.Logger.Warn("bench: vacuum", "schema", s.schema, "error", err)
			}
			return true
		})
	}()
	return func() { cancel(); <-done }
}

// writeOrder commits one business transaction: an order row and its
// OrderPlaced message with the given id, on the order's own aggregate.
func (s *scenario) writeOrder(ctx context.Context, id uuid.UUID) error {
	return s.writeOrderOn(ctx, id, "")
}

// writeOrderOn is writeOrder with the message on aggregateID ("": the
// order's own id).
func (s *scenario) writeOrderOn(ctx context.Context, id uuid.UUID, aggregateID string) error {
	insert := s.sql("insert_order.sql")
	if aggregateID == "" {
		aggregateID = id.String()
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insert, id, "c-42", "150.00"); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		return s.store.Enqueue(ctx, tx, s.r.message(id, aggregateID))
	})
}

// unsent returns the number of messages not yet sent.
func (s *scenario) unsent(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.sql("unsent.sql")).Scan(&n); err != nil {
		return 0, fmt.Errorf("count unsent: %w", err)
	}
	return n, nil
}

// checkAllSent fails unless the want messages of a drain are all sent: no
// message is left in any other status, and at most want are SENT (a store
// that deletes sent messages keeps none). In cursor mode the cursor's saved
// position may lag the acks by its save interval, so it looks again for a
// few seconds before it fails.
func (s *scenario) checkAllSent(ctx context.Context, want int64) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := s.checkAllSentOnce(ctx, want)
		if err == nil || !s.cursor || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *scenario) checkAllSentOnce(ctx context.Context, want int64) error {
	rows, err := s.pool.Query(ctx, s.sql("status_counts.sql"))
	if err != nil {
		return fmt.Errorf("status counts: %w", err)
	}
	var (
		status string
		n      int64
	)
	counts := map[string]int64{}
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error { counts[status] = n; return nil }); err != nil {
		return fmt.Errorf("status counts: %w", err)
	}
	sent := counts[string(outbox.StatusSent)]
	delete(counts, string(outbox.StatusSent))
	if len(counts) > 0 || sent > want {
		return fmt.Errorf("after the drain of %d messages, %d are SENT and others are %v", want, sent, counts)
	}
	return nil
}

// relayRun is an in-process relay with its own pool and Kafka client, as a
// separate relay process would have.
type relayRun struct {
	rl       *relay.Relay // nil for a CDC relay
	stopCDC  func()       // stops a CDC relay and drops its slot
	pool     *pgxpool.Pool
	sink     *kafka.Sink
	stopOnce sync.Once
}

// startServing starts the relay that serves live writes in the steady and
// latency phases: the polling relay, or the CDC relay in the CDC modes.
func (r *runner) startServing(ctx context.Context, s *scenario, id string, log *ackLog, hooks relay.Hooks, tweak func(*pgxpool.Config)) (*relayRun, error) {
	if r.cfg.Mode == ModePolling {
		return r.startRelay(ctx, s, id, log, hooks, tweak)
	}
	pool, err := r.newPool(ctx, "cdc relay "+id, 6, tweak)
	if err != nil {
		return nil, err
	}
	snk, err := r.newSink(id)
	if err != nil {
		pool.Close()
		return nil, err
	}
	cfg := cdc.Config{
		Pool: pool, Sink: withTimes(snk, log), Schema: s.schema, ID: id, Logger: r.cfg.Logger,
		Hooks: cdc.Hooks{Published: hooks.Published, Failed: hooks.Failed},
	}
	if r.cfg.Mode == ModeCDCDelete {
		cfg.Cleanup = cdc.CleanupDelete
	}
	cfg = cfg.WithDefaults()
	rl, err := cdc.New(cfg)
	if err != nil {
		snk.Close()
		pool.Close()
		return nil, fmt.Errorf("cdc relay %s: %w", id, err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- rl.Run(runCtx) }()
	stop := func() {
		cancel()
		<-done
		rctx, rcancel := cleanupCtx()
		defer rcancel()
		if err := cdc.Remove(rctx, r.admin, s.schema, cfg.Slot, cfg.Publication); err != nil {
			r.cfg.Logger.Warn("bench: remove the CDC slot", "slot", cfg.Slot, "error", err)
		}
	}
	// The relay is ready once its slot is active: writes before that would
	// not be in the stream.
	if err := r.waitSlotActive(ctx, cfg.Slot, done); err != nil {
		stop()
		snk.Close()
		pool.Close()
		return nil, fmt.Errorf("cdc relay %s: %w", id, err)
	}
	return &relayRun{stopCDC: stop, pool: pool, sink: snk}, nil
}

// waitSlotActive waits up to 30 s until a walsender streams from slot, or
// the relay whose Run reports to done has ended.
func (r *runner) waitSlotActive(ctx context.Context, slot string, done chan error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var active bool
		err := r.admin.QueryRow(ctx, "SELECT count(*) > 0 FROM pg_replication_slots WHERE slot_name = $1 AND active", slot).Scan(&active)
		if err == nil && active {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slot %s not active after 30 s", slot)
		}
		select {
		case err := <-done:
			done <- err // for stop
			return fmt.Errorf("stopped before streaming: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newSink returns a Kafka sink for the relay id.
func (r *runner) newSink(id string) (*kafka.Sink, error) {
	snk, err := kafka.New(kafka.Config{
		Brokers: r.brokers, ClientID: "outbox-bench-" + id, DefaultTopic: r.cfg.Topic,
		AllowAutoTopicCreation: true, Logger: r.cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return snk, nil
}

// startRelay starts a relay on the scenario's schema with the template
// cfg.Relay and hooks (called after the template's). log, if not nil, learns
// when the relay publishes each message; tweak, if not nil, adjusts the
// relay's pool configuration.
func (r *runner) startRelay(ctx context.Context, s *scenario, id string, log *ackLog, hooks relay.Hooks, tweak func(*pgxpool.Config)) (*relayRun, error) {
	rc := r.cfg.Relay
	// Like 'outbox relay': a connection per worker, one for LISTEN, one spare.
	pool, err := r.newPool(ctx, "relay "+id, int32(max(4, rc.Workers+2)), func(pc *pgxpool.Config) {
		pgstore.ConfigureRelayPool(pc)
		if tweak != nil {
			tweak(pc)
		}
	})
	if err != nil {
		return nil, err
	}
	st, err := r.newStore(pool, s.schema)
	if err != nil {
		pool.Close()
		return nil, err
	}
	snk, err := r.newSink(id)
	if err != nil {
		pool.Close()
		return nil, err
	}
	rc.Strategy, rc.Sink, rc.ID = modes.New(st, rc.Logger), withTimes(snk, log), id
	rc.Hooks = chainHooks(rc.Hooks, hooks)
	rl, err := relay.New(rc)
	if err == nil {
		err = rl.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		snk.Close()
		pool.Close()
		return nil, fmt.Errorf("relay %s: %w", id, err)
	}
	return &relayRun{rl: rl, pool: pool, sink: snk}, nil
}

// stop stops the relay gracefully and closes its connections. Calling it
// again does nothing.
func (rr *relayRun) stop() {
	rr.stopOnce.Do(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if rr.stopCDC != nil {
			rr.stopCDC()
		} else {
			_ = rr.rl.Stop(ctx) // a relay that cannot stop in time is abandoned
		}
		rr.sink.Close()
		rr.pool.Close()
	})
}

func stopAll(runs []*relayRun) {
	var wg sync.WaitGroup
	for _, rr := range runs {
		wg.Go(rr.stop)
	}
	wg.Wait()
}

// chainHooks returns hooks that call a's and then b's.
func chainHooks(a, b relay.Hooks) relay.Hooks {
	return relay.Hooks{
		Claimed: func(n int) {
			if a.Claimed != nil {
				a.Claimed(n)
			}
			if b.Claimed != nil {
				b.Claimed(n)
			}
		},
		Published: func(rec outbox.Record, d time.Duration) {
			if a.Published != nil {
				a.Published(rec, d)
			}
			if b.Published != nil {
				b.Published(rec, d)
			}
		},
		Failed: func(rec outbox.Record, err error, dead bool) {
			if a.Failed != nil {
				a.Failed(rec, err, dead)
			}
			if b.Failed != nil {
				b.Failed(rec, err, dead)
			}
		},
		Fenced: func(n int) {
			if a.Fenced != nil {
				a.Fenced(n)
			}
			if b.Fenced != nil {
				b.Fenced(n)
			}
		},
	}
}

// await waits until count() reaches want. It fails with errStalled when
// count does not change for StallTimeout, and reports progress every second.
func (r *runner) await(ctx context.Context, label string, count func() int64, want int64, started time.Time) error {
	_, err := r.awaitUntil(ctx, label, count, want, started, time.Time{})
	return err
}

// awaitUntil is await that also stops at deadline (none when zero). It
// reports whether count() reached want.
func (r *runner) awaitUntil(ctx context.Context, label string, count func() int64, want int64, started, deadline time.Time) (bool, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	last, lastChange, lastPrint := count(), time.Now(), time.Now()
	for {
		n := count()
		if n >= want {
			return true, nil
		}
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			return false, nil
		}
		if n != last {
			last, lastChange = n, now
		} else if now.Sub(lastChange) > r.cfg.StallTimeout {
			return false, fmt.Errorf("%s: %w for %s at %d of %d", label, errStalled, r.cfg.StallTimeout, n, want)
		}
		if now.Sub(lastPrint) >= time.Second {
			el := now.Sub(started).Seconds()
			r.prog.printf("%s: %d of %d (%s/s)", label, n, want, human(float64(n)/el))
			lastPrint = now
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// workMeter counts a relay's claims, claimed messages and round trips.
type workMeter struct {
	wire     wireCounter
	claims   atomic.Int64
	messages atomic.Int64
}

// hooks returns relay hooks that count claims, calling published too.
func (w *workMeter) hooks(published func(outbox.Record, time.Duration)) relay.Hooks {
	return relay.Hooks{
		Claimed: func(n int) {
			w.claims.Add(1)
			w.messages.Add(int64(n))
		},
		Published: published,
	}
}

// work reports the counts; acked is the number of messages they were for.
func (w *workMeter) work(acked int64) RelayWork {
	rw := RelayWork{Claims: w.claims.Load(), RoundTrips: w.wire.writes.Load()}
	rw.MessagesPerClaim = ratio(float64(w.messages.Load()), float64(rw.Claims))
	rw.RoundTripsPerMessage = ratio(float64(rw.RoundTrips), float64(acked))
	return rw
}

// ackLog records, per message id, when the writer's commit returned, when
// the relay handed the message to the broker client, when the broker
// acknowledged it and when the relay reported it marked SENT, for
// commit-to-ack latencies.
type ackLog struct {
	base    time.Time
	mu      sync.Mutex
	commits map[uuid.UUID]time.Duration
	// handed is when the relay handed the message to the sink (the first
	// time): the split between waiting to be read and being published.
	handed map[uuid.UUID]time.Duration
	// acked is when the sink's Publish returned without an error for the
	// message (the first time): the broker's acknowledgement.
	acked map[uuid.UUID]time.Duration
	// marked is when Hooks.Published reported the message marked SENT.
	marked map[uuid.UUID]time.Duration
	// warm holds the ids of warm-up messages (scenario.warmUp): not
	// measured, counted in warmAcked.
	warm      map[uuid.UUID]bool
	warmAcked atomic.Int64
	committed atomic.Int64
	published atomic.Int64
}

func newAckLog() *ackLog {
	return &ackLog{base: time.Now(), commits: map[uuid.UUID]time.Duration{}, handed: map[uuid.UUID]time.Duration{},
		acked: map[uuid.UUID]time.Duration{}, marked: map[uuid.UUID]time.Duration{}, warm: map[uuid.UUID]bool{}}
}

// warmUp marks message id as not measured: its times are not recorded, and
// its acknowledgement counts in warmAcked only. Call it before the message
// is committed.
func (l *ackLog) warmUp(id uuid.UUID) {
	l.mu.Lock()
	l.warm[id] = true
	l.mu.Unlock()
}

// commit records that the transaction with message id committed now.
func (l *ackLog) commit(id uuid.UUID) {
	at := time.Since(l.base)
	l.mu.Lock()
	l.commits[id] = at
	l.mu.Unlock()
	l.committed.Add(1)
}

// hook is a relay Hooks.Published.
func (l *ackLog) hook(rec outbox.Record, _ time.Duration) {
	at := time.Since(l.base)
	l.mu.Lock()
	if l.warm[rec.ID] {
		l.mu.Unlock()
		l.warmAcked.Add(1)
		return
	}
	if _, dup := l.marked[rec.ID]; !dup {
		l.marked[rec.ID] = at
	}
	l.mu.Unlock()
	l.published.Add(1)
}

// publishing records that the relay hands recs to its sink now.
func (l *ackLog) publishing(recs []outbox.Record) {
	l.record(l.handed, recs, nil)
}

// acknowledged records that the sink's Publish of recs returned now, with
// errs (nil, or one error per record).
func (l *ackLog) acknowledged(recs []outbox.Record, errs []error) {
	l.record(l.acked, recs, errs)
}

// record sets at[id] to now for each record of recs that is not a warm-up
// message, has no error in errs and has no time yet.
func (l *ackLog) record(at map[uuid.UUID]time.Duration, recs []outbox.Record, errs []error) {
	now := time.Since(l.base)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, rec := range recs {
		if l.warm[rec.ID] || (errs != nil && errs[i] != nil) {
			continue
		}
		if _, again := at[rec.ID]; !again {
			at[rec.ID] = now
		}
	}
}

// timedSink is a sink that tells an ackLog when the relay hands it
// records and when the broker acknowledged them.
type timedSink struct {
	sink.Sink
	log *ackLog
}

func (t timedSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	t.log.publishing(recs)
	errs := t.Sink.Publish(ctx, recs)
	t.log.acknowledged(recs, errs)
	return errs
}

// timedRunSink is a timedSink over a sink.RunSink, which it stays.
type timedRunSink struct {
	timedSink
	runs sink.RunSink
}

func (t timedRunSink) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	t.log.publishing(recs)
	errs := t.runs.PublishRuns(ctx, recs)
	t.log.acknowledged(recs, errs)
	return errs
}

// withTimes wraps snk in a timedSink when log is not nil (a timedRunSink
// when snk publishes runs).
func withTimes(snk sink.Sink, log *ackLog) sink.Sink {
	if log == nil {
		return snk
	}
	if runs, ok := snk.(sink.RunSink); ok {
		return timedRunSink{timedSink{snk, log}, runs}
	}
	return timedSink{snk, log}
}

// backlog is committed minus published.
func (l *ackLog) backlog() int64 { return l.committed.Load() - l.published.Load() }

// latency returns the latencies over the committed messages that were
// marked SENT, and how many were not. A time observed before the writer saw its commit return
// counts as zero. A message without an ack time (a relay started without
// the log) counts its mark as its ack, and one without a publish time
// counts in toAck and toMarked only.
func (l *ackLog) latency() Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out Delivery
	toAck := make([]time.Duration, 0, len(l.commits))
	toMarked := make([]time.Duration, 0, len(l.commits))
	var toPublish, publishToAck []time.Duration
	for id, c := range l.commits {
		m, ok := l.marked[id]
		if !ok {
			out.Unacked++
			continue
		}
		a, ok := l.acked[id]
		if !ok {
			a = m
		}
		toAck = append(toAck, max(a-c, 0))
		toMarked = append(toMarked, max(m-c, 0))
		if h, ok := l.handed[id]; ok {
			toPublish = append(toPublish, max(h-c, 0))
			publishToAck = append(publishToAck, max(a-h, 0))
		}
	}
	out.CommitToAck, out.CommitToMarked = latencyOf(toAck), latencyOf(toMarked)
	out.CommitToPublish, out.PublishToAck = latencyOf(toPublish), latencyOf(publishToAck)
	return out
}
