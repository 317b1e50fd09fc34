package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

func TestMurmur2_MatchesKafkaTestVectors(t *testing.T) {
	t.Parallel()
	// From Kafka's UtilsTest.testMurmur2.
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestPublish_StandardConsumerReadsKeyValueAndHeaders(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(3, "orders", "explicit"))
	s := newSink(t, c, kafka.Config{TopicByAggregateType: map[string]string{"Order": "orders"}})

	full := rec("order-1", 1)
	full.EventType = "OrderPlaced"
	full.EventVersion = 3
	full.CorrelationID = "corr-1"
	full.CausationID = "cause-1"
	full.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	full.ContentType = "application/cloudevents+json"
	full.Headers = map[string]string{"z-last": "z", "a-first": "a", "m.middle": "m"}
	bare := rec("order-2", 2) // no correlation, causation, traceparent or own headers
	explicit := rec("order-3", 3)
	explicit.Topic = "explicit"

	publish(t, s, full, bare, explicit)

	got := consume(t, c.ListenAddrs(), "orders", 2)
	byID := map[string]*kgo.Record{}
	for _, r := range got {
		byID[header(r, kafka.HeaderEventID)] = r
	}
	want := []struct {
		rec     outbox.Record
		headers []string // name=value, in order
	}{
		{full, []string{
			"eventId=" + full.ID.String(), "eventType=OrderPlaced", "eventVersion=3",
			"aggregateType=Order", "aggregateId=order-1", "correlationId=corr-1", "causationId=cause-1",
			"traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"contentType=application/cloudevents+json", "a-first=a", "m.middle=m", "z-last=z",
		}},
		{bare, []string{
			"eventId=" + bare.ID.String(), "eventType=OrderPlaced", "eventVersion=1",
			"aggregateType=Order", "aggregateId=order-2", "correlationId=", "causationId=",
			"contentType=application/json",
		}},
	}
	for _, w := range want {
		r, ok := byID[w.rec.ID.String()]
		if !ok {
			t.Fatalf("record %s not found on topic orders", w.rec.ID)
		}
		if string(r.Key) != w.rec.AggregateID {
			t.Errorf("key = %q, want %q", r.Key, w.rec.AggregateID)
		}
		if string(r.Value) != string(w.rec.Payload) {
			t.Errorf("value = %q, want %q", r.Value, w.rec.Payload)
		}
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		if strings.Join(hs, "\n") != strings.Join(w.headers, "\n") {
			t.Errorf("headers of %s:\n got %q\nwant %q", w.rec.AggregateID, hs, w.headers)
		}
		if r.Timestamp.IsZero() {
			t.Errorf("record %s has no timestamp", w.rec.ID)
		}
	}
	ex := consume(t, c.ListenAddrs(), "explicit", 1)
	if id := header(ex[0], kafka.HeaderEventID); id != explicit.ID.String() {
		t.Errorf("topic explicit holds %s, want the message with its own topic %s", id, explicit.ID)
	}
}

func TestPublish_AggregateInOrderOnItsJavaPartition(t *testing.T) {
	t.Parallel()
	const partitions, aggregates, perAggregate = 6, 8, 25
	c := newCluster(t, kfake.SeedTopics(partitions, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})

	// Interleave the aggregates: a1#0, a2#0, ..., a1#1, a2#1, ...
	var recs []outbox.Record
	for n := range perAggregate {
		for a := range aggregates {
			recs = append(recs, rec(fmt.Sprintf("order-%d", a), n))
		}
	}
	publish(t, s, recs...)

	got := consume(t, c.ListenAddrs(), "orders", len(recs))
	next := map[string]int{}
	for _, r := range got { // ordered by partition, then offset
		key := string(r.Key)
		if want := javaPartition(key, partitions); r.Partition != want {
			t.Errorf("key %s on partition %d, the Java partitioner picks %d", key, r.Partition, want)
		}
		var n int
		if _, err := fmt.Sscanf(string(r.Value), `{"n":%d}`, &n); err != nil {
			t.Fatalf("payload %q: %v", r.Value, err)
		}
		if n != next[key] {
			t.Fatalf("key %s: event %d arrived where event %d was due", key, n, next[key])
		}
		next[key]++
	}
	for a := range aggregates {
		if key := fmt.Sprintf("order-%d", a); next[key] != perAggregate {
			t.Errorf("key %s: %d events, want %d", key, next[key], perAggregate)
		}
	}
}

