package lab

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/examples/orders/billing"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/inventory"
	"github.com/outbox-dev/outbox/examples/orders/orderservice"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/cli"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// Database connections of the example processes. The order service needs
// one per request in progress (more requests wait for one); a consumer one
// per partition being handled, plus the inbox's checks.
const (
	ordersMaxConns   = orderservice.DefaultMaxConns
	consumerMaxConns = billing.DefaultMaxConns
)

func newExampleCommand(a *cli.App) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "example",
		GroupID: groupLab,
		Short:   "Run a piece of the reference order system: orders, billing or inventory",
		Long: `example runs one piece of the reference order system, each as
a process of its own, against PostgreSQL (--database-url) and a Kafka-protocol
broker (--kafka-brokers):

  orders     the HTTP order service; writes each order change and its event
             (OrderPlaced, OrderPaid, OrderShipped, OrderCancelled) to the
             outbox in one transaction
  billing    consumer group "billing": one invoice per order, credit notes
  inventory  consumer group "inventory-service": stock reservations; its own
             events (StockReserved, StockRejected, StockReleased) go through
             the outbox too

Next to them run 'relay' (of outbox or outbox-lab, which has every outbox
command), which publishes the outbox. Run 'migrate' first: it creates the
outbox tables (--schema). Each piece creates its own tables at start if
they are missing. docs/events.md documents the events. The same pieces
run from their own mains, go run ./examples/orders/cmd/orderservice (and
billing, inventory), on PostgreSQL or on a SQLite file.`,
		Example: `  export OUTBOX_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test
  outbox-lab migrate
  outbox-lab broker &
  outbox-lab relay &
  outbox-lab example billing &
  outbox-lab example inventory &
  outbox-lab example orders --listen 127.0.0.1:8080`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cli.UsageError(fmt.Errorf("unknown example %q: choose orders, billing or inventory", args[0]))
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newExampleOrdersCommand(a), newExampleBillingCommand(a), newExampleInventoryCommand(a))
	return cmd
}

