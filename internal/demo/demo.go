package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// Summary is what a run did and what its checks found.
type Summary struct {
	// Backend says where the services kept their data; Broker which broker
	// carried the events.
	Backend, Broker string
	// DataDir is the data directory; Kept says it was left in place.
	DataDir string
	Kept    bool
	Seed    int64
	// Duration is how long the load ran; Drain how long the backlog took
	// to drain afterwards.
	Duration, Drain time.Duration

	// Orders accepted, invalid ones rejected with 400, and transitions.
	Orders, Rejected, Paid, Shipped, Cancelled int64
	// ServerErrors are requests the service answered with a 5xx (it could
	// not do them, typically on an overloaded machine); the load re-read
	// the orders concerned.
	ServerErrors int64
	// Sent, Unsent and Dead count the messages of both outboxes.
	Sent, Unsent, Dead int64
	// TopicDuplicates are the records of this run's orders on the orders
	// topic that repeat an event id (a relay was killed after the broker's
	// ack and before its mark).
	TopicDuplicates int
	// Invoices and Reservations are the effects the consumers created.
	Invoices, Reservations int64
	// Processed, Duplicates and Parked sum both consumers' counts: events
	// applied, duplicate deliveries absorbed by the inboxes, parked events.
	Processed, Duplicates, Parked int64
	// LatencyP50, LatencyP99 and LatencyMax are end-to-end: from an order's
	// creation in the order service to its invoice committed by billing.
	LatencyP50, LatencyP99, LatencyMax time.Duration
	// RelayKills and BrokerRestarts count the chaos injected.
	RelayKills, BrokerRestarts int64
	// Checks are the invariants, in order.
	Checks []Check
}

// OK reports whether every check passed.
func (s Summary) OK() bool { return len(failed(s.Checks)) == 0 && len(s.Checks) > 0 }

// Run runs the demo until cfg.Duration has passed or ctx ends, lets the
// backlog drain, checks the invariants and writes progress and the summary
// to out. Its error wraps [ErrInvariant] when a check failed,
// [ErrInvalidConfig] for a bad cfg, and is a plain error when the system
// could not be started.
func Run(ctx context.Context, cfg Config, out io.Writer) (Summary, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Summary{}, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Int64N(1<<31) + 1
	}
	sum := Summary{Seed: seed, Duration: cfg.Duration}

	tempDir := cfg.DataDir == ""
	dataDir := cfg.DataDir
	if tempDir {
		d, err := os.MkdirTemp("", "outbox-demo-")
		if err != nil {
			return sum, fmt.Errorf("demo: data directory: %w", err)
		}
		dataDir = d
	} else if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return sum, fmt.Errorf("demo: data directory: %w", err)
	}
	sum.DataDir = dataDir
	log := cfg.Logger
	if log == nil {
		f, err := os.OpenFile(filepath.Join(dataDir, "demo.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return sum, fmt.Errorf("demo: log file: %w", err)
		}
		defer f.Close()
		log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	keep := true // until the checks pass
	defer func() {
		sum.Kept = keep || !tempDir
		if tempDir && !keep {
			os.RemoveAll(dataDir)
		}
	}()

	s, err := start(ctx, cfg, dataDir, seed, log, out)
	if err != nil {
		keep = false // nothing ran: a temporary directory holds nothing worth keeping
		return sum, err
	}
	sum.Backend, sum.Broker = s.b.name, s.brokerName
	defer s.shutdown()

	// The load, the chaos and the progress line, until the end.
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { s.load.run(loadCtx) })
	if cfg.Chaos {
		wg.Go(func() { s.chaos(loadCtx, rand.New(rand.NewPCG(uint64(seed), 1))) })
	}
	prog := newProgress(out, cfg.Progress)
	progDone := make(chan struct{})
	progStop := make(chan struct{})
	go func() {
		defer close(progDone)
		s.progressLoop(prog, progStop)
	}()
	began := time.Now()
	<-loadCtx.Done()
	wg.Wait() // customers finished, broker and relays up again
	sum.Duration = time.Since(began).Round(100 * time.Millisecond)
	s.note("load stopped; draining the backlog")

	drainStart := time.Now()
	checks, derr := s.drain(context.WithoutCancel(ctx), cfg.DrainTimeout)
	sum.Drain = time.Since(drainStart).Round(100 * time.Millisecond)
	close(progStop)
	<-progDone
	prog.finish()
	if derr != nil {
		return sum, derr
	}
	s.fill(&sum)
	sum.Checks = checks
	keep = !sum.OK()
	sum.Kept = keep || !tempDir
	writeSummary(out, sum)
	if bad := failed(checks); len(bad) > 0 {
		return sum, fmt.Errorf("%w: %s", ErrInvariant, strings.Join(bad, " | "))
	}
	return sum, nil
}

