package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/conf"
)

// Defaults of [Config].
const (
	// DefaultClientID is the default of Config.ClientID.
	DefaultClientID = "outbox-relay"
	// DefaultTopic is the default of Config.DefaultTopic.
	DefaultTopic = "outbox.events"
	// DefaultMaxBufferedRecords is the default of Config.MaxBufferedRecords.
	DefaultMaxBufferedRecords = 10000
	// DefaultMaxRunClients is the default of Config.MaxRunClients.
	DefaultMaxRunClients = 8
	// DefaultMaxMessageBytes is the default of Config.MaxMessageBytes:
	// Kafka's default message.max.bytes (1 MiB plus 12 bytes of batch
	// overhead).
	DefaultMaxMessageBytes = 1_048_588
	// DefaultDeliveryTimeout is the default of Config.DeliveryTimeout.
	DefaultDeliveryTimeout = 30 * time.Second
	// DefaultRequestTimeout is the default of Config.RequestTimeout.
	DefaultRequestTimeout = 10 * time.Second
	// UnknownTopicRetries is how many metadata refreshes the producer waits
	// for a topic that the cluster says does not exist before it fails the
	// topic's records with UNKNOWN_TOPIC_OR_PARTITION. Refreshes are at
	// least a second apart, so that takes a few seconds; after that the
	// sink refuses the topic's records at once until a metadata request
	// (every second) finds the topic.
	UnknownTopicRetries = 3
)

// metadataMinAge is the shortest time between two metadata refreshes.
const metadataMinAge = time.Second

// Config configures a [Sink]. Only Brokers is required.
type Config struct {
	// Brokers are the seed brokers, as host:port. Required.
	Brokers []string
	// ClientID is the Kafka client id, shown in broker logs and quotas.
	// Defaults to "outbox-relay".
	ClientID string
	// DefaultTopic is the topic of a message that names none and matches no
	// routing rule. Defaults to "outbox.events".
	DefaultTopic string
	// TopicByAggregateType routes messages without a topic by aggregate
	// type ("Order" -> "orders"). Defaults to none.
	TopicByAggregateType map[string]string
	// Route is custom routing for messages without a topic. When it returns
	// a non-empty topic, that topic wins over TopicByAggregateType and
	// DefaultTopic. Defaults to none.
	Route func(outbox.Record) string
	// AllowAutoTopicCreation lets the producer ask the broker to create a
	// missing topic (the broker must allow it too). Defaults to false: on a
	// real cluster topics are created on purpose, so that a mistyped topic
	// does not silently become a new topic no consumer reads. A record for
	// a missing topic then fails with a [sink.TopicError]
	// (UNKNOWN_TOPIC_OR_PARTITION): its message waits, without counting an
	// attempt, until the topic exists. The development broker ([broker])
	// creates topics on first use without being asked.
	//
	// [broker]: github.com/outbox-dev/outbox/broker
	AllowAutoTopicCreation bool
	// Linger is how long a partition waits for more records before it
	// sends a batch. Defaults to 0: send at once. Publish hands a whole
	// batch of records to the producer before it waits, so records queued
	// while a request is in flight are batched anyway; a linger only adds
	// latency to every Publish.
	Linger time.Duration
	// MaxBufferedRecords bounds the records buffered in the producer;
	// Publish blocks while the buffer is full, and PublishRuns flushes a
	// call's records in parts of at most this many. Defaults to 10000.
	MaxBufferedRecords int
	// MaxRunClients bounds the producer clients of [Sink.PublishRuns],
	// besides the one Publish uses. A call uses one of its own until its
	// records have an outcome: until it returns, or, when its context ended
	// first, until the records it sent have their outcome. A call waits
	// while all are busy. Defaults to 8.
	MaxRunClients int
	// MaxMessageBytes is the largest record batch the producer builds
	// (franz-go's ProducerBatchMaxBytes). Set it to at most the smallest
	// max.message.bytes of the topics written to. A record larger than it
	// fails at once with MESSAGE_TOO_LARGE (permanent) without reaching the
	// broker, and its neighbours are unaffected. If a topic's limit is
	// lower after all, Publish still succeeds for the records that fit on
	// their own (see [Sink.Publish]). Defaults to 1,048,588, Kafka's default
	// message.max.bytes.
	MaxMessageBytes int
	// DeliveryTimeout bounds how long a record may wait in the producer,
	// including retries, before it fails with a timeout (an
	// [sink.ErrUnavailable] error). A record already sent is only failed
	// once its request is answered, since the idempotent producer cannot
	// know whether the broker wrote it; the ctx given to Publish is the
	// hard bound on how long Publish waits. Defaults to 30s.
	DeliveryTimeout time.Duration
	// RequestTimeout is how long a broker may take to answer a produce
	// request. Defaults to 10s.
	RequestTimeout time.Duration
	// Limits are the rules a message's own headers must keep to be
	// published: the header limits of [outbox.Limits] and the names
	// Enqueue refuses (see [Record]). Set them to the store's Limits
	// (pgstore.Config.Limits) when those are not the defaults. Defaults to
	// outbox's defaults.
	Limits outbox.Limits
	// Security configures TLS and SASL. Defaults to plaintext without
	// authentication.
	Security Security
	// Logger receives the client's warnings and errors, and at debug level
	// a line per acknowledged record with its key (the aggregate id: keep
	// debug off where ids are personal data). Defaults to slog.Default().
	Logger *slog.Logger
	// ExtraOpts are passed to kgo.NewClient after the options built from
	// the fields above, so they override them. Defaults to none.
	ExtraOpts []kgo.Opt
}

