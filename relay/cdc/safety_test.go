package cdc_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// newRelay starts a relay that the test stops or aborts itself.
func (e *env) newRelay(cfg cdc.Config) *cdc.Relay {
	e.t.Helper()
	r, err := cdc.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cdc.Abort(r); <-r.Stopped() })
	return r
}

func waitStopped(t *testing.T, r *cdc.Relay, within time.Duration) {
	t.Helper()
	select {
	case <-r.Stopped():
	case <-time.After(within):
		t.Fatalf("relay did not stop within %s", within)
	}
}

// The relay is killed (its replication connection cut, its publishes
// cancelled, nothing more marked) at random moments while eight writers
// commit 2,000 messages (five per transaction), and restarted each time.
// Every message arrives, and each aggregate's messages in order: a crash
// re-sends, never loses.
func TestKill_AtRandomPointsUnderLoad_NothingLostOrderKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	snk := e.newSink(nil)
	cfg := e.config(snk)
	cfg.BatchSize = 50
	// Report positions at once, so that a position confirmed too early
	// reaches the server before the kill.
	cfg.StatusInterval = 5 * time.Millisecond
	first := e.newRelay(cfg)
	e.waitLeader(first, 20*time.Second)
	cdc.Abort(first)
	waitStopped(t, first, 20*time.Second)

	wantCh := make(chan map[string]int, 1)
	go func() { wantCh <- e.writeConcurrently(8, 30, 2000, 5) }()
	var want map[string]int
	kills := 0
	for want == nil {
		r := e.newRelay(cfg)
		select {
		case want = <-wantCh:
		case <-time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond):
		}
		cdc.Abort(r)
		waitStopped(t, r, 20*time.Second)
		kills++
	}
	e.newRelay(cfg)
	recs := e.consumed(2000, 90*time.Second)
	dups := checkOrder(t, recs, want)
	t.Logf("%d kills, %d records, %d duplicates", kills, len(recs), dups)
	if kills < 2 {
		t.Fatalf("only %d kills under load; the test proves little", kills)
	}
}

// Two relays on one slot: one streams, the other waits as a standby. When
// the active one dies, the standby takes over and nothing is lost.
func TestStandby_TakesOverWhenTheActiveRelayDies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	cfg := e.config(e.newSink(nil))
	active := e.newRelay(cfg)
	e.waitLeader(active, 20*time.Second)
	standby := e.newRelay(cfg)
	time.Sleep(300 * time.Millisecond) // several of the standby's attempts
	if l, err := standby.Lag(context.Background()); err != nil || l.Leader {
		t.Fatalf("standby: lag %+v, %v; want a relay that is not the leader", l, err)
	}
	for n := range 50 {
		e.enqueue(seqMessage(fmtAgg(n%5), n/5))
	}
	e.consumed(50, 30*time.Second)

	cdc.Abort(active)
	for n := 50; n < 100; n++ {
		e.enqueue(seqMessage(fmtAgg(n%5), n/5))
	}
	e.waitLeader(standby, 20*time.Second)
	want := map[string]int{}
	for i := range 5 {
		want[fmtAgg(i)] = 20
	}
	checkOrder(t, e.consumed(100, 30*time.Second), want)
}