// system is a running demo.
type system struct {
	cfg        Config
	log        *slog.Logger
	b          *backend
	embedded   *embeddedBroker // nil with a real Kafka cluster
	brokers    []string
	brokerName string
	relays     []*relaySlot
	billing    *consumerStats
	inventory  *consumerStats
	latency    *latencies
	audit      *audit
	load       *load
	stockStart stockLevels

	brokerRestarts atomic.Int64
	notesMu        sync.Mutex
	notes          []string // events (chaos, phases) not yet shown

	stopConsumers context.CancelFunc
	consumersDone sync.WaitGroup
	server        *http.Server
	auditClient   *kgo.Client
}

// start starts every part and prints where they are.
func start(ctx context.Context, cfg Config, dataDir string, seed int64, log *slog.Logger, out io.Writer) (_ *system, err error) {
	s := &system{cfg: cfg, log: log, latency: &latencies{}, audit: newAudit()}
	s.billing = &consumerStats{latency: s.latency}
	s.inventory = &consumerStats{}
	defer func() {
		if err != nil {
			s.shutdown()
		}
	}()
	if len(cfg.KafkaBrokers) == 0 {
		s.embedded, err = startEmbeddedBroker("127.0.0.1:0", filepath.Join(dataDir, "broker"), log)
		if err != nil {
			return nil, err
		}
		s.brokers = s.embedded.addrs()
		s.brokerName = "embedded broker on " + s.brokers[0]
	} else {
		s.brokers = cfg.KafkaBrokers
		s.brokerName = "Kafka at " + strings.Join(cfg.KafkaBrokers, ",") + securityNote(cfg.KafkaSecurity)
	}
	if cfg.DatabaseURL != "" {
		s.b, err = openPostgres(ctx, cfg.DatabaseURL, cfg.SchemaPrefix, log)
	} else {
		s.b, err = openSQLite(ctx, dataDir, log)
	}
	if err != nil {
		return nil, err
	}
	if s.stockStart, err = readStock(ctx, s.b.inventory); err != nil {
		return nil, fmt.Errorf("demo: read the stock: %w", err)
	}

	// The relays, one per outbox.
	rcfg := relay.Config{Lease: DefaultLease, RetryBase: 200 * time.Millisecond, RetryMax: 2 * time.Second,
		UnavailableBackoffMax: 2 * time.Second, ShutdownTimeout: 3 * time.Second, Logger: log}
	if s.b.sqlite {
		rcfg.PollInterval = sqlitestore.PollInterval
	}
	for _, r := range []struct {
		name  string
		queue outboxStore
		topic string
	}{{"orders", s.b.ordersOutbox, TopicOrders}, {"inventory", s.b.inventoryOutbox, TopicInventory}} {
		slot := &relaySlot{name: r.name, queue: r.queue, cfg: rcfg, log: log, sinkCfg: s.sinkConfig(r.name, r.topic)}
		if err := slot.start(ctx); err != nil {
			return nil, err
		}
		s.relays = append(s.relays, slot)
	}

	// The consumers.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopConsumers = cancel
	for _, c := range []struct {
		group   string
		applier consumer.Applier
		stats   *consumerStats
	}{{GroupBilling, s.b.billingApplier, s.billing}, {GroupInventory, s.b.inventoryApplier, s.inventory}} {
		r, err := consumer.New(s.consumerConfig(c.group, c.applier, c.stats.hooks()))
		if err != nil {
			return nil, fmt.Errorf("demo: consumer %s: %w", c.group, err)
		}
		s.consumersDone.Go(func() {
			if err := r.Run(cctx); err != nil {
				log.Error("demo: consumer stopped", slog.String("group", c.group), slog.Any("error", err))
			}
		})
	}
	secOpts, err := cfg.KafkaSecurity.Opts()
	if err != nil {
		return nil, fmt.Errorf("%w: KafkaSecurity: %w", ErrInvalidConfig, err)
	}
	if s.auditClient, err = newAuditClient(s.brokers, secOpts, log); err != nil {
		return nil, fmt.Errorf("demo: topic reader: %w", err)
	}
	s.consumersDone.Go(func() { s.audit.run(cctx, s.auditClient, log) })

	// The order service.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("demo: listen on %s: %w", cfg.Listen, err)
	}
	s.server = s.b.orders.HTTPServer()
	go func() { _ = s.server.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	s.load = &load{base: base, client: &http.Client{Timeout: 30 * time.Second}, rate: cfg.Rate, seed: uint64(seed)}

	chaos := "off"
	if cfg.Chaos {
		chaos = "on (relays killed, broker stopped, at random)"
		if s.embedded == nil {
			chaos = "on (relays killed at random; a real Kafka cluster is not stopped)"
		}
	}
	fmt.Fprintf(out, "outbox-lab demo: the order system in one process, seed %d\n", seed)
	fmt.Fprintf(out, "  data        %s (logs in demo.log)\n", s.b.name)
	fmt.Fprintf(out, "  broker      %s (topics %s, %s)\n", s.brokerName, TopicOrders, TopicInventory)
	fmt.Fprintf(out, "  orders API  %s/orders  (try: curl %s/orders/<id>)\n", base, base)
	fmt.Fprintf(out, "  running     two relays, billing and inventory consumers, %g orders/s for %s, chaos %s\n\n",
		cfg.Rate, cfg.Duration, chaos)
	return s, nil
}