func TestPublish_RecordTooLargeForBroker_PermanentAndOthersSucceed(t *testing.T) {
	t.Parallel()
	// One partition, so the large record shares its batch and partition
	// with the small ones.
	c := newCluster(t,
		kfake.SeedTopics(1, "orders"),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2000"}),
	)
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})

	var recs []outbox.Record
	for n := range 11 {
		recs = append(recs, rec(fmt.Sprintf("order-%d", n), n))
	}
	const big = 5
	recs[big] = withPayloadSize(recs[big], 3000)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	errs := s.Publish(ctx, recs)
	for i, err := range errs {
		switch {
		case i == big && !errors.Is(err, sink.ErrPermanent):
			t.Errorf("large record: err = %v, want ErrPermanent", err)
		case i == big && !strings.Contains(fmt.Sprint(err), "MESSAGE_TOO_LARGE"):
			t.Errorf("large record: err = %v, want the broker's reason MESSAGE_TOO_LARGE", err)
		case i != big && err != nil:
			t.Errorf("small record %d: %v", i, err)
		}
	}

	end := rec("end", 0)
	publish(t, s, end)
	got := consumeUntil(t, c.ListenAddrs(), "orders", end.ID)
	var ids []string
	for _, r := range got {
		ids = append(ids, header(r, kafka.HeaderEventID))
	}
	var want []string
	for i, r := range recs {
		if i != big {
			want = append(want, r.ID.String())
		}
	}
	// Each small record once, the large one not at all, and end, published
	// after the call returned, last. The order among the small records is
	// not a guarantee: they are of different aggregates, and the records of
	// the batch the broker refused are produced again one by one, after
	// later batches may have been written.
	if len(ids) == 0 || ids[len(ids)-1] != end.ID.String() {
		t.Fatalf("topic holds %v, want %s (end) last", ids, end.ID)
	}
	small := slices.Clone(ids[:len(ids)-1])
	slices.Sort(small)
	slices.Sort(want)
	if !slices.Equal(small, want) {
		t.Errorf("topic holds before end\n%v\nwant each small record once\n%v", small, want)
	}
}

func TestPublish_BatchOverTopicLimit_RecordsThatFitAloneSucceed(t *testing.T) {
	t.Parallel()
	c := newCluster(t,
		kfake.SeedTopics(1, "orders"),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2000"}),
	)
	// The sink believes batches may be 1 MB; the linger makes the producer
	// put all records into one batch, which the broker refuses.
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders", Linger: 50 * time.Millisecond})

	var recs []outbox.Record
	for n := range 10 {
		recs = append(recs, withPayloadSize(rec(fmt.Sprintf("order-%d", n), n), 600))
	}
	publish(t, s, recs...)

	got := consume(t, c.ListenAddrs(), "orders", len(recs))
	for i, r := range got {
		if id := header(r, kafka.HeaderEventID); id != recs[i].ID.String() {
			t.Errorf("offset %d holds %s, want %s", r.Offset, id, recs[i].ID)
		}
	}
}

func TestPublish_RecordOverMaxMessageBytes_PermanentWithoutTouchingNeighbours(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders", MaxMessageBytes: 1000})

	recs := []outbox.Record{rec("a", 0), withPayloadSize(rec("b", 1), 2000), rec("c", 2)}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	errs := s.Publish(ctx, recs)
	if !errors.Is(errs[1], sink.ErrPermanent) || !strings.Contains(errs[1].Error(), "MESSAGE_TOO_LARGE") {
		t.Errorf("large record: err = %v, want ErrPermanent with MESSAGE_TOO_LARGE", errs[1])
	}
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("small records: errs = %v, %v, want nil", errs[0], errs[2])
	}
}