// While the outbox is idle and other tables write WAL, the slot's
// confirmed position keeps up (heartbeats), so the slot does not pin WAL;
// load after the idle period is delivered.
func TestIdleThenLoad_SlotKeepsUpWhileIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	cfg := e.config(e.newSink(nil))
	cfg.HeartbeatInterval = 200 * time.Millisecond
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	e.enqueue(seqMessage("x", 0))
	e.consumed(1, 30*time.Second)

	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE noise (id int); INSERT INTO noise SELECT generate_series(1, 5000)`); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := e.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	target, _ := pglogrepl.ParseLSN(s)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var c string
		if err := e.pool.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`,
			r.Slot()).Scan(&c); err != nil {
			t.Fatal(err)
		}
		confirmed, _ := pglogrepl.ParseLSN(c)
		if confirmed >= target {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle slot confirmed %s, behind %s after 15s: it pins WAL", confirmed, target)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Other tests write WAL meanwhile, which the relay receives and
	// confirms too: a single reading may catch it between the two (age
	// 1.6 ms in one CI run). Caught up means the age comes back to zero.
	for lagDeadline := time.Now().Add(5 * time.Second); ; {
		l, err := r.Lag(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l.Age == 0 && l.Leader && l.Active {
			break
		}
		if time.Now().After(lagDeadline) {
			t.Fatalf("idle lag %+v for 5s; want age 0 on the active leader", l)
		}
		time.Sleep(20 * time.Millisecond)
	}

	want := map[string]int{"x": 1}
	for n := range 20 {
		var msgs []outbox.Message
		for i := range 10 {
			msgs = append(msgs, seqMessage(fmtAgg(i), n))
			want[fmtAgg(i)]++
		}
		e.enqueue(msgs...)
	}
	checkOrder(t, e.consumed(201, 30*time.Second), want)
}

// A slot that was dropped (or invalidated) while the relay was away is
// never silently recreated: the relay stops with ErrSlotLost and an error
// that says how to recover. With RecreateSlot, a new slot is made and the
// messages still unsent in the table are delivered, in order.
func TestSlotLoss_FailsLoudlyAndRecreateRecovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	cfg := e.config(e.newSink(nil))
	r := e.newRelay(cfg)
	e.waitLeader(r, 20*time.Second)
	e.enqueue(seqMessage("x", 0))
	e.consumed(1, 30*time.Second)
	ctx := context.Background()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e.enqueue(seqMessage("x", 1), seqMessage("x", 2))
	// The server's walsender of the stopped relay may take a moment to
	// notice the closed connection; the slot can be dropped once inactive.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := e.pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, r.Slot())
		if err == nil {
			break
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) { // 55006: object in use
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	lost := e.newRelay(cfg)
	waitStopped(t, lost, 20*time.Second)
	err := lost.Err()
	if !errors.Is(err, cdc.ErrSlotLost) {
		t.Fatalf("relay stopped with %v; want ErrSlotLost", err)
	}
	for _, want := range []string{r.Slot(), "--recreate-slot", "docs/cdc.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %q", err, want)
		}
	}
	var slots int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, r.Slot()).Scan(&slots); err != nil || slots != 0 {
		t.Fatalf("%d slots (%v): the lost slot was recreated without RecreateSlot", slots, err)
	}
	if c := e.counts(); c[outbox.StatusPending] != 2 {
		t.Fatalf("counts %v; want the 2 unsent messages still PENDING", c)
	}

	cfg.RecreateSlot = true
	recovered := e.start(cfg)
	e.waitLeader(recovered, 20*time.Second)
	e.enqueue(seqMessage("x", 3))
	checkOrder(t, e.consumed(4, 30*time.Second), map[string]int{"x": 4})
}

// slowSink delays each publish call by up to max, so that batches pile up
// in the relay's pipeline.
type slowSink struct {
	sink.Sink
	max time.Duration
}

func (s slowSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	select {
	case <-time.After(time.Duration(rand.Int64N(int64(s.max)))):
	case <-ctx.Done():
	}
	return s.Sink.Publish(ctx, recs)
}

