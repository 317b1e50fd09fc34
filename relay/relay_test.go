package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/claim"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// bundle is what most relay tests need: a migrated store in a fresh schema.
type bundle struct {
	pool   *pgxpool.Pool
	store  *pgstore.Store
	schema string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, store: st, schema: schema}
}

// enqueue commits msgs in one transaction.
func (b *bundle) enqueue(t testing.TB, msgs ...outbox.Message) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return b.store.Enqueue(ctx, tx, msgs...) })
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

func (b *bundle) get(t testing.TB, id uuid.UUID) outbox.Record {
	t.Helper()
	rec, err := b.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return rec
}

// eventually polls cond every 20ms until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func msg(aggID string, n int) outbox.Message {
	payload, _ := json.Marshal(map[string]any{"aggregate": aggID, "n": n})
	return outbox.Message{AggregateType: "Order", AggregateID: aggID, EventType: "OrderPlaced", Payload: payload}
}

// fakeSink lets a test decide each record's fate.
type fakeSink struct {
	mu        sync.Mutex
	calls     int
	published []outbox.Record
	fn        func(call int, rec outbox.Record) error // nil error = acked
}

func (f *fakeSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	errs := make([]error, len(recs))
	for i, rec := range recs {
		if f.fn != nil {
			errs[i] = f.fn(f.calls, rec)
		}
		if errs[i] == nil {
			f.published = append(f.published, rec)
		}
	}
	return errs
}

func (f *fakeSink) Close() error { return nil }

func (f *fakeSink) snapshot() (calls int, published []outbox.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, append([]outbox.Record(nil), f.published...)
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startRelay runs a relay for the rest of the test.
func startRelay(t *testing.T, cfg relay.Config) *relay.Relay {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		stopCtx, c := context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
		if err := r.Stop(stopCtx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return r
}

func fastConfig(b *bundle, s sink.Sink) relay.Config {
	return relay.Config{
		Store: b.store, Sink: s,
		PollInterval: 20 * time.Millisecond,
		RetryBase:    5 * time.Millisecond, RetryMax: 20 * time.Millisecond,
		Lease: 5 * time.Second,
	}
}

var errBrokerDown = errors.New("NOT_ENOUGH_REPLICAS: broker refused for now")

// From the reference order system's tests: a broker failure keeps the
// message retryable (FAILED, attempt counted, error kept, never SENT), and a
// later run sends it.
func TestRelay_BrokerFailureKeepsMessageRetryable_LaterRunSendsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg("O-2", 1)
	m.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, m)

	fail := make(chan struct{})
	s := &fakeSink{fn: func(_ int, _ outbox.Record) error {
		select {
		case <-fail:
			return nil
		default:
			return errBrokerDown
		}
	}}
	cfg := fastConfig(b, s)
	cfg.RetryBase, cfg.RetryMax = 200*time.Millisecond, 400*time.Millisecond
	startRelay(t, cfg)

	eventually(t, 5*time.Second, "message FAILED after a broker error", func() bool {
		rec := b.get(t, m.ID)
		return rec.Status == outbox.StatusFailed && rec.Attempts >= 1
	})
	rec := b.get(t, m.ID)
	if rec.LastError == "" || !rec.PublishedAt.IsZero() {
		t.Fatalf("failed message: last error %q, published at %v; want error kept, never published", rec.LastError, rec.PublishedAt)
	}
	if !rec.NextAttemptAt.After(rec.CreatedAt) {
		t.Fatalf("next attempt %v not after creation %v: no backoff", rec.NextAttemptAt, rec.CreatedAt)
	}
	close(fail)
	eventually(t, 5*time.Second, "message SENT after the broker recovered", func() bool {
		return b.get(t, m.ID).Status == outbox.StatusSent
	})
	if rec := b.get(t, m.ID); rec.PublishedAt.IsZero() {
		t.Fatal("SENT message has no published_at")
	}
}

