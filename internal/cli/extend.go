package cli

import (
	"context"
	"io"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// App is what a command added by a [Program] shares with every command:
// the output streams, the global flags and the logger. With the exported
// helpers of this file (the Kafka and relay flags, the usage errors) it is
// the seam for commands defined outside this package, so that they behave
// and fail as the production commands do. The flag values
// and the logger are set once the command line is parsed: read them in
// RunE, not when building the command.
type App struct{ a *app }

// Stdout is where a command writes its result.
func (x *App) Stdout() io.Writer { return x.a.stdout }

// Stderr is where a command writes progress and logs.
func (x *App) Stderr() io.Writer { return x.a.stderr }

// Logger is the logger of --log-level and --log-format, on stderr.
func (x *App) Logger() *slog.Logger { return x.a.logger }

// DatabaseURL is --database-url, or empty.
func (x *App) DatabaseURL() string { return x.a.databaseURL }

// LogLevel is --log-level as given: debug, info, warn or error.
func (x *App) LogLevel() string { return x.a.logLevel }

// NewLogger returns a logger on stderr in --log-format at level (debug,
// info, warn or error), for a component that logs at a level of its own.
func (x *App) NewLogger(level string) (*slog.Logger, error) {
	return newLogger(x.a.stderr, level, x.a.logFormat)
}

// OpenStore connects to --database-url and returns the outbox store in
// --schema and the pool (at most maxConns connections, application_name
// "outbox <purpose>"), which the caller closes.
func (x *App) OpenStore(ctx context.Context, purpose string, maxConns int32) (*pgstore.Store, *pgxpool.Pool, error) {
	return x.a.openStore(ctx, purpose, maxConns)
}

// OpenPool connects to --database-url and returns the pool (at most
// maxConns connections, application_name "outbox <purpose>"), which the
// caller closes. A missing or bad --database-url is a usage error.
func (x *App) OpenPool(ctx context.Context, purpose string, maxConns int32) (*pgxpool.Pool, error) {
	pool, err := x.a.newPool(purpose, maxConns)
	if err != nil {
		return nil, err
	}
	if err := x.a.ping(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// FlagError returns a usage error that names the flag and the rule its
// value breaks: "--batch-size must be at least 1, not 0".
func FlagError(flag, rule string, args ...any) error { return flagError(flag, rule, args...) }

// UsageError marks err as an error in the command line: it is reported
// with a pointer to --help and exit status 2.
func UsageError(err error) error { return &usageError{err} }

// NoArgs rejects positional arguments as a usage error.
func NoArgs(cmd *cobra.Command, args []string) error { return noArgs(cmd, args) }

// Changed reports whether the flag was given on the command line, by its
// environment variable or by the config file.
func Changed(fs *pflag.FlagSet, name string) bool { return changed(fs, name) }

// MarkSensitive marks flags whose values must never be shown (a password, a
// token); a URL whose password alone is hidden is [MarkSensitiveURL]'s.
func MarkSensitive(fs *pflag.FlagSet, names ...string) { markSensitive(fs, names...) }

// MarkSensitiveURL marks flags whose values are database URLs or DSNs:
// they are shown only with their passwords replaced.
func MarkSensitiveURL(fs *pflag.FlagSet, names ...string) { markSensitiveURL(fs, names...) }

// KafkaFlags are the Kafka flags of 'outbox relay': brokers, client, topics
// and producer limits, TLS and SASL.
type KafkaFlags struct{ k kafkaFlags }

// AddKafkaFlags adds all of k's flags to fs, with the relay's names and
// defaults.
func AddKafkaFlags(fs *pflag.FlagSet, k *KafkaFlags) { addKafkaFlags(fs, &k.k) }

// AddKafkaSecurityFlags adds only k's TLS and SASL flags, those that
// [KafkaSecurityFlags] names.
func AddKafkaSecurityFlags(fs *pflag.FlagSet, k *KafkaFlags) { addKafkaSecurityFlags(fs, &k.k) }

// KafkaSecurityFlags returns the names of the TLS and SASL flags.
func KafkaSecurityFlags() []string { return slices.Clone(kafkaSecurityFlags) }

// Config checks the flags and returns the Kafka configuration; an error
// names the flag and the rule.
func (k *KafkaFlags) Config(logger *slog.Logger) (kafka.Config, error) { return k.k.config(logger) }

// Security returns the TLS and SASL settings of the flags, unchecked.
func (k *KafkaFlags) Security() kafka.Security { return k.k.security() }

// LogAttrs describes the Kafka settings for a log line, without secrets.
func (k *KafkaFlags) LogAttrs() []any { return k.k.logAttrs() }

// KafkaConfigError points an error of kafka's configuration checks at the
// flag that sets the field it names, as a usage error.
func KafkaConfigError(err error) error { return kafkaConfigError(err) }

// RelayFlags are the flags of 'outbox relay' that mirror relay.Config.
type RelayFlags struct{ r relayFlags }

// AddRelayFlags adds r's flags to fs, with the relay's names and defaults.
func AddRelayFlags(fs *pflag.FlagSet, r *RelayFlags) { addRelayFlags(fs, &r.r) }

// Check applies relay.Config's rules to the flags, so that an error names
// the flag.
func (r *RelayFlags) Check() error { return r.r.check() }

// Config returns the relay.Config of the flags with logger, defaults
// applied; the caller sets Strategy and Sink.
func (r *RelayFlags) Config(logger *slog.Logger) relay.Config { return r.r.config(nil, nil, logger) }
