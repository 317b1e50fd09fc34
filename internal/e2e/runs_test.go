package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// runsMaxRun is the relay's MaxRun in the tests of runs.
const runsMaxRun = 50

// runWatch is a sink.RunSink that passes every call on to the Kafka sink
// and records, per PublishRuns call, the records of each aggregate (their
// payloads' n), so that a test sees which runs the relay published.
type runWatch struct {
	sink.RunSink
	mu    sync.Mutex
	calls []map[string][]int // per PublishRuns call: aggregate -> n of its records, in order
}

func (w *runWatch) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	call := map[string][]int{}
	for _, rec := range recs {
		var p seqPayload
		_ = json.Unmarshal(rec.Payload, &p)
		call[rec.AggregateID] = append(call[rec.AggregateID], p.N)
	}
	w.mu.Lock()
	w.calls = append(w.calls, call)
	w.mu.Unlock()
	return w.RunSink.PublishRuns(ctx, recs)
}

// longestRun is the most records of agg that one PublishRuns call held.
func (w *runWatch) longestRun(agg string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	longest := 0
	for _, c := range w.calls {
		longest = max(longest, len(c[agg]))
	}
	return longest
}

// heldTogether reports whether one PublishRuns call held records n and
// n+1 of agg.
func (w *runWatch) heldTogether(agg string, n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.calls {
		if slices.Contains(c[agg], n) && slices.Contains(c[agg], n+1) {
			return true
		}
	}
	return false
}

// watchRuns returns the wrap for runRelay that puts w in front of the
// Kafka sink.
func watchRuns(w *runWatch) func(sink.Sink) sink.Sink {
	return func(s sink.Sink) sink.Sink {
		w.RunSink = s.(sink.RunSink)
		return w
	}
}

// hotBacklog is the messages of a backlog on one hot aggregate, "hot",
// with hot messages, and spread messages over 20 other aggregates; want
// is the count per aggregate.
func hotBacklog(hot, spread int) (msgs []outbox.Message, want map[string]int) {
	want = map[string]int{}
	for n := range hot {
		m := seqMessage("hot", n)
		m.ID = uuid.Must(uuid.NewV7())
		msgs = append(msgs, m)
		want["hot"]++
	}
	for i := range spread {
		agg := fmt.Sprintf("cold-%02d", i%20)
		msgs = append(msgs, seqMessage(agg, want[agg]))
		want[agg]++
	}
	return msgs, want
}

// drainsInRuns runs a claim-mode relay with MaxRun runsMaxRun over q and
// the Kafka sink, after enqueue put a backlog of 2,000 messages on one
// aggregate and 400 over 20 others in the outbox, and asserts that the
// backlog drains completely, in order without a gap per aggregate, and
// that the relay published the hot aggregate in runs of MaxRun.
func drainsInRuns(t *testing.T, q store.Queue, enqueue func([]outbox.Message)) {
	msgs, want := hotBacklog(2000, 400)
	enqueue(msgs)
	b := startBroker(t)
	topic := "runs." + uuid.NewString()[:8]
	w := &runWatch{}
	runRelay(t, q, b.Addrs(), topic, func(c *relay.Config) {
		c.MaxRun = runsMaxRun
		c.Lease = 30 * time.Second // no lease expires in this test: no copy is expected
	}, watchRuns(w))
	recs := consumed(t, b.Addrs(), topic, len(msgs), 120*time.Second)
	dups := checkOrder(t, recs, want)
	if dups != 0 {
		t.Errorf("%d duplicates on the topic; want none (nothing failed)", dups)
	}
	if got := w.longestRun("hot"); got != runsMaxRun {
		t.Fatalf("the longest run of the hot aggregate in one publish was %d messages; want MaxRun, %d", got, runsMaxRun)
	}
}

// With MaxRun 50 in claim mode over PostgreSQL, a backlog of 2,000
// messages on one aggregate, beside 400 over 20 others, drains
// completely; each aggregate's messages are on the topic in seq order
// without a gap, and the hot aggregate went out in runs of 50.
func TestRuns_Postgres_HotAggregateDrainsInRunsInOrder(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	drainsInRuns(t, st, func(msgs []outbox.Message) {
		ctx := context.Background()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
			t.Fatal(err)
		}
	})
}

// The same over SQLite.
func TestRuns_SQLite_HotAggregateDrainsInRunsInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlitestore.New(db, sqlitestore.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	drainsInRuns(t, st, func(msgs []outbox.Message) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if err := st.Enqueue(ctx, tx, msgs...); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	})
}