// securityNote describes sec for the start banner: TLS and the SASL
// mechanism and user, never the password.
func securityNote(sec kafka.Security) string {
	var parts []string
	if sec.TLS {
		parts = append(parts, "TLS")
	}
	if sec.SASLMechanism != "" {
		parts = append(parts, fmt.Sprintf("SASL %s as %s", strings.ToUpper(sec.SASLMechanism), sec.Username))
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, ", ")
}

// sinkConfig configures the producer of the relay of the named outbox:
// s.brokers, with the security of the Config.
func (s *system) sinkConfig(name, topic string) kafka.Config {
	return kafka.Config{
		Brokers: s.brokers, ClientID: relayIDPrefix + "-" + name + "-relay", DefaultTopic: topic,
		AllowAutoTopicCreation: true, Security: s.cfg.KafkaSecurity, Logger: s.log,
	}
}

// consumerConfig configures the consumer of a group of the orders topic:
// s.brokers, with the security of the Config.
func (s *system) consumerConfig(group string, applier consumer.Applier, hooks consumer.Hooks) consumer.Config {
	return consumer.Config{
		Brokers: s.brokers, Security: s.cfg.KafkaSecurity, Group: group, Topics: []string{TopicOrders},
		Applier: applier, ClientID: consumerIDPrefix + group, Logger: s.log, Hooks: hooks,
	}
}

// shutdown stops everything that runs, in dependency order. It is safe on
// a partly started system and safe to call twice.
func (s *system) shutdown() {
	if s.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.server.Shutdown(ctx)
		cancel()
		s.server = nil
	}
	for _, r := range s.relays {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r.stop(ctx)
		cancel()
	}
	s.relays = nil
	if s.stopConsumers != nil {
		s.stopConsumers()
		s.consumersDone.Wait()
		s.stopConsumers = nil
	}
	if s.auditClient != nil {
		s.auditClient.Close()
		s.auditClient = nil
	}
	if s.embedded != nil {
		s.embedded.stop()
		s.embedded = nil
	}
	if s.b != nil {
		s.b.close()
		s.b = nil
	}
}

// note records an event for the progress output, which shows it on a line
// of its own.
func (s *system) note(msg string) {
	s.notesMu.Lock()
	s.notes = append(s.notes, msg)
	s.notesMu.Unlock()
	s.log.Info("demo: " + msg)
}

// takeNotes returns the events not yet shown.
func (s *system) takeNotes() []string {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	n := s.notes
	s.notes = nil
	return n
}

