// Package broker runs an embedded broker that speaks the Kafka protocol, for
// development and tests: no JVM, no containers. It wraps franz-go's kfake
// cluster, so any Kafka client (franz-go, the Java client, librdkafka, kcat)
// can produce to it and consume from it, consumer groups included.
//
// Start it with [Start]; [Config] chooses the listen address, the number of
// brokers, the partitions of new topics, the largest accepted batch and,
// with DataDir, a directory that keeps topics, records and committed
// offsets across restarts:
//
//	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0"})
//	if err != nil {
//		return err
//	}
//	defer b.Close()
//	seeds := b.Addrs() // give these to any Kafka client
//
// Topics are created on first use when the client allows it, and
// [Config].SeedTopics are created at start. Tests can inject broker errors
// through [Broker.Cluster] (kfake's ControlKey).
//
// It is not a production broker: there is one copy of each partition, and
// durability is that of a single process writing to a local directory.
package broker
