package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/freeport"
)

func start(t *testing.T, cfg broker.Config) *broker.Broker {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// produce writes n records keyed k0..k{n-1} with values v0..v{n-1} to topic
// with an acks=all idempotent producer, and fails the test on any error.
func produce(t *testing.T, addrs []string, topic string, from, n int) {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeGroup reads n records of topic as a member of group, commits them,
// and returns "key=value" per record, in order within each key.
func consumeGroup(t *testing.T, addrs []string, group, topic string, n int) map[string]string {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[string]string{}
	for count := 0; count < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d records before the deadline", group, count, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := got[string(r.Key)]; dup {
				t.Errorf("key %s read twice", r.Key)
			}
			got[string(r.Key)] = string(r.Value)
			count++
		})
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return got
}

func wantRecords(t *testing.T, got map[string]string, from, n int) {
	t.Helper()
	if len(got) != n {
		t.Errorf("read %d records, want %d: %v", len(got), n, got)
	}
	for i := from; i < from+n; i++ {
		if v := got[fmt.Sprintf("k%d", i)]; v != fmt.Sprintf("v%d", i) {
			t.Errorf("k%d = %q, want v%d", i, v, i)
		}
	}
}

func TestStart_ProduceAndConsumeWithGroup(t *testing.T) {
	t.Parallel()
	b := start(t, broker.Config{Brokers: 3})
	addrs := b.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs = %v, want 3 brokers", addrs)
	}
	for _, a := range addrs {
		if host, port, _ := net.SplitHostPort(a); host != "127.0.0.1" || port == "0" {
			t.Errorf("broker address %s, want 127.0.0.1 and a real port", a)
		}
	}
	produce(t, addrs, "orders", 0, 50)
	wantRecords(t, consumeGroup(t, addrs, "billing", "orders", 50), 0, 50)
}

func TestStart_AutoCreatedTopicsHaveConfiguredPartitions(t *testing.T) {
	t.Parallel()
	b := start(t, broker.Config{Partitions: 5, SeedTopics: []string{"seeded"}})
	produce(t, b.Addrs(), "auto", 0, 1)
	for topic, want := range map[string]int{"seeded": 5, "auto": 5} {
		if got := partitions(t, b.Addrs(), topic); got != want {
			t.Errorf("topic %s has %d partitions, want %d", topic, got, want)
		}
	}
}

// produceNoAutoCreate writes one record to topic with a producer that does
// not ask for topics to be created (the relay's default) and returns the
// record's error.
func produceNoAutoCreate(t *testing.T, addrs []string, topic string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.UnknownTopicRetries(1), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

func TestStart_CreatesTopicOnFirstUse_WithoutTheClientAsking(t *testing.T) {
	t.Parallel()
	b := start(t, broker.Config{Partitions: 2})
	if err := produceNoAutoCreate(t, b.Addrs(), "first-use"); err != nil {
		t.Fatalf("produce to a new topic without auto creation: %v; the development broker must create it", err)
	}
	if got := partitions(t, b.Addrs(), "first-use"); got != 2 {
		t.Errorf("topic first-use has %d partitions, want 2", got)
	}
}

func TestStart_NoAutoCreateTopics_RefusesUnknownTopicLikeACluster(t *testing.T) {
	t.Parallel()
	b := start(t, broker.Config{NoAutoCreateTopics: true})
	err := produceNoAutoCreate(t, b.Addrs(), "missing")
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to a missing topic = %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	produce(t, b.Addrs(), "asked", 0, 1) // a client that asks still gets its topic
}

func TestStart_AdvertisesListenHost(t *testing.T) {
	t.Parallel()
	b := start(t, broker.Config{Listen: "localhost:0"})
	if host, _, _ := net.SplitHostPort(b.Addrs()[0]); host != "localhost" {
		t.Errorf("Addrs = %v, want the listen host localhost", b.Addrs())
	}
	meta := metadata(t, b.Addrs())
	if len(meta.Brokers) != 1 || meta.Brokers[0].Host != "localhost" {
		t.Errorf("metadata brokers = %+v, want host localhost", meta.Brokers)
	}

	all := start(t, broker.Config{Listen: "0.0.0.0:0"})
	if host, _, _ := net.SplitHostPort(all.Addrs()[0]); host != "127.0.0.1" {
		t.Errorf("listening on 0.0.0.0: Addrs = %v, want 127.0.0.1 advertised", all.Addrs())
	}
	produce(t, all.Addrs(), "t", 0, 1)
}

func TestStart_FixedPort(t *testing.T) {
	t.Parallel()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	b := start(t, broker.Config{Listen: addr})
	if got := b.Addrs(); len(got) != 1 || got[0] != addr {
		t.Errorf("Addrs = %v, want [%s]", got, addr)
	}
	// The port is taken now: a second broker on it fails.
	if _, err := broker.Start(broker.Config{Listen: addr, Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Error("second Start on a port in use succeeded")
	}
}

func TestStart_MaxMessageBytes_RefusesLargerBatch(t *testing.T) {
	t.Parallel()
	b := start(t, broker.Config{MaxMessageBytes: 1000})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(strings.Repeat("x", 2000))}).FirstErr()
	if err == nil || !strings.Contains(err.Error(), kerr.MessageTooLarge.Message) {
		t.Errorf("producing 2000 bytes: err = %v, want MESSAGE_TOO_LARGE", err)
	}
}

