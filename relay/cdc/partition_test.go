package cdc_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// hourly is the partitioning of these tests: a partition per hour, the
// current one and ahead more after it.
func hourly(ahead int) pgstore.Partitioning {
	return pgstore.Partitioning{Interval: time.Hour, Ahead: ahead}
}

// insertAt commits m in its own transaction with created_at = now() +
// offset, so that it lands in the partition of that time (Enqueue always
// takes now), and returns the partition that holds it. With tx, m is
// inserted in tx instead.
func (e *env) insertAt(tx pgx.Tx, m outbox.Message, offset time.Duration) string {
	e.t.Helper()
	ctx := context.Background()
	if m.ID == uuid.Nil {
		m.ID = uuid.New()
	}
	const q = `INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, created_at)
		VALUES ($1, $2, $3, $4, 1, $5, 'application/json', now() + $6::bigint * interval '1 microsecond')
		RETURNING tableoid::regclass::text`
	var part string
	var err error
	if tx != nil {
		err = tx.QueryRow(ctx, q, m.ID, m.AggregateType, m.AggregateID, m.EventType, m.Payload, offset.Microseconds()).Scan(&part)
	} else {
		err = e.pool.QueryRow(ctx, q, m.ID, m.AggregateType, m.AggregateID, m.EventType, m.Payload, offset.Microseconds()).Scan(&part)
	}
	if err != nil {
		e.t.Fatalf("insert at now%+v: %v", offset, err)
	}
	return part[strings.LastIndexByte(part, '.')+1:]
}

// pubViaRoot reports the publication's publish_via_partition_root.
func (e *env) pubViaRoot() bool {
	e.t.Helper()
	var v bool
	if err := e.pool.QueryRow(context.Background(), "SELECT pubviaroot FROM pg_publication WHERE pubname = $1",
		cdc.DefaultSlot(e.schema)).Scan(&v); err != nil {
		e.t.Fatalf("read the publication: %v", err)
	}
	return v
}

// On a table partitioned by the hour, messages committed into four
// partitions (an old hour, which goes to the default partition, the
// current hour and two hours ahead), alone and mixed in one transaction,
// are all published from the stream, each aggregate's in order, and end
// up SENT: the publication publishes them as rows of outbox_messages.
func TestPartitioned_StreamPublishesEveryPartition(t *testing.T) {
	t.Parallel()
	e := newEnvPartitioned(t, broker.Config{}, hourly(2))
	r := e.start(e.config(e.newSink(nil)))
	e.waitLeader(r, 20*time.Second)
	if !e.pubViaRoot() {
		t.Fatal("the publication does not publish via the partition root")
	}

	ctx := context.Background()
	offsets := []time.Duration{-5 * time.Hour, 0, time.Hour, 2 * time.Hour}
	want := map[string]int{}
	parts := map[string]int{}
	next := func(agg string) outbox.Message {
		m := seqMessage(agg, want[agg])
		want[agg]++
		return m
	}
	for i := range 40 {
		agg := fmtAgg(i % 4)
		switch i % 5 {
		case 4: // through the store: the current partition
			e.enqueue(next(agg))
		default:
			parts[e.insertAt(nil, next(agg), offsets[(i/4+i)%len(offsets)])]++
		}
	}
	// One transaction that writes into every partition, in a different
	// order than their time ranges.
	if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		for _, off := range []time.Duration{time.Hour, -5 * time.Hour, 2 * time.Hour, 0} {
			parts[e.insertAt(tx, next("mixed"), off)]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(parts) != 4 || parts["outbox_messages_default"] == 0 {
		t.Fatalf("messages landed in partitions %v; want four, the default one included", parts)
	}
	total := 0
	for _, n := range want {
		total += n
	}
	recs := e.consumed(total, 30*time.Second)
	if dups := checkOrder(t, recs, want); dups != 0 {
		t.Errorf("%d duplicates without any failure", dups)
	}
	e.waitCount(outbox.StatusSent, int64(total), 10*time.Second)
	var deferred int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM outbox_cdc_deferred").Scan(&deferred); err != nil {
		t.Fatal(err)
	}
	if deferred != 0 {
		t.Errorf("%d aggregates were handed to the table path; want all published from the stream", deferred)
	}
}

