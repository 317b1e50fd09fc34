package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

type env struct {
	t      *testing.T
	pool   *pgxpool.Pool // on the test's schema, for the test's own statements
	store  *pgstore.Store
	schema string
	addrs  []string
	topic  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t)
	return &env{t: t, pool: pool, store: st, schema: schema, addrs: b.Addrs(), topic: "e2e." + schema}
}

// relayArgs are the flags of a relay process in this environment.
func (e *env) relayArgs(extra ...string) []string {
	return append([]string{"relay",
		"--database-url", pgtest.URL(), "--schema", e.schema,
		"--kafka-brokers", strings.Join(e.addrs, ","), "--default-topic", e.topic,
		"--kafka-auto-create-topics",
		"--lease", "2s", "--poll-interval", "100ms", "--retry-base", "50ms", "--retry-max", "200ms",
	}, extra...)
}

func (e *env) enqueue(msgs ...outbox.Message) {
	e.t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, msgs...) }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) status(id uuid.UUID) outbox.Record {
	e.t.Helper()
	rec, err := e.store.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

func (e *env) waitStatus(id uuid.UUID, want outbox.Status, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec := e.status(id)
		if rec.Status == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("message %s is %s after %s; want %s", id, rec.Status, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func oneMessage(t *testing.T) outbox.Message {
	return outbox.Message{ID: uuid.Must(uuid.NewV7()), AggregateType: "Order", AggregateID: "O-" + uuid.NewString()[:8],
		EventType: "OrderPlaced", Payload: []byte(`{"amount":"150.00"}`)}
}

// copies counts the records on the topic that carry the message's id: it
// reads until at least atLeast copies arrived (up to 30 s, so a slow start
// cannot fake a loss), then for settle more, so that an extra copy shows.
func (e *env) copies(id uuid.UUID, atLeast int, settle time.Duration) int {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addrs...), kgo.ConsumeTopics(e.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	var settleEnd time.Time
	for {
		now := time.Now()
		if n >= atLeast && settleEnd.IsZero() {
			settleEnd = now.Add(settle)
		}
		end := deadline
		if !settleEnd.IsZero() {
			end = settleEnd
		}
		if now.After(end) {
			return n
		}
		ctx, cancel := context.WithDeadline(context.Background(), end)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if header(r, "eventId") == id.String() {
				n++
			}
		})
	}
}

// Crash point 1: the relay dies after the claim, before sending. The
// message stays IN_FLIGHT until the lease expires, then a new relay sends
// it, once.
func TestCrash_AfterClaimBeforeSend_SentAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := oneMessage(t)
	e.enqueue(m)

	p1 := start(t, []string{"OUTBOX_FAILPOINT=relay-after-claim"}, e.relayArgs()...)
	p1.waitFor("FAILPOINT relay-after-claim", 30*time.Second)
	if rec := e.status(m.ID); rec.Status != outbox.StatusInFlight || rec.LeaseOwner == "" {
		t.Fatalf("at the crash point: %s owned by %q; want IN_FLIGHT with a lease", rec.Status, rec.LeaseOwner)
	}
	p1.kill()
	if n := e.copies(m.ID, 0, time.Second); n != 0 {
		t.Fatalf("%d copies on the topic before any send", n)
	}

	killedAt := time.Now()
	start(t, nil, e.relayArgs()...)
	e.waitStatus(m.ID, outbox.StatusSent, 30*time.Second)
	if n := e.copies(m.ID, 1, 2*time.Second); n != 1 {
		t.Fatalf("%d copies on the topic; want exactly 1", n)
	}
	t.Logf("resent %s after the kill (lease 2s)", time.Since(killedAt).Round(time.Millisecond))
}

// Crash point 2: the broker has the record but the relay dies before the
// SENT mark. The message is sent again: a duplicate, never a loss.
func TestCrash_AfterAckBeforeMark_SentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := oneMessage(t)
	e.enqueue(m)

	p1 := start(t, []string{"OUTBOX_FAILPOINT=relay-after-ack"}, e.relayArgs()...)
	p1.waitFor("FAILPOINT relay-after-ack", 30*time.Second)
	if n := e.copies(m.ID, 1, 0); n != 1 {
		t.Fatalf("at the crash point the broker has %d copies; want 1 (acked)", n)
	}
	if st := e.status(m.ID).Status; st != outbox.StatusInFlight {
		t.Fatalf("acked but unmarked message is %s; want IN_FLIGHT", st)
	}
	p1.kill()

	start(t, nil, e.relayArgs()...)
	e.waitStatus(m.ID, outbox.StatusSent, 30*time.Second)
	if n := e.copies(m.ID, 2, 2*time.Second); n != 2 {
		t.Fatalf("%d copies on the topic; want 2 (the first send and the redelivery)", n)
	}
}

// Crash point 3: the relay dies inside the mark transaction (UPDATE done,
// not committed). PostgreSQL rolls the mark back; the message is sent again.
func TestCrash_DuringMark_RolledBackAndSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := oneMessage(t)
	e.enqueue(m)

	p1 := start(t, []string{"OUTBOX_FAILPOINT=pgstore-mark-sent-before-commit"}, e.relayArgs()...)
	p1.waitFor("FAILPOINT pgstore-mark-sent-before-commit", 30*time.Second)
	if st := e.status(m.ID).Status; st != outbox.StatusInFlight {
		t.Fatalf("during the uncommitted mark the message is %s to others; want IN_FLIGHT", st)
	}
	p1.kill()

	start(t, nil, e.relayArgs()...)
	e.waitStatus(m.ID, outbox.StatusSent, 30*time.Second)
	if n := e.copies(m.ID, 2, 2*time.Second); n != 2 {
		t.Fatalf("%d copies on the topic; want 2", n)
	}
}

// SIGTERM: the relay finishes what it has, exits 0, and leaves nothing
// IN_FLIGHT.
func TestRelayProcess_SIGTERMExitsZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []uuid.UUID
	var msgs []outbox.Message
	for range 100 {
		m := oneMessage(t)
		ids = append(ids, m.ID)
		msgs = append(msgs, m)
	}
	e.enqueue(msgs...)
	p := start(t, nil, e.relayArgs()...)
	for _, id := range ids {
		e.waitStatus(id, outbox.StatusSent, 30*time.Second)
	}
	if code := p.stop(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; want 0\n%s", code, p.output())
	}
}