// From the reference order system's tests: max attempts moves the message
// to DEAD_LETTER, with the last error kept, and the relay stops trying it.
func TestRelay_MaxAttemptsMovesToDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg("O-4", 1)
	m.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, m)
	s := &fakeSink{fn: func(int, outbox.Record) error { return errBrokerDown }}
	cfg := fastConfig(b, s)
	cfg.MaxAttempts = 3
	startRelay(t, cfg)

	eventually(t, 5*time.Second, "DEAD_LETTER after 3 attempts", func() bool {
		return b.get(t, m.ID).Status == outbox.StatusDeadLetter
	})
	rec := b.get(t, m.ID)
	if rec.Attempts != 3 || rec.LastError == "" {
		t.Fatalf("dead letter: attempts %d, last error %q; want 3 and the broker's error", rec.Attempts, rec.LastError)
	}
	calls, _ := s.snapshot()
	time.Sleep(300 * time.Millisecond) // several poll intervals
	if later, _ := s.snapshot(); later != calls {
		t.Fatalf("relay kept publishing a dead letter: %d calls, then %d", calls, later)
	}
}

// A permanent error dead-letters at once; the aggregate's later messages
// wait behind it while other aggregates flow.
func TestRelay_PermanentErrorDeadLettersAtOnce_BlocksOnlyItsAggregate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	poison := msg("A", 1)
	poison.ID = uuid.Must(uuid.NewV7())
	poison.EventType = "Poison"
	after := msg("A", 2)
	after.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, poison, after)
	var others []outbox.Message
	for i := range 20 {
		m := msg(fmt.Sprintf("B-%d", i), 1)
		m.ID = uuid.Must(uuid.NewV7())
		others = append(others, m)
	}
	b.enqueue(t, others...)
	s := &fakeSink{fn: func(_ int, rec outbox.Record) error {
		if rec.EventType == "Poison" {
			return fmt.Errorf("%w: MESSAGE_TOO_LARGE: the request included a message larger than the max", sink.ErrPermanent)
		}
		return nil
	}}
	startRelay(t, fastConfig(b, s))

	eventually(t, 5*time.Second, "poison dead-lettered and others sent", func() bool {
		if b.get(t, poison.ID).Status != outbox.StatusDeadLetter {
			return false
		}
		for _, m := range others {
			if b.get(t, m.ID).Status != outbox.StatusSent {
				return false
			}
		}
		return true
	})
	dead := b.get(t, poison.ID)
	if dead.Attempts != 1 || dead.LastError == "" {
		t.Fatalf("dead letter: attempts %d, error %q; want 1 attempt with the broker's reason", dead.Attempts, dead.LastError)
	}
	time.Sleep(200 * time.Millisecond)
	if st := b.get(t, after.ID).Status; st != outbox.StatusPending {
		t.Fatalf("message behind a dead letter is %s; want PENDING (blocked)", st)
	}
	_, published := s.snapshot()
	for _, rec := range published {
		if rec.ID == after.ID {
			t.Fatal("a message overtook the dead letter of its aggregate")
		}
	}
}

// Stop waits for acks up to ShutdownTimeout, then releases the leases of
// what was not acknowledged: the messages are PENDING again, not stuck
// IN_FLIGHT until the lease expires.
func TestRelay_StopReleasesUnsentLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg("S-1", 1)
	m.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, m)
	entered := make(chan struct{}, 1)
	s := blockingSink{entered: entered}
	cfg := fastConfig(b, s)
	cfg.Lease = time.Minute
	cfg.ShutdownTimeout = 300 * time.Millisecond
	cfg.Logger = testLogger(t)
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	if st := b.get(t, m.ID).Status; st != outbox.StatusInFlight {
		t.Fatalf("while publishing: %s, want IN_FLIGHT", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	rec := b.get(t, m.ID)
	if rec.Status != outbox.StatusPending || rec.LeaseOwner != "" || rec.Attempts != 0 {
		t.Fatalf("after stop: status %s owner %q attempts %d; want PENDING, no lease, no attempt counted", rec.Status, rec.LeaseOwner, rec.Attempts)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}

// blockingSink never acknowledges: it waits for its context.
type blockingSink struct{ entered chan struct{} }

func (s blockingSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	errs := make([]error, len(recs))
	for i := range errs {
		errs[i] = fmt.Errorf("%w: %w", sink.ErrUnavailable, ctx.Err())
	}
	return errs
}

func (blockingSink) Close() error { return nil }

// With a poll interval of an hour, only LISTEN/NOTIFY can deliver a new
// message quickly.
func TestRelay_WakesOnNotify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &fakeSink{}
	cfg := fastConfig(b, s)
	cfg.PollInterval = time.Hour
	startRelay(t, cfg)
	time.Sleep(200 * time.Millisecond) // let the first (empty) claim and LISTEN happen
	m := msg("N-1", 1)
	m.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, m)
	eventually(t, 10*time.Second, "notified relay sent the message", func() bool {
		return b.get(t, m.ID).Status == outbox.StatusSent
	})
}