func newExampleOrdersCommand(a *cli.App) *cobra.Command {
	var (
		listen        string
		topic         string
		schema        string
		placedVersion int
		maxBody       int64
	)
	cmd := &cobra.Command{
		Use:   "orders",
		Short: "Run the order service (HTTP) until stopped",
		Long: `orders serves the order API on --listen:

  POST /orders              {"customerId": "C-1", "amount": "150.00", "currency": "EUR",
                             "items": [{"sku": "BOOK-1", "quantity": 2}]}   -> 201
  GET  /orders/{id}
  POST /orders/{id}/pay | /ship | /cancel                                  -> 200, or 409

Each change and its event are written in one transaction: the order in
--orders-schema, the event in the outbox (--schema), for the relay to
publish on --topic. An Idempotency-Key header makes a retried POST /orders
return the first order. It prints the address it listens on, then runs
until SIGINT or SIGTERM and lets requests in progress finish.`,
		Example: `  outbox-lab example orders --listen 127.0.0.1:8080
  curl -s -X POST localhost:8080/orders -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: 7d1c' -d '{"customerId":"C-1","amount":"150.00","currency":"EUR"}'`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := net.SplitHostPort(listen); err != nil {
				return cli.FlagError("listen", "must be a host:port such as 127.0.0.1:8080, not %q", listen)
			}
			if placedVersion != 1 && placedVersion != 2 {
				return cli.FlagError("order-placed-version", "must be 1 or 2, not %d", placedVersion)
			}
			if maxBody < 1 {
				return cli.FlagError("max-body-bytes", "must be positive, not %d", maxBody)
			}
			ctx := cmd.Context()
			st, pool, err := a.OpenStore(ctx, "example orders", ordersMaxConns)
			if err != nil {
				return err
			}
			defer pool.Close()
			err = orderservice.Run(ctx, orderservice.RunConfig{
				Pool: pool, OutboxSchema: st.Schema(), Listen: listen,
				Service: orderservice.Config{Schema: schema, Topic: topic, PlacedVersion: placedVersion,
					MaxBodyBytes: maxBody, Logger: a.Logger()},
				Ready: func(addr string) { fmt.Fprintf(a.Stdout(), "orders listening on http://%s\n", addr) },
			})
			if errors.Is(err, orderservice.ErrInvalidConfig) {
				return exampleConfigError(err, map[string]string{"Schema": "orders-schema", "Topic": "topic"})
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&listen, "listen", "127.0.0.1:8080", "`host:port` of the HTTP API (port 0 picks a free port)")
	fs.StringVar(&topic, "topic", events.TopicOrders, "Kafka `topic` of the order events")
	fs.StringVar(&schema, "orders-schema", orderservice.DefaultSchema, "PostgreSQL `schema` of the order service's tables")
	fs.IntVar(&placedVersion, "order-placed-version", orderservice.DefaultPlacedVersion, "contract version of the OrderPlaced events published: 2, or 1 while consumers that know only 1 run")
	fs.Int64Var(&maxBody, "max-body-bytes", orderservice.DefaultMaxBodyBytes, "largest request body accepted, in `bytes`")
	return cmd
}

// consumerFlags are the flags of an example consumer process.
type consumerFlags struct {
	kafka         cli.KafkaFlags
	topic         string
	schema        string
	inboxSchema   string
	maxAttempts   int
	retryBase     time.Duration
	retryMax      time.Duration
	statsInterval time.Duration
	session       time.Duration
	rebalance     time.Duration
	instanceID    string
}

// consumerKafkaFlags are the flags of kafkaflags.go a consumer uses: the
// brokers, TLS and SASL. The producer's settings do not apply.
var consumerKafkaFlags = append([]string{"kafka-brokers"}, cli.KafkaSecurityFlags()...)

func addConsumerFlags(fs *pflag.FlagSet, c *consumerFlags, schemaFlag, defaultSchema string) {
	all := pflag.NewFlagSet("kafka", pflag.ContinueOnError)
	cli.AddKafkaFlags(all, &c.kafka) // the same flags as the relay's, defaults and annotations included
	for _, name := range consumerKafkaFlags {
		fs.AddFlag(all.Lookup(name))
	}
	fs.StringVar(&c.topic, "topic", events.TopicOrders, "Kafka `topic` of the order events to consume")
	fs.StringVar(&c.schema, schemaFlag, defaultSchema, "PostgreSQL `schema` of this service's tables")
	fs.StringVar(&c.inboxSchema, "inbox-schema", inbox.DefaultSchema, "PostgreSQL `schema` of the inbox (processed event ids, parked messages)")
	fs.IntVar(&c.maxAttempts, "handler-max-attempts", consumer.DefaultMaxAttempts, "failed attempts after which an event is parked (an unknown version or broken payload is parked at once)")
	fs.DurationVar(&c.retryBase, "handler-retry-base", consumer.DefaultRetryBase, "wait before the first retry of a failed event; it doubles with each attempt")
	fs.DurationVar(&c.retryMax, "handler-retry-max", consumer.DefaultRetryMax, "longest wait between retries of a failed event")
	fs.DurationVar(&c.session, "session-timeout", consumer.DefaultSessionTimeout, "how long the consumer group waits for a crashed member before giving its partitions to the others (the broker allows 6s and up by default)")
	fs.DurationVar(&c.rebalance, "rebalance-timeout", consumer.DefaultRebalanceTimeout, "how long a rebalance waits for members to rejoin (a crashed member holds every join this long); must cover finishing the events in hand")
	fs.StringVar(&c.instanceID, "instance-id", "", "stable `id` for static group membership (Kafka's group.instance.id), one per process running at a time (a StatefulSet pod name, say): restarted with it within --session-timeout, the process takes its partitions back at once, without a rebalance; it does not leave the group when stopped, so a process that stays down holds its partitions for --session-timeout. Empty: dynamic membership")
	fs.DurationVar(&c.statsInterval, "stats-interval", billing.DefaultStatsInterval, "how often to log the counts of processed, duplicate and parked events (when they changed)")
}

func (c *consumerFlags) check() error {
	switch {
	case c.maxAttempts < 1:
		return cli.FlagError("handler-max-attempts", "must be at least 1, not %d", c.maxAttempts)
	case c.retryBase <= 0:
		return cli.FlagError("handler-retry-base", "must be positive, not %s", c.retryBase)
	case c.retryMax < c.retryBase:
		return cli.FlagError("handler-retry-max", "must be at least --handler-retry-base (%s), not %s", c.retryBase, c.retryMax)
	case c.statsInterval <= 0:
		return cli.FlagError("stats-interval", "must be positive, not %s", c.statsInterval)
	case c.session < time.Second:
		return cli.FlagError("session-timeout", "must be at least 1s, not %s", c.session)
	case c.rebalance < time.Second:
		return cli.FlagError("rebalance-timeout", "must be at least 1s, not %s", c.rebalance)
	}
	return nil
}

func newExampleBillingCommand(a *cli.App) *cobra.Command {
	var cf consumerFlags
	cmd := &cobra.Command{
		Use:   "billing",
		Short: "Run the billing consumer (group billing) until stopped",
		Long: `billing consumes the order events of --topic as consumer group "billing" and
keeps one invoice per order in --billing-schema, however often an event is
delivered: the inbox (--inbox-schema) records each event id in the same
transaction as its effect. A paid order that is cancelled gets a credit
note. An event of an unknown version, or one that breaks its contract, is
parked with the reason (see the inbox's parked messages) instead of being
processed. It runs until SIGINT or SIGTERM.`,
		Example: `  outbox-lab example billing --kafka-brokers 127.0.0.1:9092`,
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cf.check(); err != nil {
				return err
			}
			kcfg, err := cf.kafka.Config(a.Logger())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			pool, err := a.OpenPool(ctx, "example billing", consumerMaxConns)
			if err != nil {
				return err
			}
			defer pool.Close()
			cf.logStart(a, billing.Group)
			err = billing.Run(ctx, billing.RunConfig{
				Pool: pool, InboxSchema: cf.inboxSchema, StatsInterval: cf.statsInterval,
				Billing:  billing.Config{Schema: cf.schema, Logger: a.Logger()},
				Consumer: cf.consumerConfig(kcfg),
			})
			if errors.Is(err, billing.ErrInvalidConfig) {
				return exampleConfigError(err, map[string]string{"Schema": "billing-schema"})
			}
			return consumerError(err)
		},
	}
	addConsumerFlags(cmd.Flags(), &cf, "billing-schema", billing.DefaultSchema)
	return cmd
}