// A record for a topic that does not exist is not the record's fault: it
// fails with a TopicError naming the topic (the relay keeps the message
// waiting), the records of other topics in the same call are published,
// later calls fail such records at once instead of waiting for metadata
// again, and once the topic is created its records go out.
func TestPublish_MissingTopic_TopicUnavailableUntilCreated(t *testing.T) {
	t.Parallel()
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", NoAutoCreateTopics: true, SeedTopics: []string{"orders"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	s := newSink(t, nil, kafka.Config{Brokers: b.Addrs(), DefaultTopic: "orders",
		TopicByAggregateType: map[string]string{"Invoice": "invoices"}, ExtraOpts: debugOpts()})
	invoice := func(id string) outbox.Record { r := rec(id, 0); r.AggregateType = "Invoice"; return r }

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := s.Publish(ctx, []outbox.Record{invoice("i1"), rec("o1", 1)})
	te, ok := errors.AsType[*sink.TopicError](errs[0])
	if !ok || sink.Classify(errs[0]) != sink.TopicUnavailable || te.Topic != "invoices" ||
		!errors.Is(errs[0], kerr.UnknownTopicOrPartition) || te.Since.IsZero() {
		t.Fatalf("record for the missing topic: err = %v, want a TopicError for invoices with UNKNOWN_TOPIC_OR_PARTITION", errs[0])
	}
	if !strings.Contains(errs[0].Error(), "create the topic") {
		t.Errorf("err = %q does not say how to fix it", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("record for an existing topic in the same call: %v", errs[1])
	}
	if st := topicStatus(s, "invoices"); !st.Unavailable() || st.Reason != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("Topics() for invoices = %+v, want unavailable with the reason", st)
	}

	// Known missing: refused at once, in the same spell (Since unchanged).
	// Waiting for the producer's metadata refreshes (seconds) would end
	// this call's short deadline first, with an ErrUnavailable error.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	errs = s.Publish(short, []outbox.Record{invoice("i2")})
	cancelShort()
	if again, ok := errors.AsType[*sink.TopicError](errs[0]); !ok || !again.Since.Equal(te.Since) {
		t.Fatalf("second record: err = %v, want the same spell's TopicError at once", errs[0])
	}

	if err := b.CreateTopics(ctx, 1, "invoices"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		errs = s.Publish(ctx, []outbox.Record{invoice("i3")})
		if errs[0] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the topic exists, but its record still fails: %v", errs[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := topicStatus(s, "invoices"); st.Unavailable() || st.Published != 1 {
		t.Errorf("Topics() for invoices after the publish = %+v, want available with 1 published", st)
	}
	if got := consume(t, b.Addrs(), "invoices", 1); header(got[0], kafka.HeaderAggregateID) != "i3" {
		t.Errorf("topic invoices holds aggregate %s, want i3", header(got[0], kafka.HeaderAggregateID))
	}
}

// topicStatus returns the sink's status of topic; the zero value if it has
// none.
func topicStatus(s *kafka.Sink, topic string) sink.TopicStatus {
	for _, st := range s.Topics() {
		if st.Topic == topic {
			return st
		}
	}
	return sink.TopicStatus{}
}

// CheckTopics names the configured topics that do not exist.
func TestCheckTopics_NamesMissingConfiguredTopics(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders",
		TopicByAggregateType: map[string]string{"Order": "orders", "Payment": "payments", "Refund": "payments", "Stock": "stock"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	missing, err := s.CheckTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, []string{"payments", "stock"}) {
		t.Errorf("CheckTopics = %v, want [payments stock]", missing)
	}
}

func TestPublish_AutoCreateTopic_WhenAllowed(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.AllowAutoTopicCreation())
	s := newSink(t, c, kafka.Config{DefaultTopic: "fresh", AllowAutoTopicCreation: true})
	r := rec("a", 0)
	publish(t, s, r)
	if got := consume(t, c.ListenAddrs(), "fresh", 1); header(got[0], kafka.HeaderEventID) != r.ID.String() {
		t.Errorf("auto-created topic holds %s, want %s", header(got[0], kafka.HeaderEventID), r.ID)
	}
}

