package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// Publish outbox records to Kafka (here an embedded broker that, like a
// production cluster, does not create topics) and sort the outcomes the way
// the relay does. The second record names a topic that does not exist: not
// the message's fault, so it waits for the topic instead of becoming a dead
// letter.
func Example() {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", SeedTopics: []string{"orders"}, NoAutoCreateTopics: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	s, err := kafka.New(kafka.Config{
		Brokers:              b.Addrs(),
		TopicByAggregateType: map[string]string{"Order": "orders"},
		Security:             kafka.Security{}, // TLS and SASL go here
		Logger:               slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	recs := []outbox.Record{
		{Message: outbox.Message{
			ID: uuid.Must(uuid.NewV7()), AggregateType: "Order", AggregateID: "order-42",
			EventType: "OrderPlaced", EventVersion: 1, ContentType: outbox.ContentTypeJSON,
			Payload: []byte(`{"total":1999}`),
		}},
		{Message: outbox.Message{
			ID: uuid.Must(uuid.NewV7()), AggregateType: "Order", AggregateID: "order-43",
			EventType: "OrderPlaced", EventVersion: 1, ContentType: outbox.ContentTypeJSON,
			Payload: []byte(`{"total":5}`), Topic: "no-such-topic",
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, err := range s.Publish(ctx, recs) {
		switch sink.Classify(err) {
		case sink.Permanent:
			fmt.Printf("%s: dead letter\n", recs[i].AggregateID)
		case sink.TopicUnavailable:
			fmt.Printf("%s: waits for its topic (%v)\n", recs[i].AggregateID, errors.Is(err, kerr.UnknownTopicOrPartition))
		case sink.Unavailable:
			fmt.Printf("%s: broker down, retry later\n", recs[i].AggregateID)
		default:
			if err == nil {
				fmt.Printf("%s: published to %s\n", recs[i].AggregateID, s.Topic(recs[i]))
			} else {
				fmt.Printf("%s: retry\n", recs[i].AggregateID)
			}
		}
	}
	// Output:
	// order-42: published to orders
	// order-43: waits for its topic (true)
}
