package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
)

// fastRetries makes retries take milliseconds.
func fastRetries(cfg consumer.Config) consumer.Config {
	cfg.RetryBase, cfg.RetryMax = time.Millisecond, 5*time.Millisecond
	return cfg
}

func TestRunner_SameEventDeliveredTwice_IsAppliedOnce_AndReportedDuplicate(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	first := event(0, "o-1", 1)
	again := event(0, "o-1", 1)
	again.Headers = first.Headers // the relay sent it twice
	e.produce(t, first, again)

	rec := newRecorder()
	e.start(t, consumer.Config{Group: "billing", Hooks: rec.hooks()})
	waitFor(t, "both deliveries handled", func() bool { return rec.handled(0) == 2 })

	if got := rec.resultsOf(idOf(first)); !slices.Equal(got, []inbox.Result{inbox.Processed, inbox.Duplicate}) {
		t.Errorf("results %v, want [processed duplicate]", got)
	}
	if n := e.effects(t, idOf(first)); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

func TestRunner_TwoGroupsSharingAConsumerName_ApplyAnEventOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, event(int32(i%2), fmt.Sprint("o-", i), i))
	}
	e.produce(t, recs...)

	// Both groups read every record; both record under "billing".
	rec := newRecorder()
	e.start(t, consumer.Config{Group: "billing-a", Consumer: "billing", Hooks: rec.hooks()})
	e.start(t, consumer.Config{Group: "billing-b", Consumer: "billing", Hooks: rec.hooks()})
	waitFor(t, "every record handled by both groups", func() bool { return rec.handled(0) == 2*len(recs) })

	if p, d := rec.handled(inbox.Processed), rec.handled(inbox.Duplicate); p != len(recs) || d != len(recs) {
		t.Errorf("%d processed, %d duplicates; want %d of each", p, d, len(recs))
	}
	for _, r := range recs {
		if n := e.effects(t, idOf(r)); n != 1 {
			t.Errorf("event %s has %d effects, want 1", idOf(r), n)
		}
	}
}

func TestRunner_HandlerFailsAfterItsEffect_IsRetriedAndAppliedOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	r := event(0, "o-1", 1)
	e.produce(t, r)

	var mu sync.Mutex
	calls := 0
	flaky := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := e.apply(ctx, tx, m); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls < 3 {
			return errors.New("stock service timed out") // after the effect, before the commit
		}
		return nil
	}
	rec := newRecorder()
	e.start(t, fastRetries(consumer.Config{Group: "billing", Handler: flaky, Hooks: rec.hooks()}))
	waitFor(t, "the event handled", func() bool { return rec.handled(0) == 1 })

	if n := e.effects(t, idOf(r)); n != 1 {
		t.Errorf("%d effects after two failed attempts and a good one, want 1", n)
	}
	if got := rec.retriedOf(idOf(r)); got != 2 {
		t.Errorf("Retried reported %d times, want 2", got)
	}
	if got := rec.resultsOf(idOf(r)); !slices.Equal(got, []inbox.Result{inbox.Processed}) || rec.parkedCount() != 0 {
		t.Errorf("results %v, %d parked; want [processed], none parked", got, rec.parkedCount())
	}
}

func TestRunner_AlwaysFailingEvent_IsParkedAfterMaxAttempts_AndThePartitionMovesOn(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	poison, next1, next2 := event(0, "o-1", 1), event(0, "o-2", 2), event(0, "o-1", 3)
	poison.Headers = append(poison.Headers, kgo.RecordHeader{Key: "tenant", Value: []byte("acme")})
	e.produce(t, poison, next1, next2)

	failing := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if m.ID == idOf(poison) {
			if err := e.apply(ctx, tx, m); err != nil {
				return err
			}
			return errors.New("tax rule missing for acme")
		}
		return e.apply(ctx, tx, m)
	}
	rec := newRecorder()
	stop := e.start(t, fastRetries(consumer.Config{Group: "billing", MaxAttempts: 3, Handler: failing, Hooks: rec.hooks()}))
	waitFor(t, "the records after the poison handled", func() bool { return rec.handled(inbox.Processed) == 2 })
	stop()

	if rec.parkedCount() != 1 || rec.parked[0].ID != idOf(poison) || !strings.Contains(rec.causes[0].Error(), "tax rule") {
		t.Fatalf("Parked hook: %v %v, want the poison message once", rec.parked, rec.causes)
	}
	if got := rec.retriedOf(idOf(poison)); got != 2 {
		t.Errorf("poison retried %d times, want 2 (3 attempts)", got)
	}
	if n := e.effects(t, idOf(poison)); n != 0 {
		t.Errorf("poison has %d effects, want 0", n)
	}

	ctx := testCtx(t)
	ps, err := e.inbox.Parked(ctx, inbox.ParkedFilter{Consumer: "billing"})
	if err != nil || len(ps) != 1 {
		t.Fatalf("Parked = %v, %v; want one entry", ps, err)
	}
	p := ps[0]
	if p.Message.ID != idOf(poison) || string(p.Message.Payload) != string(poison.Value) ||
		p.Message.Headers["tenant"] != "acme" || p.Message.Headers["eventType"] != "OrderPlaced" ||
		p.Message.Topic != topic || p.Message.Partition != 0 || p.Message.Offset != 0 || p.Message.AggregateID != "o-1" ||
		p.Attempts != 3 || !strings.Contains(p.Error, "tax rule missing for acme") {
		t.Errorf("parked entry %+v", p)
	}

	// The fix is deployed: replaying applies the message once.
	if res, err := e.inbox.Replay(ctx, "billing", p.ID, e.apply); err != nil || res != inbox.Processed {
		t.Fatalf("Replay = %v, %v; want processed", res, err)
	}
	if res, err := e.inbox.Replay(ctx, "billing", p.ID, e.apply); err != nil || res != inbox.Duplicate {
		t.Fatalf("second Replay = %v, %v; want duplicate", res, err)
	}
	if n := e.effects(t, idOf(poison)); n != 1 {
		t.Errorf("poison has %d effects after replay, want 1", n)
	}

	// The parked record's offset was committed with the others: a new
	// runner of the group gets only what comes after.
	after := newRecorder()
	sentinel := event(0, "o-3", 4)
	e.produce(t, sentinel)
	e.start(t, consumer.Config{Group: "billing", Hooks: after.hooks()})
	waitFor(t, "the record after the restart", func() bool { return after.handled(0) >= 1 })
	if after.handled(0) != 1 || len(after.resultsOf(idOf(sentinel))) != 1 || after.parkedCount() != 0 {
		t.Errorf("after a restart %d deliveries handled, %d parked; want only the new record", after.handled(0), after.parkedCount())
	}
}

