// Package kafka is the [sink.Sink] for Apache Kafka and every broker that
// speaks its protocol (Redpanda, WarpStream, the embedded [broker]), built on
// franz-go.
//
// Give it to a relay, or publish records with it:
//
//	snk, err := kafka.New(kafka.Config{
//		Brokers:              []string{"localhost:9092"},
//		TopicByAggregateType: map[string]string{"Order": "orders"},
//	})
//	...
//	defer snk.Close()
//	r, err := relay.New(relay.Config{Store: st, Sink: snk})
//	...
//	for i, err := range snk.Publish(ctx, recs) { // nil once the broker acknowledged
//		fmt.Println(recs[i].ID, sink.Classify(err)) // whose fault, and what to do
//	}
//
// # The record contract
//
// Every outbox message becomes one Kafka record (see [Record]):
//
//   - key: the aggregate id, so all events of an aggregate land on one
//     partition, in order. Partitions are chosen with murmur2 like the Java
//     client's default partitioner, so Kafka Streams and every other client
//     agree on the partition of a key.
//   - value: the payload, unchanged.
//   - headers, in this order: eventId, eventType, eventVersion,
//     aggregateType, aggregateId, correlationId, causationId, traceparent
//     (only when set), contentType, then the message's own headers sorted
//     by name. Values are UTF-8 text; eventVersion is a decimal number.
//   - timestamp: the time of publishing (CreateTime).
//
// The relay's headers are always the relay's: a stored message whose own
// headers use one of their names (in any case) or break a header limit of
// Config.Limits is not published but refused with a permanent error naming
// the header, so the relay dead-letters it (see [Record]).
//
// # Topics
//
// A message's Topic wins; without one, Config.Route decides, then
// Config.TopicByAggregateType, then Config.DefaultTopic ("outbox.events").
// Topics are expected to exist: with auto creation off (the default), a
// record for a missing topic fails with a [sink.TopicError]
// (UNKNOWN_TOPIC_OR_PARTITION), which is not the message's fault: the
// relay keeps the message waiting, in order and without counting an
// attempt, and the other topics flow. The sink logs such a topic at most
// every 30 seconds with the fix, refuses its records at once instead of
// waiting for metadata each time, and asks the cluster every second
// whether it exists now. [Sink.CheckTopics] checks the configured topics
// at start; [Sink.Topics] reports each topic's state and counts, and the
// first acknowledgement of each topic is logged once, so that a mistyped
// topic shows.
//
// # Delivery
//
// The producer waits for all in-sync replicas (acks=all) and is idempotent,
// so its own retries neither duplicate nor reorder records. Publish returns
// only when the broker has answered for every record or the caller's
// context ends. A record the caller gave up on may still be written, so
// delivery is at least once: consumers deduplicate by eventId.
//
// # Runs
//
// [Sink.PublishRuns] publishes calls that hold several consecutive records
// of one aggregate (a run), and keeps each aggregate's order without a gap:
// a record never reaches the topic ahead of, or without, an earlier record
// of its aggregate in the call. When a record fails, the later records of
// its aggregate fail too, with the broker's error or one wrapping
// [sink.ErrNotSent]. A run is kept whole within one partition, so it is cut
// where its records change topic. Each call in progress uses a producer
// client of its own (at most Config.MaxRunClients), which sends the call's
// records only once all are in their partitions' buffers with nothing
// failed ahead of them, and takes no other record until they have their
// outcome: one more producer client, with its connections, per concurrent
// call.
//
// # Errors
//
// [ClassifyError] sorts produce errors into the classes of package sink by
// whose fault they are: a record that is itself bad ([sink.ErrPermanent],
// such as MESSAGE_TOO_LARGE), a topic that cannot take records now
// ([sink.TopicError], such as UNKNOWN_TOPIC_OR_PARTITION or
// TOPIC_AUTHORIZATION_FAILED), an unreachable or silent cluster or one
// that refuses the client as a whole ([sink.ErrUnavailable]), and the
// rest (retriable). Error texts keep the broker's reason.
//
// # Security
//
// [Security] turns on TLS (with a CA file and a client certificate for
// mutual TLS) and SASL PLAIN or SCRAM. It never prints the password.
//
// [broker]: github.com/outbox-dev/outbox/broker
package kafka