func newExampleInventoryCommand(a *cli.App) *cobra.Command {
	var (
		cf    consumerFlags
		topic string
		stock []string
	)
	cmd := &cobra.Command{
		Use:   "inventory",
		Short: "Run the inventory consumer (group inventory-service) until stopped",
		Long: `inventory consumes the order events of --topic as consumer group
"inventory-service" and reserves each order's items once in
--inventory-schema, however often an event is delivered. An unknown SKU or
too little stock reserves nothing and publishes StockRejected; a
reservation publishes StockReserved and a cancellation StockReleased. These
events are written to the outbox (--schema) in the same transaction as the
reservation, for the relay to publish on --inventory-topic.

At start it creates its tables if missing and gives the SKUs of --stock
that have no stock yet their units. It runs until SIGINT or SIGTERM.`,
		Example: `  outbox-lab example inventory --kafka-brokers 127.0.0.1:9092
  outbox-lab example inventory --stock BOOK-1=100,LAMP-1=2`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cf.check(); err != nil {
				return err
			}
			seed, err := parseStock(stock)
			if err != nil {
				return err
			}
			kcfg, err := cf.kafka.Config(a.Logger())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			st, pool, err := a.OpenStore(ctx, "example inventory", consumerMaxConns)
			if err != nil {
				return err
			}
			defer pool.Close()
			cf.logStart(a, inventory.Group)
			err = inventory.Run(ctx, inventory.RunConfig{
				Pool: pool, OutboxSchema: st.Schema(), InboxSchema: cf.inboxSchema, StatsInterval: cf.statsInterval,
				Inventory: inventory.Config{Schema: cf.schema, Topic: topic, Stock: seed, Logger: a.Logger()},
				Consumer:  cf.consumerConfig(kcfg),
			})
			if errors.Is(err, inventory.ErrInvalidConfig) {
				return exampleConfigError(err, map[string]string{"Schema": "inventory-schema", "Topic": "inventory-topic", "Stock": "stock"})
			}
			return consumerError(err)
		},
	}
	fs := cmd.Flags()
	addConsumerFlags(fs, &cf, "inventory-schema", inventory.DefaultSchema)
	fs.StringVar(&topic, "inventory-topic", events.TopicInventory, "Kafka `topic` of the inventory's own events")
	var defaults []string
	initial := inventory.DefaultStock()
	for _, sku := range slices.Sorted(maps.Keys(initial)) {
		defaults = append(defaults, sku+"="+strconv.FormatInt(initial[sku], 10))
	}
	fs.StringSliceVar(&stock, "stock", defaults, "stock given at start to SKUs that have none: `SKU=units` (repeatable, or comma-separated)")
	return cmd
}

