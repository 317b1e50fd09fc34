package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The crash cases of cursor mode (pgstore EnableCursor) with real relay
// processes: one leads the cursor, the other stands by, and the leader is
// killed, stopped or cut off from the database while messages flow.

// newCursorEnv is newEnv with the outbox in cursor mode.
func newCursorEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	if err := e.store.EnableCursor(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// appName is the application_name of the connections of this test's
// relay id: the id alone would also name the relays of tests running in
// parallel (and a test that terminates its relay's connections would
// terminate theirs), so it ends with this test's schema.
func (e *env) appName(id string) string { return id + "-" + e.schema }

// cursorRelay starts a relay process named id; its connections carry
// application_name e.appName(id), so that a test can find them.
func (e *env) cursorRelay(id string, env []string, extra ...string) *proc {
	e.t.Helper()
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		e.t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", e.appName(id))
	u.RawQuery = q.Encode()
	args := append(e.relayArgs("--relay-id", id), extra...)
	for i, a := range args {
		if a == "--database-url" {
			args[i+1] = u.String()
		}
	}
	p := start(e.t, env, args...)
	p.waitFor("relay starting", 30*time.Second)
	return p
}

// leads reports whether the process logged that it leads the cursor.
func (p *proc) leads() bool { return strings.Contains(p.output(), "cursor: leading the cursor") }

// waitLeads waits until the process leads the cursor.
func (p *proc) waitLeads(within time.Duration) {
	p.t.Helper()
	p.waitFor("cursor: leading the cursor", within)
}

// cursorPosition is the position saved in outbox_cursor.
func (e *env) cursorPosition() int64 {
	e.t.Helper()
	var pos int64
	if err := e.pool.QueryRow(context.Background(), "SELECT position FROM outbox_cursor").Scan(&pos); err != nil {
		e.t.Fatal(err)
	}
	return pos
}

// enqueueRounds enqueues perAggregate rounds of one event of each of
// aggregates aggregates, a transaction per round, and returns how many
// events each aggregate has (their n run from 0) and the total.
func (e *env) enqueueRounds(aggregates, perAggregate int) (want map[string]int, total int) {
	e.t.Helper()
	want = map[string]int{}
	for n := range perAggregate {
		var batch []outbox.Message
		for a := range aggregates {
			agg := fmt.Sprintf("agg-%03d", a)
			batch = append(batch, seqMessage(agg, n))
			want[agg]++
		}
		e.enqueue(batch...)
	}
	return want, aggregates * perAggregate
}

// waitPositionAtLastSeq waits until the saved position passed every
// message.
func (e *env) waitPositionAtLastSeq(within time.Duration) {
	e.t.Helper()
	var last int64
	if err := e.pool.QueryRow(context.Background(), "SELECT max(seq) FROM outbox_messages").Scan(&last); err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(within)
	for pos := e.cursorPosition(); pos < last; pos = e.cursorPosition() {
		if time.Now().After(deadline) {
			e.t.Fatalf("saved position %d after %s, want the last seq %d", pos, within, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// allRecords reads the topic from the start until it has records of want
// distinct events and then nothing new arrives for a second.
func (e *env) allRecords(want int) []*kgo.Record {
	e.t.Helper()
	recs := consumed(e.t, e.addrs, e.topic, want, 60*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addrs...), kgo.ConsumeTopics(e.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	var all []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := len(all)
		fs.EachRecord(func(r *kgo.Record) { all = append(all, r) })
		if len(all) == n && len(all) >= len(recs) {
			return all
		}
	}
}

// writer enqueues one event of each of aggregates per transaction, every
// gap, from its start until stop returns; want counts each aggregate's
// events (their n run from 0).
type writer struct {
	e    *env
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	want map[string]int
}

func (e *env) startWriter(aggregates int, gap time.Duration) *writer {
	w := &writer{e: e, done: make(chan struct{}), want: map[string]int{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-w.done:
				return
			case <-time.After(gap):
			}
			w.mu.Lock()
			var batch []outbox.Message
			for a := range aggregates {
				agg := fmt.Sprintf("w-%02d", a)
				batch = append(batch, seqMessage(agg, w.want[agg]))
			}
			w.mu.Unlock()
			w.e.enqueue(batch...)
			w.mu.Lock()
			for _, m := range batch {
				w.want[m.AggregateID]++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// stop ends the writer and returns what it committed.
func (w *writer) stop() (want map[string]int, total int) {
	close(w.done)
	w.wg.Wait()
	for _, n := range w.want {
		total += n
	}
	return w.want, total
}

// leaderCrash runs a leader, A, until it reaches the failpoint, and a
// standby, B; then kills A and checks that B leads once A's lease ran out,
// from the saved position, sends again everything A had sent above it,
// and that nothing is lost and the first copies of each aggregate's events
// are in order. atPoint runs while A waits at the failpoint.
func leaderCrash(t *testing.T, point string, atPoint func(e *env)) {
	e := newCursorEnv(t)
	want, total := e.enqueueRounds(30, 6)

	// Batches of 10 hold 10 aggregates each, so that A's two workers both
	// have work.
	const lease = 5 * time.Second
	a := e.cursorRelay("A", []string{"OUTBOX_FAILPOINT=" + point}, "--batch-size", "10", "--lease", lease.String())
	a.waitFor("FAILPOINT "+point, 30*time.Second)
	if !a.leads() {
		t.Fatalf("A reached the failpoint without leading:\n%s", a.output())
	}
	b := e.cursorRelay("B", nil, "--lease", lease.String())
	time.Sleep(500 * time.Millisecond)
	if atPoint != nil {
		atPoint(e)
	}
	before := consumed(t, e.addrs, e.topic, total, 500*time.Millisecond) // what the broker has from A
	if b.leads() {
		t.Fatalf("B leads while A holds the lease:\n%s", b.output())
	}
	a.kill()
	killed := time.Now()
	time.Sleep(200 * time.Millisecond) // the server ends A's sessions
	saved := e.cursorPosition()
	b.waitLeads(3 * lease)
	t.Logf("B leads %s after the kill (lease %s), from the saved position %d; A had sent %d records",
		time.Since(killed).Round(time.Millisecond), lease, saved, len(before))

	// Once B's position passed every message, the broker has all B sent.
	e.waitPositionAtLastSeq(30 * time.Second)
	recs := e.allRecords(total)
	dups := checkOrder(t, recs, want)
	copies := map[string]int{}
	for _, r := range recs {
		copies[header(r, "eventId")]++
	}
	resent := 0
	for _, r := range before {
		id := header(r, "eventId")
		if e.status(uuid.MustParse(id)).Seq <= saved {
			continue
		}
		if copies[id] < 2 {
			t.Errorf("event %s was sent by A above the saved position %d, but not again by B", id, saved)
		}
		resent++
	}
	if resent == 0 {
		t.Errorf("A had sent nothing above the saved position %d before the kill", saved)
	}
	t.Logf("%d records for %d messages (%d duplicates, %d of A's sends above the saved position)", len(recs), total, dups, resent)
}

// The leader dies after the broker acknowledged a batch and before its
// position passed it: the standby sends the batch again.
func TestCursorCrash_AfterAckBeforeSave_StandbyResendsAndLosesNothing(t *testing.T) {
	t.Parallel()
	leaderCrash(t, "relay-after-ack", nil)
}

// The leader dies inside the transaction that saves its position (the
// UPDATE done, not committed): PostgreSQL rolls the save back, and the
// standby starts from the position saved before and sends again what A
// acknowledged since.
func TestCursorCrash_DuringSave_RolledBackAndTheStandbyResends(t *testing.T) {
	t.Parallel()
	var during int64
	leaderCrash(t, "pgstore-cursor-save-before-commit", func(e *env) {
		during = e.cursorPosition()
		if during != 0 {
			t.Errorf("while A's save is not committed, others see the position %d, want the one from before, 0", during)
		}
	})
}

// SIGTERM on the leader: it resigns, and the standby publishes within
// moments, not after the lease (10 s here). Nothing is lost, the order of
// each aggregate holds.
func TestCursorRelay_SIGTERMHandsTheLeadToTheStandbyAtOnce(t *testing.T) {
	t.Parallel()
	e := newCursorEnv(t)
	const lease = 10 * time.Second
	a := e.cursorRelay("A", nil, "--lease", lease.String())
	w := e.startWriter(5, 20*time.Millisecond)
	a.waitLeads(30 * time.Second)
	b := e.cursorRelay("B", nil, "--lease", lease.String())
	time.Sleep(time.Second)

	if code := a.stop(20 * time.Second); code != 0 {
		t.Fatalf("A exited %d after SIGTERM:\n%s", code, a.output())
	}
	stopped := time.Now()
	if !strings.Contains(a.output(), "cursor: resigned the lead") {
		t.Errorf("A did not resign:\n%s", a.output())
	}
	probe := seqMessage("probe", 0)
	probe.ID = uuid.Must(uuid.NewV7())
	e.enqueue(probe)
	if n := e.copies(probe.ID, 1, 0); n != 1 {
		t.Fatalf("the message enqueued after A stopped: %d copies", n)
	}
	if took := time.Since(stopped); took > lease/3 {
		t.Errorf("the standby published %s after the leader stopped; want well under the lease of %s", took, lease)
	} else {
		t.Logf("the standby published %s after the leader stopped (lease %s)", took.Round(time.Millisecond), lease)
	}
	if !b.leads() {
		t.Errorf("B does not lead:\n%s", b.output())
	}
	time.Sleep(time.Second)
	want, total := w.stop()
	want[probe.AggregateID] = 1
	recs := consumed(t, e.addrs, e.topic, total+1, 60*time.Second)
	dups := checkOrder(t, recs, want)
	e.waitPositionAtLastSeq(10 * time.Second)
	t.Logf("%d records for %d messages (%d duplicates)", len(recs), total+1, dups)
}

// The leader's database connections are terminated again and again while
// messages flow: its round trips fail and are retried, it may lose the
// lead to the standby and take it back; nothing is lost, the order of
// each aggregate holds.
func TestCursorRelay_LeaderConnectionsTerminatedLoseNothing(t *testing.T) {
	t.Parallel()
	e := newCursorEnv(t)
	a := e.cursorRelay("A", nil)
	w := e.startWriter(5, 20*time.Millisecond)
	a.waitLeads(30 * time.Second)
	b := e.cursorRelay("B", nil)

	terminated := 0
	for range 8 {
		time.Sleep(500 * time.Millisecond)
		var n int
		err := e.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) k", e.appName("A")).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		terminated += n
	}
	if terminated == 0 {
		t.Fatal("no connection of A was terminated")
	}
	time.Sleep(time.Second)
	want, total := w.stop()
	recs := consumed(t, e.addrs, e.topic, total, 60*time.Second)
	dups := checkOrder(t, recs, want)
	e.waitPositionAtLastSeq(10 * time.Second)
	t.Logf("%d connections terminated; %d records for %d messages (%d duplicates); A led %d times, B %d times; A reported %d fenced batches",
		terminated, len(recs), total, dups, strings.Count(a.output(), "leading the cursor"), strings.Count(b.output(), "leading the cursor"),
		strings.Count(a.output(), "lease was taken over"))
}

// cursorLease is the cursor row's lease holder and position.
func (e *env) cursorLease() (owner, token string, pos int64) {
	e.t.Helper()
	var o, tok *string
	if err := e.pool.QueryRow(context.Background(),
		"SELECT lease_owner, lease_token::text, position FROM outbox_cursor").Scan(&o, &tok, &pos); err != nil {
		e.t.Fatal(err)
	}
	if o != nil {
		owner = *o
	}
	if tok != nil {
		token = *tok
	}
	return owner, token, pos
}

// recordCursorWrites makes the database record, in the table
// cursor_writes of the test's schema, every change that the cursor's
// writes make, with the application_name of the connection that made it
// (e.appName of a relay): each change of the cursor row (a lead taken, a
// save, a renewal, a resignation), with the lease holder after it and the
// position before and after; and each QUEUED message that leaves the
// cursor for the table path (cursor_table.sql, a failed cursor message).
// A write that the lease token fences changes no row and records nothing.
func (e *env) recordCursorWrites() {
	e.t.Helper()
	q := pgx.Identifier{e.schema}.Sanitize()
	for _, sql := range []string{
		`CREATE TABLE ` + q + `.cursor_writes (
			id bigserial PRIMARY KEY,
			app text NOT NULL,
			what text NOT NULL,
			lease_owner text,
			pos_before bigint,
			pos_after bigint,
			seq bigint)`,
		`CREATE FUNCTION ` + q + `.record_cursor_write() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO ` + q + `.cursor_writes (app, what, lease_owner, pos_before, pos_after)
			VALUES (current_setting('application_name'), 'cursor', NEW.lease_owner, OLD.position, NEW.position);
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER record_cursor_write AFTER UPDATE ON ` + q + `.outbox_cursor
			FOR EACH ROW EXECUTE FUNCTION ` + q + `.record_cursor_write()`,
		`CREATE FUNCTION ` + q + `.record_tabled() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO ` + q + `.cursor_writes (app, what, seq)
			VALUES (current_setting('application_name'), 'tabled ' || NEW.status, NEW.seq);
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER record_tabled AFTER UPDATE OF status ON ` + q + `.outbox_messages
			FOR EACH ROW WHEN (OLD.status = 'QUEUED' AND NEW.status <> 'QUEUED')
			EXECUTE FUNCTION ` + q + `.record_tabled()`,
	} {
		if _, err := e.pool.Exec(context.Background(), sql); err != nil {
			e.t.Fatal(err)
		}
	}
}

// cursorWrite is a row of cursor_writes.
type cursorWrite struct {
	id                  int64
	app, what, owner    string
	posBefore, posAfter int64
	seq                 int64
}

func (w cursorWrite) String() string {
	return fmt.Sprintf("#%d %s by %s (lease %q, position %d -> %d, seq %d)", w.id, w.what, w.app, w.owner, w.posBefore, w.posAfter, w.seq)
}

// cursorWrites returns what recordCursorWrites recorded, in order.
func (e *env) cursorWrites() []cursorWrite {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id, app, what, coalesce(lease_owner, ''),
		coalesce(pos_before, 0), coalesce(pos_after, 0), coalesce(seq, 0) FROM cursor_writes ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (cursorWrite, error) {
		var w cursorWrite
		err := r.Scan(&w.id, &w.app, &w.what, &w.owner, &w.posBefore, &w.posAfter, &w.seq)
		return w, err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ws
}

// The leader's process hangs (SIGSTOP) while writers commit: the standby
// leads within the leader's lease (pgstore.DefaultLeaderLease, not the
// claims' lease of 30 s) and publishes what came next. When the old leader
// resumes (SIGCONT), it writes nothing to the cursor: from the standby's
// takeover on, no change of the cursor row (position, saved_at, handled
// ranges, lease) and no QUEUED message moved to the table path comes from
// its connections, the lease passed from A to B once, and every message
// arrives, in order per aggregate. (The resumed leader finds its lease
// ended before it writes; the database's fence of a write already under
// way is tested in package pgstore, TestCursor_AWriteOfALeaderWhoseLeaseWasTakenOverChangesNothing.)
func TestCursorRelay_SIGSTOPLeaderIsReplacedAndWritesNothingWhenItResumes(t *testing.T) {
	t.Parallel()
	e := newCursorEnv(t)
	e.recordCursorWrites()
	a := e.cursorRelay("A", nil, "--lease", "30s")
	w := e.startWriter(5, 20*time.Millisecond)
	a.waitLeads(30 * time.Second)
	b := e.cursorRelay("B", nil, "--lease", "30s")
	time.Sleep(time.Second)

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	stopped := time.Now()
	probe := seqMessage("probe", 0)
	probe.ID = uuid.Must(uuid.NewV7())
	e.enqueue(probe)
	// The guarantee, with room for a loaded machine: B leads and publishes
	// what was committed after A hung.
	b.waitLeads(15 * time.Second)
	e.waitStatus(probe.ID, outbox.StatusSent, 15*time.Second)
	t.Logf("B published %s after A hung (leader lease %s, claim lease 30s)", time.Since(stopped).Round(time.Millisecond), pgstore.DefaultLeaderLease)
	if owner, _, _ := e.cursorLease(); owner != "B" {
		t.Fatalf("the cursor's lease after the takeover is %q's; want B's", owner)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	a.waitFor("no longer leading", 15*time.Second)
	// A runs on as a standby while the writers go on: time for any late
	// write of its own to reach the database.
	time.Sleep(2 * time.Second)
	want, total := w.stop()
	want[probe.AggregateID] = 1
	recs := consumed(t, e.addrs, e.topic, total+1, 60*time.Second)
	dups := checkOrder(t, recs, want)
	e.waitPositionAtLastSeq(10 * time.Second)

	checkNoWritesAfterTakeover(t, e.cursorWrites(), e.appName("A"), e.appName("B"))
	if n := strings.Count(a.output(), "cursor: leading the cursor"); n != 1 {
		t.Errorf("A led %d times; want once, before it hung", n)
	}
	t.Logf("%d records for %d messages (%d duplicates)", len(recs), total+1, dups)
}

// checkNoWritesAfterTakeover checks the cursor's writes recorded by
// recordCursorWrites: the lease was held by A (connections named appA),
// then by B (appB) from a takeover on, and nothing from A's connections
// changed the cursor row or moved a QUEUED message to the table path after
// that; the position never moved backwards.
func checkNoWritesAfterTakeover(t *testing.T, ws []cursorWrite, appA, appB string) {
	t.Helper()
	takeover := -1
	var holders []string
	for i, w := range ws {
		if w.what != "cursor" {
			continue
		}
		if w.posAfter < w.posBefore {
			t.Errorf("the position moved backwards: %s", w)
		}
		if w.owner != "" && (len(holders) == 0 || holders[len(holders)-1] != w.owner) {
			holders = append(holders, w.owner)
		}
		if takeover < 0 && w.owner == "B" && w.app == appB {
			takeover = i
		}
	}
	if len(holders) != 2 || holders[0] != "A" || holders[1] != "B" {
		t.Errorf("the cursor's lease holders in turn: %q; want A, then B only", holders)
	}
	if takeover < 0 {
		t.Fatalf("no write of B's took the lease over among %d recorded writes", len(ws))
	}
	var before int
	for _, w := range ws[:takeover] {
		if w.app == appA {
			before++
		}
	}
	if before == 0 {
		t.Errorf("no write of A's was recorded before the takeover: the record misses A's connections (%q)", appA)
	}
	for _, w := range ws[takeover:] {
		if w.app == appA {
			t.Errorf("after B's takeover (%s), A wrote: %s", ws[takeover], w)
		}
	}
	t.Logf("%d cursor writes recorded, %d of them A's before the takeover, %d after it", len(ws), before, len(ws)-takeover)
}