// topicRe is Kafka's rule for topic names.
var topicRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

func validTopic(t string) bool { return topicRe.MatchString(t) && t != "." && t != ".." }

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	conf.Default(&c.ClientID, DefaultClientID)
	conf.Default(&c.DefaultTopic, DefaultTopic)
	conf.Default(&c.MaxBufferedRecords, DefaultMaxBufferedRecords)
	conf.Default(&c.MaxRunClients, DefaultMaxRunClients)
	conf.Default(&c.MaxMessageBytes, DefaultMaxMessageBytes)
	conf.Default(&c.DeliveryTimeout, DefaultDeliveryTimeout)
	conf.Default(&c.RequestTimeout, DefaultRequestTimeout)
	conf.Default(&c.Logger, slog.Default())
	c.Limits = c.Limits.WithDefaults()
	return c
}

// ErrInvalidConfig is wrapped by the error [New] returns for a Config it
// cannot use, and by [Security.Opts]'s; the message names the bad field.
var ErrInvalidConfig = errors.New("kafka: invalid config")

// validate reports the first bad field of a defaulted config.
func (c Config) validate() error {
	return conf.First(ErrInvalidConfig,
		conf.Rule("Brokers", len(c.Brokers) > 0, "needs at least one seed broker"),
		conf.Each("Brokers", c.Brokers, conf.NotEmpty),
		topicRule("DefaultTopic", c.DefaultTopic),
		c.routesRule(),
		conf.NotNegative("Linger", c.Linger),
		conf.NotNegative("MaxBufferedRecords", c.MaxBufferedRecords),
		conf.NotNegative("MaxRunClients", c.MaxRunClients),
		conf.Rule("MaxMessageBytes", c.MaxMessageBytes >= 512 && c.MaxMessageBytes <= 1<<30,
			"must be between 512 and 1 GiB, not %d", c.MaxMessageBytes),
		conf.NotNegative("DeliveryTimeout", c.DeliveryTimeout),
		conf.NotNegative("RequestTimeout", c.RequestTimeout),
		c.Limits.Validate(),
	)
}

// routesRule checks the topics of TopicByAggregateType, in the order of
// the aggregate types.
func (c Config) routesRule() error {
	for _, at := range slices.Sorted(maps.Keys(c.TopicByAggregateType)) {
		if err := topicRule(fmt.Sprintf("TopicByAggregateType[%q]", at), c.TopicByAggregateType[at]); err != nil {
			return err
		}
	}
	return nil
}

// topicRule checks that field's topic t is a name Kafka allows.
func topicRule(field, t string) error {
	return conf.Rule(field, validTopic(t), "%q is not a valid topic name", t)
}
