package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-dev/outbox/internal/conf"
)

// Defaults of [Config].
const (
	// DefaultListen is the default of Config.Listen.
	DefaultListen = "127.0.0.1:9092"
	// DefaultPartitions is the default of Config.Partitions.
	DefaultPartitions = 3
	// DefaultMaxMessageBytes is the default of Config.MaxMessageBytes:
	// Kafka's own default message.max.bytes (1 MiB plus 12 bytes of record
	// batch overhead).
	DefaultMaxMessageBytes = 1_048_588
)

// Config configures an embedded broker. The zero value is one broker on
// 127.0.0.1:9092, in memory.
type Config struct {
	// Listen is the host:port of the first broker. Broker i listens on
	// port+i of the same host; with port 0 every broker takes any free
	// port. Defaults to "127.0.0.1:9092".
	Listen string
	// AdvertisedHost is the host the brokers give clients in metadata.
	// Defaults to the host of Listen, or 127.0.0.1 when that is empty or
	// unspecified (0.0.0.0, ::): set it when clients on other machines
	// connect to a broker listening on every interface.
	AdvertisedHost string
	// Brokers is the number of brokers in the cluster. Defaults to 1.
	Brokers int
	// Partitions is the partition count of seed topics and of topics
	// created automatically or without a count. Defaults to 3.
	Partitions int
	// DataDir is where the cluster keeps its state (topics, records,
	// consumer group offsets), so that a broker started again on the same
	// directory carries on where the last one stopped. Defaults to "":
	// memory only.
	DataDir string
	// MaxMessageBytes is the broker's message.max.bytes: the largest record
	// batch it accepts. Defaults to 1,048,588, Kafka's default.
	MaxMessageBytes int
	// SeedTopics are created at Start, with Partitions partitions, unless
	// they exist. Defaults to none.
	SeedTopics []string
	// NoAutoCreateTopics makes the broker answer UNKNOWN_TOPIC_OR_PARTITION
	// for a topic that does not exist, as a production cluster does, unless
	// the client asks for automatic creation (kgo.AllowAutoTopicCreation).
	// Defaults to false: a topic a client names is created on first use,
	// whether or not the client asks for it, so that the relay's defaults
	// work against a development broker.
	NoAutoCreateTopics bool
	// Logger receives the cluster's log; its per-request messages are at
	// debug level. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	conf.Default(&c.Listen, DefaultListen)
	conf.Default(&c.Brokers, 1)
	conf.Default(&c.Partitions, DefaultPartitions)
	conf.Default(&c.MaxMessageBytes, DefaultMaxMessageBytes)
	conf.Default(&c.Logger, slog.Default())
	return c
}

// ErrInvalidConfig is wrapped by the error [Start] returns for a Config it
// cannot use; the message names the bad field.
var ErrInvalidConfig = errors.New("broker: invalid config")

// validate checks c after defaults and names the first bad field. It
// returns the host and the port of c.Listen.
func (c Config) validate() (host string, port int, err error) {
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return "", 0, conf.First(ErrInvalidConfig, conf.Bad("Listen", "%q: %v", c.Listen, err))
	}
	port, err = strconv.Atoi(portStr)
	return host, port, conf.First(ErrInvalidConfig,
		conf.Rule("Listen", err == nil && port >= 0 && port <= 65535, "port %q is not a number from 0 to 65535", portStr),
		conf.AtLeast("Brokers", c.Brokers, 1),
		conf.Rule("Brokers", port == 0 || port+c.Brokers-1 <= 65535, "%d brokers from port %d run past port 65535", c.Brokers, port),
		conf.AtLeast("Partitions", c.Partitions, 1),
		conf.AtLeast("MaxMessageBytes", c.MaxMessageBytes, 1),
		conf.Each("SeedTopics", c.SeedTopics, conf.NotEmpty),
	)
}

// Broker is a running embedded cluster.
type Broker struct {
	cluster   *kfake.Cluster
	addrs     []string
	closeOnce sync.Once
}

