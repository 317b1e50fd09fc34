package cli

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/broker"
)

func newBrokerCommand(a *app) *cobra.Command {
	var cfg broker.Config
	cmd := &cobra.Command{
		Use:     "broker",
		GroupID: "run",
		Short:   "Run a small Kafka-compatible broker for development and tests",
		Long: `broker runs an embedded broker that speaks the Kafka protocol, so that the
relay, the examples and your consumers can run on a laptop or in CI without a
Kafka cluster. It creates topics on first use. It is not for production: one
process, no replication, and its data is kept only with --data-dir.

It prints the address it listens on, then runs until SIGINT or SIGTERM.`,
		Example: `  outbox broker
  outbox broker --listen 127.0.0.1:19092 --partitions 6 --topics orders,payments --data-dir ./kafka-data
  # then, in another terminal:
  outbox relay --kafka-brokers 127.0.0.1:19092`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case cfg.Listen == "":
				return flagError("listen", "must be a host:port, such as 127.0.0.1:9092")
			case cfg.Brokers < 1:
				return flagError("brokers", "must be at least 1, not %d", cfg.Brokers)
			case cfg.Partitions < 1:
				return flagError("partitions", "must be at least 1, not %d", cfg.Partitions)
			case cfg.MaxMessageBytes < 1:
				return flagError("max-message-bytes", "must be positive, not %d", cfg.MaxMessageBytes)
			}
			cfg.Logger = a.logger
			b, err := broker.Start(cfg)
			if err != nil {
				return brokerStartError(cfg.Listen, err)
			}
			defer b.Close()
			addrs := b.Addrs()
			a.logger.Info("broker started", slog.Any("addrs", addrs), slog.Int("partitions", cfg.Partitions), slog.String("data_dir", cfg.DataDir))
			fmt.Fprintf(a.stdout, "broker listening on %s\n", strings.Join(addrs, ","))
			<-cmd.Context().Done()
			a.logger.Info("broker stopping")
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Listen, "listen", broker.DefaultListen, "`host:port` of the first broker; broker i listens on port+i (port 0 picks free ports)")
	fs.StringVar(&cfg.AdvertisedHost, "advertised-host", "", "`host` the brokers give clients (default: the --listen host, or 127.0.0.1 if that is 0.0.0.0 or ::)")
	fs.IntVar(&cfg.Brokers, "brokers", 1, "number of brokers in the cluster")
	fs.IntVar(&cfg.Partitions, "partitions", broker.DefaultPartitions, "partitions of each topic created on first use or by --topics")
	fs.StringSliceVar(&cfg.SeedTopics, "topics", nil, "comma-separated `topics` to create at start")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "`directory` that keeps topics and records across restarts (default: memory only)")
	fs.IntVar(&cfg.MaxMessageBytes, "max-message-bytes", broker.DefaultMaxMessageBytes, "largest record batch the broker accepts, in `bytes` (Kafka's message.max.bytes)")
	return cmd
}

// brokerFieldFlags maps the broker.Config fields that Start's errors name to
// the flags that set them.
var brokerFieldFlags = map[string]string{
	"Listen":          "listen",
	"AdvertisedHost":  "advertised-host",
	"Brokers":         "brokers",
	"Partitions":      "partitions",
	"DataDir":         "data-dir",
	"MaxMessageBytes": "max-message-bytes",
	"SeedTopics":      "topics",
}

// brokerStartError points a broker.Start error at the flag of the field it
// names, if it names one.
func brokerStartError(listen string, err error) error {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "config: "); ok {
		field, _, _ := strings.Cut(rest, ":")
		field, _, _ = strings.Cut(field, "[")
		if flag, known := brokerFieldFlags[field]; known {
			return &usageError{fmt.Errorf("--%s: %w", flag, err)}
		}
	}
	return fmt.Errorf("start broker on %s: %w", listen, err)
}
