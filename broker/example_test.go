package broker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/broker"
)

// Start an embedded broker on a free port, produce a record and read it back
// with a consumer group.
func Example() {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", SeedTopics: []string{"greetings"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	producer, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	rec := &kgo.Record{Topic: "greetings", Key: []byte("k"), Value: []byte("hello")}
	if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		log.Fatal(err)
	}

	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(b.Addrs()...),
		kgo.ConsumerGroup("readers"),
		kgo.ConsumeTopics("greetings"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()
	fetches := consumer.PollFetches(ctx)
	fetches.EachRecord(func(r *kgo.Record) {
		fmt.Printf("%s: %s=%s\n", r.Topic, r.Key, r.Value)
	})
	// Output: greetings: k=hello
}