// A poison message (too large for the broker) in the middle of one
// aggregate's backlog, claimed and published in one run with the messages
// around it: those before it are published and SENT, it becomes a dead
// letter with the broker's reason, and those after it are given back
// unsent (PENDING, no attempt counted) and stay off the topic while it is
// dead, since a dead letter blocks its aggregate; other aggregates keep
// flowing, before and after the dead letter.
func TestRuns_PoisonInsideARun_FollowersStayBehindTheDeadLetter(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", MaxMessageBytes: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	topic := "runpoison." + schema
	e := &env{t: t, pool: pool, store: st, schema: schema, addrs: b.Addrs(), topic: topic}

	const poisonAt, hot = 20, 40
	var ids []uuid.UUID // of the hot aggregate "P", by n
	var msgs []outbox.Message
	for n := range hot {
		m := seqMessage("P", n)
		m.ID = uuid.Must(uuid.NewV7())
		if n == poisonAt {
			blob := make([]byte, 40_000) // random, so that compression cannot shrink it under the limit
			_, _ = rand.Read(blob)
			m.Payload = []byte(`{"aggregate":"P","n":` + strconv.Itoa(n) + `,"blob":"` + base64.StdEncoding.EncodeToString(blob) + `"}`)
		}
		ids = append(ids, m.ID)
		msgs = append(msgs, m)
	}
	want := map[string]int{"P": poisonAt}
	cold := func(round int) {
		for a := range 10 {
			agg := fmt.Sprintf("ok-%02d", a)
			msgs = append(msgs, seqMessage(agg, round))
			want[agg]++
		}
	}
	cold(0)
	e.enqueue(msgs...) // all there before the relay claims: the hot backlog goes out in one run
	w := &runWatch{}
	runRelay(t, st, b.Addrs(), topic, func(c *relay.Config) { c.MaxRun = runsMaxRun }, watchRuns(w))

	e.waitStatus(ids[poisonAt], outbox.StatusDeadLetter, 30*time.Second)
	dead := e.status(ids[poisonAt])
	if !strings.Contains(dead.LastError, "MESSAGE_TOO_LARGE") || dead.Attempts != 1 {
		t.Fatalf("dead letter: attempts %d, reason %q; want 1 attempt and the broker's MESSAGE_TOO_LARGE", dead.Attempts, dead.LastError)
	}
	if !w.heldTogether("P", poisonAt) {
		t.Fatalf("no publish held the poison with the message after it: the failure was not inside a run")
	}
	// Other aggregates keep flowing after the dead letter; once this round
	// is on the topic, the relay has claimed since the followers went back.
	msgs = nil
	cold(1)
	e.enqueue(msgs...)
	recs := consumed(t, b.Addrs(), topic, poisonAt+20, 30*time.Second)
	checkOrder(t, recs, want)
	for _, r := range recs {
		var p seqPayload
		if err := json.Unmarshal(r.Value, &p); err != nil {
			t.Fatal(err)
		}
		if p.Aggregate == "P" && p.N >= poisonAt {
			t.Fatalf("message %d of the poisoned aggregate is on the topic; nothing from %d on may be while %d is a dead letter", p.N, poisonAt, poisonAt)
		}
	}
	for n := range poisonAt {
		if got := e.status(ids[n]).Status; got != outbox.StatusSent {
			t.Errorf("message %d, before the poison, is %s; want SENT", n, got)
		}
	}
	for n := poisonAt + 1; n < hot; n++ {
		if rec := e.status(ids[n]); rec.Status != outbox.StatusPending || rec.Attempts != 0 {
			t.Errorf("message %d, after the poison, is %s with %d attempts; want PENDING with none (given back unsent)", n, rec.Status, rec.Attempts)
		}
	}
}

// The relay process dies (SIGKILL) right after the broker acknowledged a
// batch holding a run, before the mark; a second relay takes over after
// the lease: every message of the backlog is on the topic, the first
// deliveries in seq order, and the only copies are of the killed batch,
// one each.
func TestRuns_CrashAfterAckOfARun_OnlyThatRunIsSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	msgs, want := hotBacklog(200, 0)
	e.enqueue(msgs...)
	runFlags := []string{"--max-run", strconv.Itoa(runsMaxRun), "--workers", "1"}

	p1 := start(t, []string{"OUTBOX_FAILPOINT=relay-after-ack"}, e.relayArgs(runFlags...)...)
	p1.waitFor("FAILPOINT relay-after-ack", 30*time.Second)
	killed := e.inFlight(msgs)
	if len(killed) < 2 {
		t.Fatalf("at the crash point %d messages are in flight; want a run", len(killed))
	}
	acked := consumed(t, e.addrs, e.topic, len(killed), 30*time.Second)
	onTopic := map[string]bool{}
	for _, r := range acked {
		onTopic[header(r, "eventId")] = true
	}
	for id := range killed {
		if !onTopic[id] {
			t.Fatalf("at the crash point message %s is in flight but not on the topic; want the whole run acknowledged", id)
		}
	}
	p1.kill()

	start(t, nil, e.relayArgs(runFlags...)...)
	recs := consumed(t, e.addrs, e.topic, len(msgs), 60*time.Second)
	checkOrder(t, recs, want)
	copies := map[string]int{}
	for _, r := range recs {
		copies[header(r, "eventId")]++
	}
	for id, n := range copies {
		if wantN := map[bool]int{true: 2, false: 1}[killed[id]]; n != wantN {
			t.Errorf("message %s is on the topic %d times; want %d (in the killed batch: %t)", id, n, wantN, killed[id])
		}
	}
	t.Logf("killed batch: %d messages", len(killed))
}

// inFlight returns the ids of msgs that are IN_FLIGHT (leased).
func (e *env) inFlight(msgs []outbox.Message) map[string]bool {
	e.t.Helper()
	out := map[string]bool{}
	for _, m := range msgs {
		if e.status(m.ID).Status == outbox.StatusInFlight {
			out[m.ID.String()] = true
		}
	}
	return out
}
