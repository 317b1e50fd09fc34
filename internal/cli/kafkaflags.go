package cli

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// defaultKafkaBroker is where --kafka-brokers points by default: the address
// 'outbox broker' listens on by default.
const defaultKafkaBroker = "127.0.0.1:9092"

// kafkaFlags are the flags that configure a Kafka sink. Any command that
// publishes adds them with addKafkaFlags.
type kafkaFlags struct {
	brokers          []string
	clientID         string
	defaultTopic     string
	topicRoutes      []string
	autoCreateTopics bool
	maxMessageBytes  int
	maxHeaders       int
	maxHeaderValue   int
	deliveryTimeout  time.Duration
	requestTimeout   time.Duration

	tls                   bool
	tlsCA                 string
	tlsCert               string
	tlsKey                string
	tlsInsecureSkipVerify bool
	tlsServerName         string

	saslMechanism string
	saslUsername  string
	saslPassword  string
}

func addKafkaFlags(fs *pflag.FlagSet, k *kafkaFlags) {
	fs.StringSliceVar(&k.brokers, "kafka-brokers", []string{defaultKafkaBroker}, "Kafka seed brokers, comma-separated `host:port` list")
	fs.StringVar(&k.clientID, "kafka-client-id", kafka.DefaultClientID, "Kafka client `id`, shown in broker logs and quotas")
	fs.StringVar(&k.defaultTopic, "default-topic", kafka.DefaultTopic, "`topic` of events that name none and match no --topic-route")
	fs.StringSliceVar(&k.topicRoutes, "topic-route", nil, "route events without a topic by aggregate type: `AggregateType=topic` (repeatable, or comma-separated)")
	fs.BoolVar(&k.autoCreateTopics, "kafka-auto-create-topics", false, "let the producer ask the broker to create missing topics (the broker must allow it). Off by default, so that a mistyped topic does not become a new topic: messages for a missing topic wait until it exists. 'outbox broker' creates topics on first use without it")
	fs.IntVar(&k.maxMessageBytes, "kafka-max-message-bytes", kafka.DefaultMaxMessageBytes, "largest record batch the producer builds, in `bytes`; at most the topics' max.message.bytes")
	fs.IntVar(&k.maxHeaders, "max-headers", outbox.DefaultMaxHeaders, "most headers of its own a message may carry; a message with more is dead-lettered. Set it to the writers' outbox.Limits.MaxHeaders")
	fs.IntVar(&k.maxHeaderValue, "max-header-value-bytes", outbox.DefaultMaxHeaderValueBytes, "longest value of a message's own header, in `bytes`; a message with a longer one is dead-lettered. Set it to the writers' outbox.Limits.MaxHeaderValueBytes")
	fs.DurationVar(&k.deliveryTimeout, "kafka-delivery-timeout", kafka.DefaultDeliveryTimeout, "how long a record may wait in the producer, retries included")
	fs.DurationVar(&k.requestTimeout, "kafka-request-timeout", kafka.DefaultRequestTimeout, "how long a broker may take to answer a produce request")

	addKafkaSecurityFlags(fs, k)
}

// kafkaSecurityFlags are the flags addKafkaSecurityFlags adds: TLS and SASL.
var kafkaSecurityFlags = []string{
	"kafka-tls", "kafka-tls-ca", "kafka-tls-cert", "kafka-tls-key",
	"kafka-tls-insecure-skip-verify", "kafka-tls-server-name",
	"kafka-sasl-mechanism", "kafka-sasl-username", "kafka-sasl-password",
}