// With LISTEN off the relay still delivers, by polling.
func TestRelay_WorksWithListenOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &fakeSink{}
	cfg := fastConfig(b, s)
	cfg.DisableListen = true
	cfg.PollInterval = 50 * time.Millisecond
	startRelay(t, cfg)
	m := msg("P-1", 1)
	m.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, m)
	eventually(t, 10*time.Second, "polling relay sent the message", func() bool {
		return b.get(t, m.ID).Status == outbox.StatusSent
	})
}

func TestNew_RejectsBadConfigNamingTheField(t *testing.T) {
	t.Parallel()
	s := &fakeSink{}
	cases := []struct {
		field string
		cfg   relay.Config
	}{
		{"Store/Strategy", relay.Config{Sink: s}},
		{"Store/Strategy", relay.Config{Store: nopQueue{}, Strategy: claim.New(nopQueue{}), Sink: s}},
		{"PublishTimeout", relay.Config{Store: nopQueue{}, Sink: s, Lease: 2 * time.Second, PublishTimeout: 3 * time.Second}},
		{"Lease", relay.Config{Store: nopQueue{}, Sink: s, Lease: 10 * time.Millisecond}},
		{"BatchSize", relay.Config{Store: nopQueue{}, Sink: s, BatchSize: -1}},
		{"Linger", relay.Config{Store: nopQueue{}, Sink: s, Lease: 2 * time.Second, Linger: time.Second}},
	}
	for _, c := range cases {
		_, err := relay.New(c.cfg)
		if !errors.Is(err, relay.ErrInvalidConfig) || !containsWord(err.Error(), c.field) {
			t.Errorf("%s: got %v; want ErrInvalidConfig naming %s", c.field, err, c.field)
		}
	}
}

// With Linger, a worker that published a batch smaller than BatchSize waits
// before its next claim, so that the messages that arrive meanwhile go out
// in one claim and one publish instead of one each.
func TestRelay_LingerGathersMessagesIntoOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &fakeSink{}
	startRelay(t, lingerConfig(b, s))
	first := publishOne(t, b, s, "L-0")
	// The relay lingers now, before marking the first message.
	if st := b.get(t, first).Status; st != outbox.StatusInFlight {
		t.Fatalf("first message %s right after its publish; want IN_FLIGHT while the relay lingers", st)
	}
	const n = 10
	for i := range n {
		b.enqueue(t, msg(fmt.Sprintf("L-%d", i+1), i+1))
	}
	eventually(t, 20*time.Second, "all messages published", func() bool {
		_, published := s.snapshot()
		return len(published) == n+1
	})
	calls, _ := s.snapshot()
	if calls != 2 {
		t.Fatalf("%d publishes for 1 + %d messages; want 2 (the %d enqueued while the relay lingered in one)", calls, n, n)
	}
	if st := b.get(t, first).Status; st != outbox.StatusSent {
		t.Fatalf("first message %s; want SENT after the linger", st)
	}
}

// With LingerAbove, a relay that claims fewer messages per second than that
// does not linger: a lone message is marked SENT at once, not a Linger later.
func TestRelay_LingerAboveARateNotReachedClaimsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &fakeSink{}
	cfg := lingerConfig(b, s)
	cfg.LingerAbove = 1e9
	startRelay(t, cfg)
	id := publishOne(t, b, s, "LA-1")
	eventually(t, time.Second, "the message marked SENT well before the linger would have ended", func() bool {
		return b.get(t, id).Status == outbox.StatusSent
	})
}