func TestPublish_BrokerClosed_UnavailableWithinDeadline(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(3, "orders"))
	connected := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	publish(t, connected, rec("warm-up", 0)) // connections and metadata exist
	never := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	c.Close()

	for name, s := range map[string]*kafka.Sink{"connected before": connected, "never connected": never} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const deadline = 2 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			errs := s.Publish(ctx, []outbox.Record{rec("a", 1), rec("b", 2), rec("c", 3)})
			if elapsed := time.Since(start); elapsed > deadline+3*time.Second {
				t.Errorf("Publish returned after %v, past the %v deadline", elapsed, deadline)
			}
			for i, err := range errs {
				if !errors.Is(err, sink.ErrUnavailable) {
					t.Errorf("record %d: err = %v, want ErrUnavailable", i, err)
				}
			}
			if err := s.Ping(ctx); !errors.Is(err, sink.ErrUnavailable) {
				t.Errorf("Ping: err = %v, want ErrUnavailable", err)
			}
		})
	}
}

func TestPublish_ContextAlreadyDone_UnavailableForEveryRecord(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i, err := range s.Publish(ctx, []outbox.Record{rec("a", 0), rec("b", 1)}) {
		if !errors.Is(err, sink.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Errorf("record %d: err = %v, want ErrUnavailable wrapping context.Canceled", i, err)
		}
	}
}

