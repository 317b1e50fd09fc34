package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// newCluster starts a one-broker kfake cluster that the test closes.
func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// newSink returns a Sink on the cluster's brokers that the test closes.
func newSink(t *testing.T, c *kfake.Cluster, cfg kafka.Config) *kafka.Sink {
	t.Helper()
	if cfg.Brokers == nil {
		cfg.Brokers = c.ListenAddrs()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := kafka.New(cfg)
	if err != nil {
		t.Fatalf("kafka.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var seq atomic.Int64

// rec returns a stored message of aggregate ("Order", aggID) with a JSON
// payload naming n.
func rec(aggID string, n int) outbox.Record {
	return outbox.Record{
		Message: outbox.Message{
			ID:            uuid.Must(uuid.NewV7()),
			AggregateType: "Order",
			AggregateID:   aggID,
			EventType:     "OrderPlaced",
			EventVersion:  1,
			Payload:       fmt.Appendf(nil, `{"n":%d}`, n),
			ContentType:   outbox.ContentTypeJSON,
		},
		Seq:       seq.Add(1),
		CreatedAt: time.Now(),
		Status:    outbox.StatusInFlight,
	}
}

// withPayloadSize pads r's JSON payload to size bytes.
func withPayloadSize(r outbox.Record, size int) outbox.Record {
	// Random letters, so that compression cannot shrink the record.
	pad := make([]byte, size-len(`{"pad":""}`))
	for i := range pad {
		pad[i] = 'a' + byte(rand.IntN(26))
	}
	r.Payload = []byte(`{"pad":"` + string(pad) + `"}`)
	return r
}

// publish publishes recs with a 15 s deadline and fails the test on any
// error.
func publish(t *testing.T, s *kafka.Sink, recs ...outbox.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i, err := range s.Publish(ctx, recs) {
		if err != nil {
			t.Fatalf("publish record %d: %v", i, err)
		}
	}
}

// consume reads topic from the start with a plain franz-go consumer until
// it has n records, and returns them ordered by partition, then offset.
func consume(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s before the deadline", len(out), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s[%d]: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

// consumeUntil reads topic until it sees the record with eventId id, and
// returns everything read, ordered by partition, then offset.
func consumeUntil(t *testing.T, brokers []string, topic string, id uuid.UUID) []*kgo.Record {
	t.Helper()
	for n := 1; ; n++ {
		recs := consume(t, brokers, topic, n)
		for _, r := range recs {
			if header(r, kafka.HeaderEventID) == id.String() {
				return recs
			}
		}
	}
}

func header(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

// murmur2 is Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2),
// written here from the algorithm so the test does not trust franz-go's.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// javaPartition is the partition the Java client's default partitioner
// picks for a keyed record: toPositive(murmur2(key)) % partitions.
func javaPartition(key string, partitions int) int32 {
	return (murmur2([]byte(key)) & 0x7fffffff) % int32(partitions)
}