// addKafkaSecurityFlags adds the TLS and SASL flags (kafkaSecurityFlags) of
// k; k.security turns them into a kafka.Security. addKafkaFlags includes
// them; a command whose Kafka clients are not configured by the other
// flags (outbox-lab's demo) adds only these.
func addKafkaSecurityFlags(fs *pflag.FlagSet, k *kafkaFlags) {
	fs.BoolVar(&k.tls, "kafka-tls", false, "connect to the brokers with TLS")
	fs.StringVar(&k.tlsCA, "kafka-tls-ca", "", "PEM `file` of the CA certificates that sign the brokers' certificates (default: the system's roots)")
	fs.StringVar(&k.tlsCert, "kafka-tls-cert", "", "PEM client certificate `file` for mutual TLS (with --kafka-tls-key)")
	fs.StringVar(&k.tlsKey, "kafka-tls-key", "", "PEM private key `file` of --kafka-tls-cert")
	fs.BoolVar(&k.tlsInsecureSkipVerify, "kafka-tls-insecure-skip-verify", false, "do not verify the brokers' certificates (development only)")
	fs.StringVar(&k.tlsServerName, "kafka-tls-server-name", "", "`name` to verify in the brokers' certificates (default: each broker's host)")

	fs.StringVar(&k.saslMechanism, "kafka-sasl-mechanism", "", "SASL `mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no authentication)")
	fs.StringVar(&k.saslUsername, "kafka-sasl-username", "", "SASL `user` name")
	fs.StringVar(&k.saslPassword, "kafka-sasl-password", "", "SASL `password`; prefer the environment variable or the config file, command lines are visible to other users")
	markSensitive(fs, "kafka-sasl-password")
}

// kafkaFieldFlags maps the kafka.Config fields that the sink's validation
// names to the flags that set them.
var kafkaFieldFlags = []struct{ field, flag string }{
	{"Brokers", "kafka-brokers"},
	{"DefaultTopic", "default-topic"},
	{"TopicByAggregateType", "topic-route"},
	{"MaxMessageBytes", "kafka-max-message-bytes"},
	{"DeliveryTimeout", "kafka-delivery-timeout"},
	{"RequestTimeout", "kafka-request-timeout"},
	{"Security.CAFile", "kafka-tls-ca"},
	{"Security.CertFile", "kafka-tls-cert"},
	{"Security.KeyFile", "kafka-tls-key"},
	{"Security.InsecureSkipVerify", "kafka-tls-insecure-skip-verify"},
	{"Security.ServerName", "kafka-tls-server-name"},
	{"Security.SASLMechanism", "kafka-sasl-mechanism"},
	{"Security.Username", "kafka-sasl-username"},
	{"Security.Password", "kafka-sasl-password"},
}

// config checks the flags and returns the sink's Config. Errors name the
// flag and the rule.
func (k *kafkaFlags) config(logger *slog.Logger) (kafka.Config, error) {
	if len(k.brokers) == 0 {
		return kafka.Config{}, flagError("kafka-brokers", "must name at least one host:port")
	}
	for _, b := range k.brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return kafka.Config{}, flagError("kafka-brokers", "must be a list of host:port, not %q", b)
		}
	}
	routes := make(map[string]string, len(k.topicRoutes))
	for _, r := range k.topicRoutes {
		typ, topic, ok := strings.Cut(r, "=")
		typ, topic = strings.TrimSpace(typ), strings.TrimSpace(topic)
		if !ok || typ == "" || topic == "" {
			return kafka.Config{}, flagError("topic-route", "must be AggregateType=topic, not %q", r)
		}
		if prev, dup := routes[typ]; dup && prev != topic {
			return kafka.Config{}, flagError("topic-route", "routes aggregate type %q twice (to %q and %q)", typ, prev, topic)
		}
		routes[typ] = topic
	}
	if k.maxMessageBytes <= 0 {
		return kafka.Config{}, flagError("kafka-max-message-bytes", "must be positive, not %d", k.maxMessageBytes)
	}
	if k.maxHeaders <= 0 {
		return kafka.Config{}, flagError("max-headers", "must be positive, not %d", k.maxHeaders)
	}
	if k.maxHeaderValue <= 0 {
		return kafka.Config{}, flagError("max-header-value-bytes", "must be positive, not %d", k.maxHeaderValue)
	}
	if k.deliveryTimeout <= 0 {
		return kafka.Config{}, flagError("kafka-delivery-timeout", "must be positive, not %s", k.deliveryTimeout)
	}
	if k.requestTimeout <= 0 {
		return kafka.Config{}, flagError("kafka-request-timeout", "must be positive, not %s", k.requestTimeout)
	}
	if k.defaultTopic == "" {
		return kafka.Config{}, flagError("default-topic", "must not be empty")
	}
	return kafka.Config{
		Brokers:                k.brokers,
		ClientID:               k.clientID,
		DefaultTopic:           k.defaultTopic,
		TopicByAggregateType:   routes,
		AllowAutoTopicCreation: k.autoCreateTopics,
		MaxMessageBytes:        k.maxMessageBytes,
		Limits:                 outbox.Limits{MaxHeaders: k.maxHeaders, MaxHeaderValueBytes: k.maxHeaderValue},
		DeliveryTimeout:        k.deliveryTimeout,
		RequestTimeout:         k.requestTimeout,
		Security:               k.security(),
		Logger:                 logger,
	}, nil
}