func TestPublish_Empty(t *testing.T) {
	t.Parallel()
	s, err := kafka.New(kafka.Config{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if errs := s.Publish(context.Background(), nil); len(errs) != 0 {
		t.Errorf("Publish(nil) = %v, want no errors", errs)
	}
}

func TestPing_ReachableCluster(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	s := newSink(t, c, kafka.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestSink_Topic_RoutingPrecedence(t *testing.T) {
	t.Parallel()
	route := func(r outbox.Record) string {
		if r.EventType == "Routed" {
			return "custom"
		}
		return ""
	}
	s, err := kafka.New(kafka.Config{
		Brokers:              []string{"127.0.0.1:1"},
		Route:                route,
		TopicByAggregateType: map[string]string{"Order": "orders"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mk := func(aggType, eventType, topic string) outbox.Record {
		r := rec("x", 0)
		r.AggregateType, r.EventType, r.Topic = aggType, eventType, topic
		return r
	}
	for _, tc := range []struct {
		name string
		rec  outbox.Record
		want string
	}{
		{"message topic beats everything", mk("Order", "Routed", "own"), "own"},
		{"route beats aggregate type", mk("Order", "Routed", ""), "custom"},
		{"aggregate type when route says nothing", mk("Order", "Placed", ""), "orders"},
		{"default topic last", mk("Invoice", "Placed", ""), kafka.DefaultTopic},
	} {
		if got := s.Topic(tc.rec); got != tc.want {
			t.Errorf("%s: Topic = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNew_InvalidConfig_NamesField(t *testing.T) {
	t.Parallel()
	ok := []string{"127.0.0.1:9092"}
	for _, tc := range []struct {
		cfg   kafka.Config
		field string
	}{
		{kafka.Config{}, "Brokers"},
		{kafka.Config{Brokers: []string{""}}, "Brokers[0]"},
		{kafka.Config{Brokers: ok, DefaultTopic: "bad topic"}, "DefaultTopic"},
		{kafka.Config{Brokers: ok, TopicByAggregateType: map[string]string{"Order": ".."}}, `TopicByAggregateType["Order"]`},
		{kafka.Config{Brokers: ok, Linger: -time.Second}, "Linger"},
		{kafka.Config{Brokers: ok, MaxMessageBytes: 100}, "MaxMessageBytes"},
		{kafka.Config{Brokers: ok, Security: kafka.Security{SASLMechanism: "GSSAPI"}}, "Security.SASLMechanism"},
	} {
		_, err := kafka.New(tc.cfg)
		if !errors.Is(err, kafka.ErrInvalidConfig) || !strings.Contains(err.Error(), "invalid config: "+tc.field+" ") {
			t.Errorf("New(%+v): err = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
	}
}

func TestRecord_EventVersionIsDecimal(t *testing.T) {
	t.Parallel()
	r := rec("a", 0)
	r.EventVersion = 12
	kr, err := kafka.Record(r, "t", outbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if kr.Topic != "t" || header(kr, kafka.HeaderEventVersion) != strconv.Itoa(12) {
		t.Errorf("Record: topic %q, eventVersion %q", kr.Topic, header(kr, kafka.HeaderEventVersion))
	}
	if !kr.Timestamp.IsZero() {
		t.Errorf("Record sets timestamp %v; the producer should stamp the publish time", kr.Timestamp)
	}
}

func debugOpts() []kgo.Opt {
	if os.Getenv("KDEBUG") == "" {
		return nil
	}
	return []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil))}
}

// A record refused as too large because of the batch it shared (with a
// poison record of another relay worker's call, say) is sent again alone
// and published, even when it is the only refused record of its call: the
// fault-injection harness saw a small message dead-lettered with
// MESSAGE_TOO_LARGE for the 400 kB poison it had been batched with.
func TestPublish_RefusedForItsBatch_RetriedAloneAndPublished(t *testing.T) {
	t.Parallel()
	c := newCluster(t,
		kfake.SeedTopics(1, "orders"),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "3000"}),
	)
	s := newSink(t, c, kafka.Config{DefaultTopic: "orders"}) // believes batches may be 1 MB
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for round := range 10 {
		wg.Add(1)
		go func() { // the poison, in a call of its own
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			s.Publish(ctx, []outbox.Record{withPayloadSize(rec(fmt.Sprintf("poison-%d", round), 0), 5000)})
		}()
		for n := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				r := withPayloadSize(rec(fmt.Sprintf("small-%d-%d", round, n), n), 100)
				if err := s.Publish(ctx, []outbox.Record{r})[0]; err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	if len(failed) > 0 {
		t.Errorf("%d of 200 small records failed, the first: %s", len(failed), failed[0])
	}
}

// lineRecorder is a slog handler that keeps each record's message and
// attributes.
type lineRecorder struct {
	level slog.Level
	mu    sync.Mutex
	lines []map[string]string
}

func (h *lineRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *lineRecorder) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *lineRecorder) WithGroup(string) slog.Handler                { return h }
func (h *lineRecorder) Handle(_ context.Context, r slog.Record) error {
	line := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		line[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, line)
	return nil
}

func (h *lineRecorder) with(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, l := range h.lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

func TestPublish_DebugLogsEachAcknowledgedRecord(t *testing.T) {
	t.Parallel()
	const line = "kafka: record acknowledged"
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		h := &lineRecorder{level: level}
		s := newSink(t, c, kafka.Config{TopicByAggregateType: map[string]string{"Order": "orders"}, Logger: slog.New(h)})
		first, second := rec("order-1", 1), rec("order-1", 2)
		publish(t, s, first, second)

		got := h.with(line)
		if level != slog.LevelDebug {
			if len(got) != 0 {
				t.Errorf("at level %v: %d lines %q, want none", level, len(got), line)
			}
			continue
		}
		if len(got) != 2 {
			t.Fatalf("at debug level: %d lines %q, want 2: %v", len(got), line, got)
		}
		for i, want := range []outbox.Record{first, second} {
			l := got[i]
			if l["topic"] != "orders" || l["partition"] != "0" || l["offset"] != strconv.Itoa(i) ||
				l["key"] != "order-1" || l["message_id"] != want.ID.String() {
				t.Errorf("line %d = %v, want topic orders, partition 0, offset %d, key order-1, message_id %s", i, l, i, want.ID)
			}
		}
	}
}