// parseStock reads --stock.
func parseStock(list []string) (map[string]int64, error) {
	out := make(map[string]int64, len(list))
	for _, s := range list {
		sku, units, ok := strings.Cut(s, "=")
		n, err := strconv.ParseInt(strings.TrimSpace(units), 10, 64)
		if !ok || err != nil || n < 0 || !events.ValidSKU(strings.TrimSpace(sku)) {
			return nil, cli.FlagError("stock", "must be SKU=units with a SKU of letters, digits, '.', '_' or '-' and 0 or more units, not %q", s)
		}
		out[strings.TrimSpace(sku)] = n
	}
	return out, nil
}

// consumerConfig is the consumer group's configuration of the flags;
// billing.Run and inventory.Run set the group, the applier and the hooks.
func (c *consumerFlags) consumerConfig(kcfg kafka.Config) consumer.Config {
	return consumer.Config{
		Brokers: kcfg.Brokers, Security: kcfg.Security, Topics: []string{c.topic},
		MaxAttempts: c.maxAttempts, RetryBase: c.retryBase, RetryMax: c.retryMax,
		SessionTimeout: c.session, RebalanceTimeout: c.rebalance, InstanceID: c.instanceID,
	}
}

// logStart logs the start of an example consumer with its settings.
func (c *consumerFlags) logStart(a *cli.App, group string) {
	attrs := append([]any{slog.String("group", group), slog.String("topic", c.topic),
		slog.String("inbox_schema", c.inboxSchema)}, c.kafka.LogAttrs()...)
	if c.instanceID != "" {
		attrs = append(attrs, slog.String("instance_id", c.instanceID))
	}
	a.Logger().Info("example consumer starting", attrs...)
}

// consumerError points an error of the inbox's or the consumer's
// configuration at the flag that sets the field it names.
func consumerError(err error) error {
	switch {
	case errors.Is(err, inbox.ErrInvalidConfig):
		return exampleConfigError(err, map[string]string{"Schema": "inbox-schema"})
	case errors.Is(err, consumer.ErrInvalidConfig) && strings.Contains(err.Error(), "config: Topics"):
		return cli.FlagError("topic", "is not usable: %v", err)
	case errors.Is(err, consumer.ErrInvalidConfig) && strings.Contains(err.Error(), "config: InstanceID"):
		return cli.FlagError("instance-id", "is not usable: %v", err)
	case errors.Is(err, consumer.ErrInvalidConfig):
		return cli.KafkaConfigError(err)
	}
	return err
}

// exampleConfigError points a constructor's config error at the flag of
// the field it names, if one does.
func exampleConfigError(err error, fieldFlags map[string]string) error {
	for field, flag := range fieldFlags {
		if strings.Contains(err.Error(), field) {
			return cli.UsageError(fmt.Errorf("--%s: %w", flag, err))
		}
	}
	return err
}
