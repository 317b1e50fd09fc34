package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// runPlace is where a record sits: its call's aggregate and its place in
// the aggregate's run.
type runPlace struct {
	agg string // unique per call
	pos int
}

// Concurrent PublishRuns calls keep each run without a gap while the broker
// refuses produce requests at random, per partition (INVALID_RECORD,
// MESSAGE_TOO_LARGE, NOT_ENOUGH_REPLICAS until the producer gives up,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND), drops connections, and records in the
// middle of runs are too large for the producer (refused by the sink's
// check, or by franz-go before buffering): in each call the acknowledged
// records of an aggregate are a prefix of its run, and on the topic no
// record of a run is there without each earlier record of the run, ahead
// of it.
func TestPublishRuns_Stress_NoGapUnderFaults(t *testing.T) {
	t.Parallel()
	const (
		topic          = "runs"
		partitions     = 3
		workers        = 4
		callsPerWorker = 25
	)
	c := newCluster(t, kfake.SeedTopics(partitions, topic))
	s := newSink(t, c, kafka.Config{DefaultTopic: topic, MaxMessageBytes: 4000, ExtraOpts: []kgo.Opt{
		// A record over 3000 bytes is refused by franz-go before buffering;
		// one whose batch would exceed MaxMessageBytes by the sink's check.
		kgo.MaxBufferedBytes(3000),
		kgo.RecordRetries(1),
		kgo.RetryBackoffFn(func(int) time.Duration { return 5 * time.Millisecond }),
	}})
	stopFaults := injectProduceFaults(t, c, topic)

	var (
		mu     sync.Mutex
		places = make(map[string]runPlace) // by event id
		runs   = make(map[string][]string) // event ids by aggregate, in run order
		acked  = make(map[string]bool)
		kinds  = make(map[string]int)
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for call := range callsPerWorker {
				recs, ids := randomRuns(fmt.Sprintf("w%d-c%d", w, call))
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				errs := s.PublishRuns(ctx, recs)
				cancel()
				mu.Lock()
				for agg, run := range ids {
					runs[agg] = run
					for pos, id := range run {
						places[id] = runPlace{agg, pos}
					}
				}
				for i, err := range errs {
					acked[recs[i].ID.String()] = err == nil
					kinds[errKind(err)]++
				}
				mu.Unlock()
				checkAckedPrefixes(t, recs, errs)
			}
		})
	}
	wg.Wait()
	stopFaults()
	t.Logf("outcomes: %v", kinds)

	onTopic := readTopic(t, c, s, topic, partitions)
	// seen lists, by aggregate, the places of its records on the topic in
	// the order of their first copy.
	seen := make(map[string][]int)
	copies := make(map[string]int)
	for _, r := range onTopic {
		id := header(r, kafka.HeaderEventID)
		p, ok := places[id]
		if !ok {
			continue // an end marker
		}
		if copies[id]++; copies[id] == 1 {
			seen[p.agg] = append(seen[p.agg], p.pos)
		}
	}
	gaps := 0
	for agg, got := range seen {
		for i, pos := range got {
			if pos != i {
				gaps++
				t.Errorf("aggregate %s: the topic holds its records %v in this order, want a prefix of its run in order", agg, got)
				break
			}
		}
	}
	for id, ok := range acked {
		if ok && copies[id] == 0 {
			t.Errorf("record %s (%+v) acknowledged but not on the topic", id, places[id])
		}
	}
	dups := 0
	for _, n := range copies {
		dups += n - 1
	}
	t.Logf("%d aggregates, %d records, %d acknowledged, %d on the topic (%d duplicates), %d aggregates with a gap",
		len(runs), len(places), countTrue(acked), len(copies), dups, gaps)
}

// injectProduceFaults makes the cluster refuse produce requests for topic
// at random, per partition, and drop produce connections at random, until
// the returned func is called.
func injectProduceFaults(t *testing.T, c *kfake.Cluster, topic string) (stop func()) {
	t.Helper()
	var stopped atomic.Bool
	chance := func(p float64) func(kmsg.Request) bool {
		return func(kmsg.Request) bool { return !stopped.Load() && rand.Float64() < p }
	}
	var handles []*kfake.FaultHandle
	for _, f := range []struct {
		err *kerr.Error
		p   float64
	}{
		{kerr.InvalidRecord, 0.03},
		{kerr.MessageTooLarge, 0.03},
		{kerr.NotEnoughReplicas, 0.10}, // retried once, then the producer gives up
		{kerr.NotEnoughReplicasAfterAppend, 0.03},
	} {
		handles = append(handles, c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: f.err, Count: -1, When: chance(f.p)}))
	}
	drop := chance(0.02)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if drop(req) {
			return nil, errors.New("connection dropped by the test"), true
		}
		return nil, nil, false
	})
	return func() {
		stopped.Store(true)
		for _, h := range handles {
			h.Remove()
		}
	}
}

// randomRuns returns 1 to 3 runs of 1 to 6 records, of aggregates named
// after call, interleaved at random in their order, with one record in
// twelve too large for the producer; and the event ids of each run.
func randomRuns(call string) ([]outbox.Record, map[string][]string) {
	var queues [][]outbox.Record
	ids := make(map[string][]string)
	for a := range 1 + rand.IntN(3) {
		agg := fmt.Sprintf("%s-a%d", call, a)
		q := run(agg, 1+rand.IntN(6))
		for i := range q {
			if rand.IntN(12) == 0 {
				q[i] = withPayloadSize(q[i], 3200+rand.IntN(700))
			}
			ids[agg] = append(ids[agg], q[i].ID.String())
		}
		queues = append(queues, q)
	}
	var recs []outbox.Record
	for len(queues) > 0 {
		i := rand.IntN(len(queues))
		recs = append(recs, queues[i][0])
		if queues[i] = queues[i][1:]; len(queues[i]) == 0 {
			queues = slices.Delete(queues, i, i+1)
		}
	}
	return recs, ids
}

// checkAckedPrefixes fails the test unless, for each aggregate in recs, the
// records acknowledged (nil error) come before every record that failed.
func checkAckedPrefixes(t *testing.T, recs []outbox.Record, errs []error) {
	failed := make(map[string]error)
	for i, r := range recs {
		if first := failed[r.AggregateID]; first != nil && errs[i] == nil {
			t.Errorf("aggregate %s: record %d acknowledged after an earlier record failed with %v", r.AggregateID, i, first)
		}
		if errs[i] != nil && failed[r.AggregateID] == nil {
			failed[r.AggregateID] = errs[i]
		}
	}
}

// errKind names err's kind for the test's log.
func errKind(err error) string {
	switch {
	case err == nil:
		return "acknowledged"
	case errors.Is(err, sink.ErrNotSent):
		return "not sent"
	}
	return sink.Classify(err).String()
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// readTopic publishes an end marker to each partition of topic and returns
// every record read before the markers, by partition then offset.
func readTopic(t *testing.T, c *kfake.Cluster, s *kafka.Sink, topic string, partitions int) []*kgo.Record {
	t.Helper()
	ends := make(map[string]bool)
	for p := range partitions {
		for k := 0; ; k++ {
			key := fmt.Sprintf("end-%d", k)
			if javaPartition(key, partitions) != int32(p) {
				continue
			}
			end := rec(key, 0)
			publish(t, s, end)
			ends[end.ID.String()] = true
			break
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(ends) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %s, %d end markers missing", len(out), topic, len(ends))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		for _, r := range fs.Records() {
			out = append(out, r)
			delete(ends, header(r, kafka.HeaderEventID))
		}
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}