// security returns the TLS and SASL settings of the flags. kafka.Security's
// Opts checks them; kafkaConfigError names the flag of a field it rejects.
func (k *kafkaFlags) security() kafka.Security {
	return kafka.Security{
		TLS:                k.tls,
		CAFile:             k.tlsCA,
		CertFile:           k.tlsCert,
		KeyFile:            k.tlsKey,
		InsecureSkipVerify: k.tlsInsecureSkipVerify,
		ServerName:         k.tlsServerName,
		SASLMechanism:      k.saslMechanism,
		Username:           k.saslUsername,
		Password:           k.saslPassword,
	}
}

// newSink creates the Kafka sink for a relay that publishes up to calls
// batches at once: it may keep that many run clients (Config.MaxRunClients,
// at least its default). A configuration error that kafka.New finds is
// reported as a usage error naming the flag.
func (k *kafkaFlags) newSink(logger *slog.Logger, calls int) (*kafka.Sink, error) {
	cfg, err := k.config(logger)
	if err != nil {
		return nil, err
	}
	cfg.MaxRunClients = max(kafka.DefaultMaxRunClients, calls)
	s, err := kafka.New(cfg)
	if err != nil {
		return nil, kafkaConfigError(err)
	}
	return s, nil
}

// kafkaConfigError points a kafka.New error at the flag that sets the field
// it names, if it names one.
func kafkaConfigError(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "config: ") {
		return fmt.Errorf("create Kafka sink: %w", err)
	}
	// The longest field name that appears wins, so that Security.CertFile
	// is not mistaken for a shorter field.
	best := ""
	for _, ff := range kafkaFieldFlags {
		if strings.Contains(msg, "config: "+ff.field) && len(ff.field) > len(best) {
			best = ff.field
		}
	}
	for _, ff := range kafkaFieldFlags {
		if ff.field == best {
			return &usageError{fmt.Errorf("--%s: %w", ff.flag, err)}
		}
	}
	return &usageError{fmt.Errorf("bad --kafka-* flags: %w", err)}
}

// logAttrs describes the Kafka settings for a log line, without secrets.
func (k *kafkaFlags) logAttrs() []any {
	brokers := make([]string, len(k.brokers))
	for i, b := range k.brokers {
		brokers[i] = RedactURL(b)
	}
	attrs := []any{slog.Any("brokers", brokers), slog.String("client_id", k.clientID), slog.String("default_topic", k.defaultTopic)}
	if len(k.topicRoutes) > 0 {
		attrs = append(attrs, slog.Any("topic_routes", k.topicRoutes))
	}
	attrs = append(attrs, slog.Bool("tls", k.tls))
	if k.saslMechanism != "" {
		attrs = append(attrs, slog.String("sasl_mechanism", k.saslMechanism), slog.String("sasl_username", k.saslUsername))
	}
	return attrs
}