// chaos kills relays and stops the broker at random moments until ctx
// ends; then every relay and the broker run again.
func (s *system) chaos(ctx context.Context, rng *rand.Rand) {
	defer func() {
		if s.embedded != nil {
			if err := s.embedded.start(); err != nil {
				s.log.Error("demo chaos: broker", slog.Any("error", err))
			}
		}
		for _, r := range s.relays {
			if !r.running() {
				if err := r.start(ctx); err != nil {
					s.log.Error("demo chaos: relay", slog.Any("error", err))
				}
			}
		}
	}()
	for {
		if !sleepCtx(ctx, time.Duration(1500+rng.IntN(2500))*time.Millisecond) {
			return
		}
		if s.embedded != nil && rng.IntN(10) < 3 {
			down := time.Duration(2000+rng.IntN(2000)) * time.Millisecond
			s.embedded.stop()
			s.brokerRestarts.Add(1)
			s.note(fmt.Sprintf("chaos: broker stopped for %.1fs", down.Seconds()))
			time.Sleep(down) // not cut short: a stopped broker always comes back
			if err := s.embedded.start(); err != nil {
				s.log.Error("demo chaos: broker", slog.Any("error", err))
				return
			}
			s.note("chaos: broker back on the same data")
			continue
		}
		slot := s.relays[0] // the orders relay, most of the time
		if rng.IntN(5) == 0 {
			slot = s.relays[1]
		}
		when := crashAfterAck
		if rng.IntN(2) == 0 {
			when = crashAfterClaim
		}
		switch slot.crash(when, 2*time.Second) {
		case crashAfterAck:
			s.note("chaos: " + slot.name + " relay killed after the broker's ack, before marking sent")
		case crashAfterClaim:
			s.note("chaos: " + slot.name + " relay killed after claiming, before publishing")
		default:
			s.note("chaos: " + slot.name + " relay killed while idle")
		}
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		if err := slot.start(ctx); err != nil {
			s.log.Error("demo chaos: relay", slog.Any("error", err))
			return
		}
	}
}

// drain waits until the checks pass or timeout has passed, then lets the
// consumers settle (so that the counts of duplicates are final) and checks
// once more.
func (s *system) drain(ctx context.Context, timeout time.Duration) ([]Check, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &checker{b: s.b, load: s.load, audit: s.audit, stockStart: s.stockStart, billing: s.billing, inventory: s.inventory}
	var (
		checks []Check
		err    error
	)
	for {
		counts, cerr := countOutboxes(ctx, s.b.ordersOutbox, s.b.inventoryOutbox)
		if cerr == nil && counts.unsent == 0 {
			checks, err = c.run(ctx)
			if err == nil && len(failed(checks)) == 0 {
				break
			}
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			if checks == nil || err != nil {
				// Out of time before the outboxes emptied, or the checks
				// could not run: check once more with a fresh context.
				fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer fcancel()
				checks, err = c.run(fctx)
			}
			if err != nil {
				return nil, fmt.Errorf("demo: check: %w", err)
			}
			return checks, nil
		}
	}
	// Settle: wait until nothing moves for a second (at most 10 s).
	last := int64(-1)
	for range 20 {
		now := s.billing.processed.Load() + s.billing.duplicates.Load() + s.inventory.processed.Load() +
			s.inventory.duplicates.Load() + int64(s.audit.total())
		if now == last {
			break
		}
		last = now
		if !sleepCtx(ctx, 500*time.Millisecond) {
			break
		}
	}
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer fcancel()
	if checks, err = c.run(fctx); err != nil {
		return nil, fmt.Errorf("demo: check: %w", err)
	}
	return checks, nil
}

// fill copies the run's counts into sum.
func (s *system) fill(sum *Summary) {
	l := s.load
	sum.Orders, sum.Rejected = l.placed.Load(), l.rejected.Load()
	sum.Paid, sum.Shipped, sum.Cancelled = l.paid.Load(), l.shipped.Load(), l.cancelled.Load()
	sum.ServerErrors = l.serverErrors.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := countOutboxes(ctx, s.b.ordersOutbox, s.b.inventoryOutbox); err == nil {
		sum.Sent, sum.Unsent, sum.Dead = c.sent, c.unsent, c.dead
	}
	ids := map[string]bool{}
	for _, o := range l.snapshot() {
		ids[o.ID.String()] = true
	}
	sum.TopicDuplicates = s.audit.duplicates(ids)
	sum.Invoices, sum.Reservations = s.billing.created.Load(), s.inventory.created.Load()
	sum.Processed = s.billing.processed.Load() + s.inventory.processed.Load()
	sum.Duplicates = s.billing.duplicates.Load() + s.inventory.duplicates.Load()
	sum.Parked = s.billing.parked.Load() + s.inventory.parked.Load()
	sum.LatencyP50, sum.LatencyP99, sum.LatencyMax = s.latency.percentiles()
	for _, r := range s.relays {
		sum.RelayKills += r.kills.Load()
	}
	sum.BrokerRestarts = s.brokerRestarts.Load()
}