func TestRunner_MalformedRecordsAndPermanentErrors_AreParkedAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	malformed := event(0, "o-1", 1)
	malformed.Headers[0].Value = []byte("not-a-uuid")
	unknown := event(0, "o-2", 2)
	unknown.Headers[1].Value = []byte("OrderTeleported")
	good := event(0, "o-3", 3)
	e.produce(t, malformed, unknown, good)

	handler := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if m.EventType == "OrderTeleported" {
			return fmt.Errorf("unknown event type %s: %w", m.EventType, inbox.ErrPermanent)
		}
		return e.apply(ctx, tx, m)
	}
	rec := newRecorder()
	e.start(t, fastRetries(consumer.Config{Group: "billing", Handler: handler, Hooks: rec.hooks()}))
	waitFor(t, "the good record handled", func() bool { return rec.handled(inbox.Processed) == 1 })

	ps, err := e.inbox.Parked(testCtx(t), inbox.ParkedFilter{Consumer: "billing"})
	if err != nil || len(ps) != 2 {
		t.Fatalf("Parked = %v, %v; want two entries", ps, err)
	}
	if ps[0].Message.Offset != 0 || ps[0].Message.ID != uuid.Nil || ps[0].Attempts != 0 ||
		!strings.Contains(ps[0].Error, "eventId") || ps[0].Message.Headers["eventId"] != "not-a-uuid" {
		t.Errorf("malformed record parked as %+v", ps[0])
	}
	if ps[1].Message.ID != idOf(unknown) || ps[1].Attempts != 1 || !strings.Contains(ps[1].Error, "OrderTeleported") {
		t.Errorf("permanent failure parked as %+v", ps[1])
	}
	if n := rec.retriedOf(idOf(unknown)); n != 0 {
		t.Errorf("permanent failure retried %d times, want 0", n)
	}
}

func TestRunner_Shutdown_CommitsWhatWasHandled(t *testing.T) {
	t.Parallel()
	const partitions = 3
	e := setup(t, partitions)
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, event(int32(i%partitions), fmt.Sprint("o-", i%7), i))
	}
	e.produce(t, recs...)
	rec := newRecorder()
	stop := e.start(t, consumer.Config{Group: "billing", Hooks: rec.hooks()})
	waitFor(t, "all records handled", func() bool { return rec.handled(0) == len(recs) })
	stop()

	// A record behind each partition's handled ones: had any offset not been
	// committed, its records would be delivered again before these.
	after := newRecorder()
	var sentinels []*kgo.Record
	for p := range partitions {
		sentinels = append(sentinels, event(int32(p), "o-s", 100+p))
	}
	e.produce(t, sentinels...)
	e.start(t, consumer.Config{Group: "billing", Hooks: after.hooks()})
	waitFor(t, "the sentinels handled", func() bool {
		for _, s := range sentinels {
			if len(after.resultsOf(idOf(s))) == 0 {
				return false
			}
		}
		return true
	})
	if n := after.handled(0); n != partitions {
		t.Errorf("the restarted group handled %d deliveries, want only the %d new records", n, partitions)
	}
}