// ops.MaintainPartitions creates partitions ahead and drops an old empty
// one while the CDC relay streams and writers enqueue: the stream goes on,
// messages committed before, during and after are all published in order
// per aggregate and SENT, and a message in a partition created by the
// maintenance is published from the stream too.
func TestPartitioned_MaintainPartitionsWhileStreaming(t *testing.T) {
	t.Parallel()
	e := newEnvPartitioned(t, broker.Config{}, hourly(1))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// An old hour's partition, empty by the time the relay runs.
	old := seqMessage("old", 0)
	old.ID = uuid.New()
	if p := e.insertAt(nil, old, -5*time.Hour); p != "outbox_messages_default" {
		t.Fatalf("an old row went to %s, want the default partition", p)
	}
	if _, err := e.store.EnsurePartitions(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var oldPart string
	if err := e.pool.QueryRow(ctx, "DELETE FROM outbox_messages WHERE id = $1 RETURNING tableoid::regclass::text", old.ID).Scan(&oldPart); err != nil {
		t.Fatal(err)
	}
	oldPart = oldPart[strings.LastIndexByte(oldPart, '.')+1:]
	if oldPart == "outbox_messages_default" {
		t.Fatal("EnsurePartitions made no partition for the old hour")
	}

	r := e.start(e.config(e.newSink(nil)))
	e.waitLeader(r, 20*time.Second)
	o, err := ops.New(e.pool, ops.Config{Schema: e.schema, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}

	// Writers on three aggregates throughout, each aggregate's messages
	// numbered in commit order.
	var (
		mu   sync.Mutex
		want = map[string]int{}
		wg   sync.WaitGroup
	)
	// The writers stop between transactions (not by cancelling one, whose
	// commit could then apply uncounted).
	stop := make(chan struct{})
	stopProducing := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopProducing()
	for w := range 3 {
		agg := fmtAgg(w)
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				m := seqMessage(agg, n)
				if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, m) }); err != nil {
					t.Errorf("enqueue during partition maintenance: %v", err)
					return
				}
				mu.Lock()
				want[agg] = n + 1
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	waitSent := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); e.counts()[outbox.StatusSent] < n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d messages SENT, want at least %d (all: %v)", e.counts()[outbox.StatusSent], n, e.counts())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitSent(30)

	res, err := o.MaintainPartitions(ctx, ops.PartitionConfig{OlderThan: 2 * time.Hour, Ahead: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || res.Dropped[0].Name != oldPart {
		t.Fatalf("dropped %+v, want the old empty partition %s", res.Dropped, oldPart)
	}
	created := slices.DeleteFunc(slices.Clone(res.Created), func(n string) bool { return n == "outbox_messages_default" })
	if len(created) == 0 {
		t.Fatalf("created %v, want partitions ahead", res.Created)
	}
	// A message in the newest partition, made by the maintenance.
	ps, err := e.store.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var newest pgstore.Partition
	for _, p := range ps {
		if p.Name == created[len(created)-1] {
			newest = p
		}
	}
	if newest.Name == "" {
		t.Fatalf("partition %s not found in %+v", created[len(created)-1], ps)
	}
	var now time.Time
	if err := e.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	if p := e.insertAt(nil, seqMessage("ahead", 0), newest.From.Add(time.Minute).Sub(now)); p != newest.Name {
		t.Fatalf("the message went to %s, want the new partition %s", p, newest.Name)
	}

	// The stream goes on after the maintenance.
	sentAfter := e.counts()[outbox.StatusSent]
	waitSent(sentAfter + 30)
	stopProducing()
	select {
	case <-r.Stopped():
		t.Fatalf("the relay stopped: %v", r.Err())
	default:
	}

	mu.Lock()
	want["ahead"] = 1
	total := 0
	for _, n := range want {
		total += n
	}
	mu.Unlock()
	recs := e.consumed(total, time.Minute)
	if dups := checkOrder(t, recs, want); dups != 0 {
		t.Errorf("%d duplicates without any failure", dups)
	}
	e.waitCount(outbox.StatusSent, int64(total), 30*time.Second)
}

// A publication on a partitioned table made without
// publish_via_partition_root (by hand, or altered) while the slot holds
// inserts decoded as rows of the partitions: the relay sets the option at
// start and hands the unsent aggregates to the table path, so nothing that
// committed meanwhile is lost and each aggregate stays in order.
func TestPartitioned_PublicationWithoutViaRootIsAltered(t *testing.T) {
	t.Parallel()
	e := newEnvPartitioned(t, broker.Config{}, hourly(1))
	ctx := context.Background()
	cfg := e.config(e.newSink(nil))
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	want := map[string]int{}
	for n := range 5 {
		e.enqueue(seqMessage(fmtAgg(0), n))
	}
	want[fmtAgg(0)] = 5
	e.waitCount(outbox.StatusSent, 5, 30*time.Second)
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	pub := pgx.Identifier{cdc.DefaultSlot(e.schema)}.Sanitize()
	if _, err := e.pool.Exec(ctx, "ALTER PUBLICATION "+pub+" SET (publish_via_partition_root = false)"); err != nil {
		t.Fatal(err)
	}
	// Committed while the publication publishes the partitions: the slot's
	// stream has them as rows of the partitions.
	for n := 5; n < 10; n++ {
		e.enqueue(seqMessage(fmtAgg(0), n))
		e.insertAt(nil, seqMessage(fmtAgg(1), n-5), time.Hour)
	}
	want[fmtAgg(0)], want[fmtAgg(1)] = 10, 5

	r = e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	if !e.pubViaRoot() {
		t.Fatal("the relay did not set publish_via_partition_root")
	}
	for n := 10; n < 15; n++ {
		e.enqueue(seqMessage(fmtAgg(0), n))
		e.enqueue(seqMessage(fmtAgg(2), n-10))
	}
	want[fmtAgg(0)], want[fmtAgg(2)] = 15, 5
	recs := e.consumed(25, time.Minute)
	checkOrder(t, recs, want)
	e.waitCount(outbox.StatusSent, 25, 30*time.Second)
}

// A plain table a CDC relay ran on cannot be partitioned while its
// publication holds it. The documented way works: stop the relay, drop the
// slot and the publication and forget the slot, migrate with Partitioning,
// start the relay. Messages committed while it was down, before and after
// the conversion, are published in order per aggregate (through the table
// path), and those after its start from the stream.
func TestPartitioned_ConvertATableTheRelayRanOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	ctx := context.Background()
	cfg := e.config(e.newSink(nil))
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	want := map[string]int{}
	add := func(agg string, n int) {
		for range n {
			e.enqueue(seqMessage(agg, want[agg]))
			want[agg]++
		}
	}
	add(fmtAgg(0), 5)
	e.waitCount(outbox.StatusSent, 5, 30*time.Second)
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	add(fmtAgg(0), 3) // unsent while no relay runs

	part, err := pgstore.New(e.pool, pgstore.Config{Schema: e.schema, Partitioning: hourly(1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := part.Migrate(ctx); !errors.Is(err, pgstore.ErrPartitioning) {
		t.Fatalf("Migrate with Partitioning while the publication holds the table = %v, want ErrPartitioning", err)
	}
	if err := cdc.Remove(ctx, e.pool, e.schema, "", ""); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := part.Migrate(ctx); err != nil {
		t.Fatalf("Migrate with Partitioning: %v", err)
	}
	if d, err := part.PartitionInterval(ctx); err != nil || d != time.Hour {
		t.Fatalf("PartitionInterval = %v, %v; want 1h", d, err)
	}
	e.store = part
	add(fmtAgg(0), 3)
	add(fmtAgg(1), 3)

	r = e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	if !e.pubViaRoot() {
		t.Fatal("the new publication does not publish via the partition root")
	}
	add(fmtAgg(0), 3)
	add(fmtAgg(2), 5)
	e.insertAt(nil, seqMessage(fmtAgg(2), want[fmtAgg(2)]), time.Hour)
	want[fmtAgg(2)]++
	total := 0
	for _, n := range want {
		total += n
	}
	checkOrder(t, e.consumed(total, time.Minute), want)
	e.waitCount(outbox.StatusSent, int64(total), 30*time.Second)
}