// The relay is killed at random moments while batches are in flight in
// its pipeline: a slow broker (each publish call takes up to 30 ms more)
// keeps several batches checked and being published, or acknowledged and
// awaiting their record, at once; and a tenth of the publishes of four of
// the 40 aggregates fail with a retriable error, so that those move to the
// table path while later messages of theirs are in flight in other
// batches. Every message
// arrives, each aggregate's messages in order, and kills do hit relays with
// two or more batches in flight.
func TestKill_WithBatchesInFlight_NothingLostOrderKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	fs := &faultySink{Sink: slowSink{Sink: e.newSink(nil), max: 30 * time.Millisecond}}
	fs.setFail(func(rec outbox.Record) error {
		// A few aggregates only, so that the table path (which sends every
		// unsent message of the aggregates it holds) cannot hide a loss in
		// the others.
		if rec.AggregateID < fmtAgg(4) && rand.IntN(10) == 0 {
			return errors.New("NOT_ENOUGH_REPLICAS (test)")
		}
		return nil
	})
	cfg := e.config(fs)
	cfg.BatchSize = 20
	cfg.MaxInFlight = 200
	cfg.StatusInterval = 5 * time.Millisecond
	first := e.newRelay(cfg)
	e.waitLeader(first, 20*time.Second)
	cdc.Abort(first)
	waitStopped(t, first, 20*time.Second)

	const total = 3000
	wantCh := make(chan map[string]int, 1)
	go func() { wantCh <- e.writeConcurrently(4, 40, total, 5) }()
	var want map[string]int
	kills, pipelined := 0, 0
	for want == nil {
		r := e.newRelay(cfg)
		select {
		case want = <-wantCh:
		case <-time.After(time.Duration(100+rand.IntN(300)) * time.Millisecond):
		}
		// Kill at the next moment with batches in flight, if one comes soon.
		for deadline := time.Now().Add(300 * time.Millisecond); cdc.BatchesInFlight(r) < 2 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if cdc.BatchesInFlight(r) >= 2 {
			pipelined++
		}
		cdc.Abort(r)
		waitStopped(t, r, 20*time.Second)
		kills++
	}
	e.newRelay(cfg)
	recs := e.consumed(total, 120*time.Second)
	dups := checkOrder(t, recs, want)
	t.Logf("%d kills, %d with two or more batches in flight, %d records, %d duplicates", kills, pipelined, len(recs), dups)
	if pipelined < 2 {
		t.Fatalf("only %d of %d kills hit a relay with two or more batches in flight; the test proves little", pipelined, kills)
	}
}

// The relay warns at start when max_slot_wal_keep_size is unlimited (a
// stopped relay would make PostgreSQL keep WAL until the disk is full), and
// only then.
func TestSetup_WarnsWhenSlotWALIsUnlimited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	var keep string
	if err := e.pool.QueryRow(context.Background(), `SELECT current_setting('max_slot_wal_keep_size')`).Scan(&keep); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cfg := e.config(e.newSink(nil))
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	warned := strings.Contains(logs.String(), "level=WARN msg=\"max_slot_wal_keep_size is unlimited")
	if unlimited := keep == "-1"; warned != unlimited {
		t.Fatalf("max_slot_wal_keep_size = %s: warned %v; want %v. Logs:\n%s", keep, warned, unlimited, logs.String())
	}
}

// A relay started before the migrations waits for them instead of
// stopping: it logs the missing tables with the fix once, not at every
// retry, and after Migrate (and the switch to CDC mode) it says so,
// streams and publishes, without a restart.
func TestSetup_UnmigratedSchema_WaitsAndGoesOnAfterMigrate(t *testing.T) {
	t.Parallel()
	e := newUnmigratedEnv(t, broker.Config{}, pgstore.Partitioning{})
	logs := &syncBuffer{}
	cfg := e.config(e.newSink(nil))
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r := e.start(cfg)

	fix := `no outbox tables in schema \"` + e.schema + `\": run 'outbox migrate --schema ` + e.schema + `'`
	waitOutput(t, logs, fix, 20*time.Second)
	time.Sleep(10 * cfg.StandbyInterval) // ten more tries
	select {
	case <-r.Stopped():
		t.Fatalf("the relay stopped: %v", r.Err())
	default:
	}
	if n := strings.Count(logs.String(), "outbox tables missing"); n != 1 {
		t.Fatalf("the missing tables are logged %d times, want once:\n%s", n, logs)
	}

	// The relay checks the mode once it found the tables: migrate and
	// switch to CDC mode while its setup waits.
	holdSetup := e.holdSetup(cfg)
	if err := e.store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.setMode(pgstore.ModeCDC)
	holdSetup()
	e.waitLeader(r, 20*time.Second)
	e.enqueue(seqMessage("a", 0))
	checkOrder(t, e.consumed(1, 20*time.Second), map[string]int{"a": 1})
	if n := strings.Count(logs.String(), "outbox tables found; the relay goes on"); n != 1 {
		t.Errorf("the recovery is logged %d times, want once:\n%s", n, logs)
	}
}