func TestRunner_KeepsOffsetOrderWithinEachPartition(t *testing.T) {
	t.Parallel()
	const partitions, aggregates, perAggregate = 4, 24, 12
	e := setup(t, partitions)
	var recs []*kgo.Record
	for seq := range perAggregate {
		for a := range aggregates {
			recs = append(recs, event(int32(a%partitions), fmt.Sprint("o-", a), seq))
		}
	}
	e.produce(t, recs...)

	// Every third event fails once, so retries happen while other
	// partitions go on.
	var mu sync.Mutex
	failedOnce := map[uuid.UUID]bool{}
	handler := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := e.apply(ctx, tx, m); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if m.Offset%3 == 0 && !failedOnce[m.ID] {
			failedOnce[m.ID] = true
			return errors.New("transient")
		}
		return nil
	}
	rec := newRecorder()
	// Few records per poll: partitions with a backlog are paused and resumed.
	e.start(t, fastRetries(consumer.Config{Group: "billing", Handler: handler, Hooks: rec.hooks(), MaxPollRecords: 7}))
	waitFor(t, "all records handled", func() bool { return rec.handled(inbox.Processed) == len(recs) })

	rows, err := e.pool.Query(testCtx(t), e.sql("SELECT aggregate, seq, partition, record_offset FROM {{schema}}.effects ORDER BY n"))
	if err != nil {
		t.Fatal(err)
	}
	type effect struct {
		Aggregate string
		Seq       int
		Partition int
		Offset    int64
	}
	effects, err := pgx.CollectRows(rows, pgx.RowToStructByPos[effect])
	if err != nil {
		t.Fatal(err)
	}
	if len(effects) != len(recs) {
		t.Fatalf("%d effects, want %d", len(effects), len(recs))
	}
	lastOffset := map[int]int64{}
	lastSeq := map[string]int{}
	for _, ef := range effects {
		if last, ok := lastOffset[ef.Partition]; ok && ef.Offset != last+1 {
			t.Errorf("partition %d: offset %d applied after %d", ef.Partition, ef.Offset, last)
		}
		lastOffset[ef.Partition] = ef.Offset
		if last, ok := lastSeq[ef.Aggregate]; ok && ef.Seq != last+1 {
			t.Errorf("aggregate %s: event %d applied after %d", ef.Aggregate, ef.Seq, last)
		}
		lastSeq[ef.Aggregate] = ef.Seq
	}
}

func TestNew_RejectsBadConfigNamingTheField(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	good := consumer.Config{Brokers: e.broker.Addrs(), Group: "g", Topics: []string{topic}, Inbox: e.inbox, Handler: e.apply}
	for _, c := range []struct {
		field  string
		mutate func(*consumer.Config)
	}{
		{"Brokers", func(c *consumer.Config) { c.Brokers = nil }},
		{"Brokers[1]", func(c *consumer.Config) { c.Brokers = []string{"a:1", ""} }},
		{"Group", func(c *consumer.Config) { c.Group = "" }},
		{"Topics", func(c *consumer.Config) { c.Topics = nil }},
		{"Topics[0]", func(c *consumer.Config) { c.Topics = []string{"bad topic"} }},
		{"Inbox", func(c *consumer.Config) { c.Inbox = nil }},
		{"Handler", func(c *consumer.Config) { c.Handler = nil }},
		{"MaxAttempts", func(c *consumer.Config) { c.MaxAttempts = -1 }},
		{"RetryBase", func(c *consumer.Config) { c.RetryBase = -time.Second }},
		{"RetryMax", func(c *consumer.Config) { c.RetryBase, c.RetryMax = time.Second, time.Millisecond }},
		{"HandlerTimeout", func(c *consumer.Config) { c.HandlerTimeout = -1 }},
		{"SessionTimeout", func(c *consumer.Config) { c.SessionTimeout = 500 * time.Millisecond }},
		{"RebalanceTimeout", func(c *consumer.Config) { c.RebalanceTimeout = -time.Second }},
		{"InstanceID", func(c *consumer.Config) { c.InstanceID = "billing 1" }},
		{"InstanceID", func(c *consumer.Config) { c.InstanceID = ".." }},
		{"InstanceID", func(c *consumer.Config) { c.InstanceID = strings.Repeat("b", 250) }},
		{"MaxPollRecords", func(c *consumer.Config) { c.MaxPollRecords = -1 }},
		{"Security.CAFile", func(c *consumer.Config) { c.Security.CAFile = "ca.pem" }},
	} {
		cfg := good
		c.mutate(&cfg)
		_, err := consumer.New(cfg)
		if !errors.Is(err, consumer.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New with bad %s: error %v, want ErrInvalidConfig naming the field", c.field, err)
		}
	}
	for _, id := range []string{"billing-0", "pod_7.billing", "...", strings.Repeat("b", 249)} {
		cfg := good
		cfg.InstanceID = id
		if _, err := consumer.New(cfg); err != nil {
			t.Errorf("New with InstanceID %q: %v, want it accepted", id, err)
		}
	}
	r, err := consumer.New(good)
	if err != nil {
		t.Fatalf("New(good): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Run(ctx); err != nil {
		t.Errorf("Run with an ended context = %v, want nil", err)
	}
	if err := r.Run(ctx); !errors.Is(err, consumer.ErrAlreadyRunning) {
		t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
	}
}