// Start starts the cluster and returns once every broker listens and the
// seed topics exist. A topic is created the first time a client names it
// (see Config.NoAutoCreateTopics). A bad cfg gives an error that wraps
// [ErrInvalidConfig] and names the field.
func Start(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	host, port, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	cluster, err := kfake.NewCluster(cfg.clusterOpts(host, port)...)
	if err != nil {
		return nil, fmt.Errorf("broker: start on %s: %w", cfg.Listen, err)
	}
	if !cfg.NoAutoCreateTopics {
		createOnFirstUse(cluster)
	}
	b := &Broker{cluster: cluster, addrs: cluster.ListenAddrs()}
	if len(cfg.SeedTopics) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.CreateTopics(ctx, cfg.Partitions, cfg.SeedTopics...); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// advertisedHost is the host the brokers give clients: AdvertisedHost, or
// else the host of Listen, or 127.0.0.1 when that is empty or unspecified.
func (c Config) advertisedHost(host string) string {
	if c.AdvertisedHost != "" {
		return c.AdvertisedHost
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "127.0.0.1"
	}
	return host
}

// clusterOpts are the kfake options of c's cluster, whose first broker
// listens on host:port (port 0: each broker on any free port).
func (c Config) clusterOpts(host string, port int) []kfake.Opt {
	ports := make([]int, c.Brokers)
	if port != 0 {
		for i := range ports {
			ports[i] = port + i
		}
	}
	opts := []kfake.Opt{
		kfake.Ports(ports...),
		kfake.ListenFn(listenAdvertising(host, c.advertisedHost(host))),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(c.Partitions),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(c.MaxMessageBytes)}),
		kfake.WithLogger(slogLogger{c.Logger}),
	}
	if c.DataDir != "" {
		opts = append(opts, kfake.DataDir(c.DataDir))
	}
	return opts
}

// listenAdvertising is a kfake.ListenFn. kfake listens on 127.0.0.1 and
// advertises the listener's address; this one listens on host, on the
// port kfake asks for, and advertises the advertised host with the port it
// got.
func listenAdvertising(host, advertised string) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		_, p, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen(network, net.JoinHostPort(host, p))
		if err != nil {
			return nil, err
		}
		_, actual, err := net.SplitHostPort(ln.Addr().String())
		if err != nil {
			ln.Close()
			return nil, err
		}
		return advertisedListener{ln, advertisedAddr(net.JoinHostPort(advertised, actual))}, nil
	}
}

// createOnFirstUse makes every metadata request that names topics ask for
// their creation, so that a topic is created the first time a client
// names it. Requests for all topics (no names) create nothing.
func createOnFirstUse(c *kfake.Cluster) {
	c.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if m, ok := req.(*kmsg.MetadataRequest); ok && len(m.Topics) > 0 {
			m.AllowAutoTopicCreation = true
		}
		return nil, nil, false
	})
}

// CreateTopics creates those of topics that do not exist yet, with
// partitions partitions each (0 or less: Config.Partitions), as a Kafka
// admin client would: the seed topics at Start, or a topic that a relay
// waits for. An error names the topic the broker refused. A restarted
// cluster keeps its topics, so this is done with a request rather than
// kfake.SeedTopics, which only applies to a cluster started afresh.
func (b *Broker) CreateTopics(ctx context.Context, partitions int, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...))
	if err != nil {
		return fmt.Errorf("broker: create topics: %w", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t
		rt.NumPartitions = int32(partitions)
		if partitions <= 0 {
			rt.NumPartitions = -1 // the broker's default, Config.Partitions
		}
		rt.ReplicationFactor = -1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("broker: create topics: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("broker: create topic %s: %w", t.Topic, err)
		}
	}
	return nil
}

// Addrs returns the host:port of every broker, as clients should dial them.
func (b *Broker) Addrs() []string { return slices.Clone(b.addrs) }

// Cluster returns the underlying kfake cluster, for tests that inject
// faults (ControlKey), move partitions or add brokers.
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the cluster. With a DataDir it first writes its state, so a
// broker started on the same directory carries on. Close is safe to call
// more than once.
func (b *Broker) Close() {
	b.closeOnce.Do(b.cluster.Close)
}

// advertisedListener reports the advertised address as its own, because
// kfake advertises what its listener's Addr says.
type advertisedListener struct {
	net.Listener
	addr advertisedAddr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// advertisedAddr is a host:port whose host may be a name.
type advertisedAddr string

func (advertisedAddr) Network() string  { return "tcp" }
func (a advertisedAddr) String() string { return string(a) }

// slogLogger passes kfake's log to a *slog.Logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	lvl := slog.LevelDebug - 4
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if !s.l.Enabled(ctx, lvl) {
		return
	}
	s.l.Log(ctx, lvl, "broker: "+fmt.Sprintf(format, args...))
}