// A relay stopped while it lingers marks what it published at once: the
// message ends SENT, not released to be sent again, and Stop does not wait
// out the linger.
func TestRelay_StopDuringLingerMarksWhatWasSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &fakeSink{}
	cfg := lingerConfig(b, s)
	cfg.Logger = testLogger(t)
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := publishOne(t, b, s, "SL-1")
	if st := b.get(t, id).Status; st != outbox.StatusInFlight {
		t.Fatalf("status %s right after the publish; want IN_FLIGHT while the relay lingers", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopStart := time.Now()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if d := time.Since(stopStart); d >= cfg.Linger {
		t.Fatalf("Stop took %v: it waited out the %v linger", d, cfg.Linger)
	}
	if st := b.get(t, id).Status; st != outbox.StatusSent {
		t.Fatalf("status %s after Stop; want SENT (published before the stop)", st)
	}
	if calls, _ := s.snapshot(); calls != 1 {
		t.Fatalf("%d publishes; want 1", calls)
	}
}

// lingerConfig is fastConfig with one worker that lingers 2 s at any rate.
func lingerConfig(b *bundle, s *fakeSink) relay.Config {
	cfg := fastConfig(b, s)
	cfg.Workers = 1
	cfg.Linger = 2 * time.Second
	cfg.LingerAbove = -1
	return cfg
}

// publishOne enqueues one message of aggregate aggID and waits for the
// sink's first publish; it returns the message's id.
func publishOne(t *testing.T, b *bundle, s *fakeSink, aggID string) uuid.UUID {
	t.Helper()
	m := msg(aggID, 0)
	m.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, m)
	eventually(t, 10*time.Second, "the first message was published", func() bool {
		calls, _ := s.snapshot()
		return calls == 1
	})
	return m.ID
}

// insertUnchecked writes a message of aggregate aggID with plain SQL, with
// headers as given, in a transaction whose session_replication_role is
// replica: the table's triggers, migration 015's rule among them, do not
// run for it (the tests run as a superuser), as for a row written before
// that migration. It takes its transaction id first, as migration 012's
// trigger would have it do.
func (b *bundle) insertUnchecked(t *testing.T, aggID, headers string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7())
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		for _, st := range []string{"SELECT pg_current_xact_id()", "SET LOCAL session_replication_role = replica"} {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{b.schema, "outbox_messages"}.Sanitize()+`
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
			VALUES ($1, 'Order', $2, 'OrderPlaced', 1, '{"n":0}', 'application/json', $3::jsonb)`, id, aggID, headers)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A claimed record the store could not read whole (Record.Invalid: a row
// whose headers are not a JSON object of string values) never reaches the
// sink: it is dead-lettered at once with the column and the rule, as a
// permanent failure (Hooks.Failed says so), while the rest of its batch is
// published; the message behind it waits.
func TestRelay_InvalidRecordIsDeadLetteredWithoutReachingTheSink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good := msg("A", 1)
	good.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, good)
	bad := b.insertUnchecked(t, "B", `{"x": 1}`)
	behind := msg("B", 2)
	behind.ID = uuid.Must(uuid.NewV7())
	b.enqueue(t, behind)

	var sawBad atomic.Bool
	s := &fakeSink{fn: func(_ int, rec outbox.Record) error {
		if rec.ID == bad {
			sawBad.Store(true)
		}
		return nil
	}}
	failed := make(chan error, 10)
	cfg := fastConfig(b, s)
	cfg.Hooks.Failed = func(rec outbox.Record, err error, dead bool) {
		if rec.ID == bad && dead {
			failed <- err
		}
	}
	startRelay(t, cfg)

	eventually(t, 5*time.Second, "bad row dead-lettered and the good one sent", func() bool {
		return b.get(t, bad).Status == outbox.StatusDeadLetter && b.get(t, good.ID).Status == outbox.StatusSent
	})
	dead := b.get(t, bad)
	want := `outbox: invalid message: headers["x"]: value must be a string, is a number`
	if !strings.Contains(dead.LastError, want) || dead.Attempts != 1 {
		t.Errorf("dead letter: attempts %d, reason %q; want 1 attempt and a reason with %q", dead.Attempts, dead.LastError, want)
	}
	select {
	case err := <-failed:
		if !errors.Is(err, sink.ErrPermanent) || !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Errorf("Hooks.Failed got %v; want a permanent error wrapping outbox.ErrInvalidMessage", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Hooks.Failed was not called for the dead letter")
	}
	time.Sleep(200 * time.Millisecond)
	if st := b.get(t, behind.ID).Status; st != outbox.StatusPending {
		t.Errorf("message behind the dead letter is %s; want PENDING (blocked)", st)
	}
	if sawBad.Load() {
		t.Error("the sink was given the invalid record")
	}
}