func TestStart_DataDir_RecordsAndOffsetsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := broker.Config{DataDir: dir, SeedTopics: []string{"orders"}}

	first := start(t, cfg)
	produce(t, first.Addrs(), "orders", 0, 20)
	wantRecords(t, consumeGroup(t, first.Addrs(), "billing", "orders", 20), 0, 20)
	first.Close()

	second := start(t, cfg) // seed topic exists already: no error
	produce(t, second.Addrs(), "orders", 20, 5)
	// A new group sees everything, from before and after the restart.
	wantRecords(t, consumeGroup(t, second.Addrs(), "audit", "orders", 25), 0, 25)
	// The old group resumes after its committed offsets.
	wantRecords(t, consumeGroup(t, second.Addrs(), "billing", "orders", 5), 20, 5)
}

func TestStart_InvalidConfig_NamesField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   broker.Config
		field string
	}{
		{broker.Config{Listen: "no-port"}, "Listen"},
		{broker.Config{Listen: "127.0.0.1:http"}, "Listen"},
		{broker.Config{Listen: "127.0.0.1:0", Brokers: -1}, "Brokers"},
		{broker.Config{Listen: "127.0.0.1:65535", Brokers: 2}, "Brokers"},
		{broker.Config{Listen: "127.0.0.1:0", Partitions: -3}, "Partitions"},
		{broker.Config{Listen: "127.0.0.1:0", MaxMessageBytes: -1}, "MaxMessageBytes"},
		{broker.Config{Listen: "127.0.0.1:0", SeedTopics: []string{""}}, "SeedTopics[0]"},
	} {
		b, err := broker.Start(tc.cfg)
		if err == nil {
			b.Close()
		}
		if !errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), "invalid config: "+tc.field+" ") {
			t.Errorf("Start(%+v): err = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
	}
}

func TestClose_Twice(t *testing.T) {
	t.Parallel()
	b := start(t, broker.Config{})
	b.Close()
	b.Close()
}

func metadata(t *testing.T, addrs []string) *kmsg.MetadataResponse {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	return resp
}

func partitions(t *testing.T, addrs []string, topic string) int {
	t.Helper()
	for _, tp := range metadata(t, addrs).Topics {
		if tp.Topic != nil && *tp.Topic == topic {
			return len(tp.Partitions)
		}
	}
	t.Fatalf("topic %s not found", topic)
	return 0
}
