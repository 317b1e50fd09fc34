package chaos

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/freeport"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Topics of the run.
const (
	topicOrders    = "orders"
	topicInventory = "inventory"
	topicProbe     = "chaos.probe"
)

// brokerMaxMessageBytes is the broker's --max-message-bytes: small, so that
// a poison message the outbox accepts is one the broker refuses.
const brokerMaxMessageBytes = 256 << 10

// initialStock is the stock the inventory starts with: enough that no order
// is rejected for want of it.
var initialStock = map[string]int64{"BOOK-1": 1_000_000_000, "MUG-1": 1_000_000_000}

// ErrUnsupported is returned by [Run] on a system without SIGSTOP and
// SIGCONT (Windows): the harness pauses and resumes processes.
var ErrUnsupported = errors.New("chaos: needs a Unix system (SIGSTOP, SIGCONT)")

// harness is one run.
type harness struct {
	cfg     Config
	seed    int64
	dir     string
	binary  string
	pool    *pgxpool.Pool
	store   *pgstore.Store
	schemas struct{ outbox, orders, billing, inventory, inbox string }
	links   *links

	brokerProxy, brokerDirect string // host:port
	broker                    *component
	relays, orders            []*component
	billing, inventory        *component
	ordersURLs                []string

	started time.Time // the load's start

	mu        sync.Mutex
	resources map[string][]ResourceSample // by relay
	requests  []Request
	windows   []FaultWindow
	counts    map[string]int
	poison    []string
	skipped   []string
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.cfg.Out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (h *harness) record(q Request) {
	h.mu.Lock()
	h.requests = append(h.requests, q)
	h.mu.Unlock()
}

// Run runs the harness: setup, load and faults for cfg.Duration, heal,
// drain, observe and check. A run whose invariants fail returns a Report
// with Pass false and a nil error; the error is for a harness that could
// not run (bad config, no database, a process that never started).
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	if !supported {
		return Report{}, ErrUnsupported
	}
	h := &harness{cfg: cfg, seed: cfg.Seed, counts: map[string]int{}, resources: map[string][]ResourceSample{}}
	if h.seed == 0 {
		var b [8]byte
		_, _ = crand.Read(b[:])
		h.seed = int64(binary.LittleEndian.Uint64(b[:]) & (1<<53 - 1))
	}
	if cfg.Strategy == "" {
		cfg.Strategy = StrategyForSeed(h.seed)
		h.cfg.Strategy = cfg.Strategy
	}
	h.logf("chaos: seed %d, strategy %s (replay the run with --seed %d --strategy %s), duration %s",
		h.seed, cfg.Strategy, h.seed, cfg.Strategy, cfg.Duration)
	began := time.Now()

	dir := cfg.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "outbox-chaos-")
		if err != nil {
			return Report{}, fmt.Errorf("chaos: work directory: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return Report{}, fmt.Errorf("chaos: work directory: %w", err)
	}
	h.dir = dir
	rep, err := h.run(ctx, began)
	rep.Seed, rep.Strategy, rep.WorkDir = h.seed, cfg.Strategy, dir
	if err == nil && rep.Pass && cfg.WorkDir == "" {
		os.RemoveAll(dir)
		rep.WorkDir = ""
	}
	return rep, err
}

func (h *harness) run(ctx context.Context, began time.Time) (Report, error) {
	cfg := h.cfg
	h.binary = cfg.Binary
	if h.binary == "" {
		h.logf("building the outbox-lab binary with failpoints")
		bin, err := buildBinary(ctx, h.dir)
		if err != nil {
			return Report{}, err
		}
		h.binary = bin
	}
	if err := h.setupDatabase(ctx); err != nil {
		return Report{}, err
	}
	defer h.pool.Close()
	passed := false
	defer func() {
		if passed && !cfg.KeepSchemas {
			h.dropSchemas()
		} else {
			h.logf("schemas kept for inspection: %s, %s, %s, %s, %s", h.schemas.outbox, h.schemas.orders, h.schemas.billing, h.schemas.inventory, h.schemas.inbox)
		}
	}()
	if cfg.Strategy == StrategyCDC {
		// After every process stopped (deferred calls run last first).
		defer h.removeSlot()
	}
	h.links = newLinks()
	defer h.links.close()
	defer h.closeAll()
	if err := h.startSystem(ctx); err != nil {
		return Report{}, err
	}
	h.logf("system up: broker, %d relays (%s), %d order services, billing, inventory; logs in %s",
		len(h.relays), cfg.Strategy, len(h.orders), filepath.Join(h.dir, "logs"))

	plan := planFaults(h.seed, cfg)
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	h.started = time.Now()
	var wg sync.WaitGroup
	h.startWorkload(loadCtx, &wg)
	wg.Go(func() { h.runFaults(loadCtx, plan) })
	wg.Go(func() { h.sampleDuringLoad(ctx, loadCtx) })
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Report{}, fmt.Errorf("chaos: interrupted: %w", err)
	}

	h.logf("load and faults over; healing everything")
	if err := h.healAll(); err != nil {
		return Report{}, err
	}
	healed := time.Now()
	drained, err := h.waitDrain(ctx, healed)
	if err != nil {
		return Report{}, err
	}
	if drained.IsZero() {
		h.logf("not drained within %s; checking anyway", cfg.DrainTimeout)
	} else {
		h.logf("drained %s after the heal", drained.Sub(healed).Round(time.Millisecond))
	}
	h.sample(ctx, SampleDrained)
	// Nothing may write while the checker reads: stop every process but
	// the broker (a consumer still catching up would add outbox messages
	// between the outbox read and the topic read).
	h.stopProducers()
	obs := h.observe(ctx)
	obs.Started, obs.Healed, obs.Drained = h.started, healed, drained
	// During a broker outage each relay may hold one more copy (Bounds.OutageMaxCopies).
	v := Check(obs, Bounds{MaxCopies: cfg.MaxCopies, OutageMaxCopies: cfg.MaxCopies + cfg.Relays, Grace: cfg.Grace, DrainBound: cfg.DrainBound})
	rep := Report{Verdict: v, Duration: cfg.Duration, Elapsed: time.Since(began), Faults: h.counts, Skipped: h.skipped, Schedule: plan,
		SampleEvery: cfg.SampleEvery, Resources: obs.Resources}
	for _, c := range h.all() {
		rep.UnexpectedExits = append(rep.UnexpectedExits, c.unexpectedExits()...)
	}
	passed = v.Pass
	return rep, nil
}

// setupDatabase creates the run's schemas and the outbox tables.
func (h *harness) setupDatabase(ctx context.Context) error {
	var b [3]byte
	_, _ = crand.Read(b[:])
	base := "chaos_" + hex.EncodeToString(b[:])
	h.schemas.outbox, h.schemas.orders, h.schemas.billing = base, base+"_orders", base+"_billing"
	h.schemas.inventory, h.schemas.inbox = base+"_inventory", base+"_inbox"
	pcfg, err := pgxpool.ParseConfig(h.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("%w: DatabaseURL: %w", ErrInvalidConfig, err)
	}
	pcfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("chaos: connect to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("chaos: PostgreSQL unreachable: %w", err)
	}
	h.pool = pool
	st, err := pgstore.New(pool, pgstore.Config{Schema: h.schemas.outbox, Limits: outbox.Limits{MaxPayloadBytes: 4 << 20}})
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("chaos: migrate the outbox: %w", err)
	}
	if h.cfg.Strategy == StrategyCursor {
		if err := st.EnableCursor(ctx); err != nil {
			return fmt.Errorf("chaos: cursor mode: %w", err)
		}
		h.logf("the outbox is in cursor mode")
	}
	if h.cfg.Strategy == StrategyCDC {
		if _, err := st.SetMode(ctx, pgstore.ModeCDC, "chaos"); err != nil {
			return fmt.Errorf("chaos: cdc mode: %w", err)
		}
		h.logf("the outbox is in cdc mode")
	}
	h.store = st
	return nil
}

func (h *harness) dropSchemas() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []string{h.schemas.orders, h.schemas.billing, h.schemas.inventory, h.schemas.inbox, h.schemas.outbox} {
		if _, err := h.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
			h.logf("drop schema %s: %v", s, err)
		}
	}
}

// startSystem starts the proxies and the processes.
func (h *harness) startSystem(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Join(h.dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	dbURL, err := url.Parse(h.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("%w: DatabaseURL: %w", ErrInvalidConfig, err)
	}
	pgAddr := dbURL.Host
	if dbURL.Port() == "" {
		pgAddr = net.JoinHostPort(dbURL.Hostname(), "5432")
	}
	// The broker listens on 127.0.0.1:port and advertises 127.0.0.2:port,
	// where the proxy listens: clients reconnect to what is advertised.
	var port int
	for range 10 {
		if port, err = freeport.Port(); err != nil {
			return err
		}
		h.brokerDirect = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if h.brokerProxy, err = h.links.add("broker", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)), h.brokerDirect); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	common := []string{
		"OUTBOX_SCHEMA=" + h.schemas.outbox,
		"OUTBOX_INBOX_SCHEMA=" + h.schemas.inbox,
		"OUTBOX_KAFKA_BROKERS=" + h.brokerProxy,
		"OUTBOX_METRICS_ADDR=off",
		"OUTBOX_FAILPOINT=",
		"OUTBOX_FAILPOINT_FILE=",
	}
	newComp := func(name string, args []string, ready string) (*component, error) {
		// A cut link listens again on its port when it is restored, so
		// that port too comes from freeport.
		listen, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		addr, err := h.links.add("pg-"+name, listen, pgAddr)
		if err != nil {
			return nil, err
		}
		u := *dbURL
		u.Host = addr
		q := u.Query()
		q.Set("application_name", h.appName(name)) // every pool of the process, and its replication connection
		u.RawQuery = q.Encode()
		env := append([]string{"OUTBOX_DATABASE_URL=" + u.String()}, common...)
		return &component{name: name, binary: h.binary, args: args, env: env, ready: ready,
			logPath: filepath.Join(h.dir, "logs", name+".log")}, nil
	}

	h.broker = &component{name: "broker", binary: h.binary, ready: "broker listening on",
		logPath: filepath.Join(h.dir, "logs", "broker.log"),
		args: []string{"broker", "--listen", h.brokerDirect, "--advertised-host", "127.0.0.2",
			"--data-dir", filepath.Join(h.dir, "broker-data"), "--topics", strings.Join([]string{topicOrders, topicInventory, topicProbe}, ","),
			"--max-message-bytes", strconv.Itoa(brokerMaxMessageBytes)}}
	if err := h.broker.start(30 * time.Second); err != nil {
		return err
	}

	// A consumer killed by a fault holds its partitions until its session
	// times out, and every rebalance meanwhile waits up to the rebalance
	// timeout for it to rejoin; Kafka's defaults (45 s, 60 s) would make
	// those waits dominate the drain after a few kills in a row, so the
	// consumers use short ones (their handlers take milliseconds). Each
	// consumer is also a static member with an instance id of its own: a
	// component runs one process at a time and its restarts reuse the id,
	// so a restarted consumer takes its partitions back at once. (With
	// dynamic membership kfake could keep a member killed during a join in
	// the group for good, holding its partitions; see docs/chaos.md.)
	stats := []string{"--stats-interval", "1s", "--handler-retry-base", "50ms", "--handler-retry-max", "1s",
		"--session-timeout", "6s", "--rebalance-timeout", "10s"}
	if h.billing, err = newComp("billing", append([]string{"example", "billing", "--billing-schema", h.schemas.billing,
		"--instance-id", "chaos-billing"}, stats...), "consumer started"); err != nil {
		return err
	}
	var stock []string
	for sku, n := range initialStock {
		stock = append(stock, sku+"="+strconv.FormatInt(n, 10))
	}
	if h.inventory, err = newComp("inventory", append([]string{"example", "inventory", "--inventory-schema", h.schemas.inventory,
		"--instance-id", "chaos-inventory", "--stock", strings.Join(stock, ",")}, stats...), "consumer started"); err != nil {
		return err
	}
	for i := range h.cfg.OrderServices {
		listen, err := freeport.Addr()
		if err != nil {
			return err
		}
		c, err := newComp(fmt.Sprintf("orders-%d", i+1), []string{"example", "orders", "--listen", listen, "--orders-schema", h.schemas.orders}, "orders listening on")
		if err != nil {
			return err
		}
		h.orders = append(h.orders, c)
		h.ordersURLs = append(h.ordersURLs, "http://"+listen)
	}
	for i := range h.cfg.Relays {
		name := fmt.Sprintf("relay-%d", i+1)
		c, err := newComp(name, h.relayArgs(name), "relay starting")
		if err != nil {
			return err
		}
		if err := h.relayEndpoints(c); err != nil {
			return err
		}
		h.relays = append(h.relays, c)
	}
	// Consumers first (they create their tables), the order services
	// (one at a time: their migrations take an advisory lock), then relays.
	for _, c := range append(append([]*component{h.billing, h.inventory}, h.orders...), h.relays...) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.start(60 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

// relayArgs are the arguments of relay name for the run's strategy.
func (h *harness) relayArgs(name string) []string {
	args := []string{"relay", "--relay-id", name, "--lease", h.cfg.Lease.String(),
		"--poll-interval", "250ms", "--retry-base", "100ms", "--retry-max", "2s", "--unavailable-backoff-max", "2s",
		"--kafka-auto-create-topics", "--shutdown-timeout", "5s"}
	if h.cfg.Strategy == StrategyCDC {
		args = append(args, "--mode", "cdc")
	}
	return args
}

// relayEndpoints gives relay c its failpoint file and its admin endpoint
// (for the goroutines in its metrics), on a port of its own.
func (h *harness) relayEndpoints(c *component) error {
	addr, err := freeport.Addr()
	if err != nil {
		return err
	}
	c.metricsAddr = addr
	c.failpointFile = filepath.Join(h.dir, "failpoints", c.name)
	c.env = append(c.env, "OUTBOX_FAILPOINT_FILE="+c.failpointFile, "OUTBOX_METRICS_ADDR="+c.metricsAddr)
	return nil
}

func (h *harness) all() []*component {
	out := []*component{h.broker, h.billing, h.inventory}
	out = append(out, h.orders...)
	out = append(out, h.relays...)
	var live []*component
	for _, c := range out {
		if c != nil {
			live = append(live, c)
		}
	}
	return live
}

// closeAll stops every process: the relays and services first, the broker last.
func (h *harness) closeAll() {
	var wg sync.WaitGroup
	for _, c := range h.all() {
		if c == h.broker {
			continue
		}
		wg.Go(func() { c.close(10 * time.Second) })
	}
	wg.Wait()
	if h.broker != nil {
		h.broker.close(10 * time.Second)
	}
}

// stopProducers stops every process except the broker, with SIGTERM.
func (h *harness) stopProducers() {
	var wg sync.WaitGroup
	for _, c := range h.all() {
		if c != h.broker {
			wg.Go(func() { c.close(15 * time.Second) })
		}
	}
	wg.Wait()
}

// healAll removes every toxic, restores every link, resumes stopped
// processes and starts the ones that are down.
func (h *harness) healAll() error {
	var errs []error
	for _, n := range h.links.names() {
		if err := h.links.heal(n); errors.Is(err, errLinkStuck) {
			h.logf("%v", err)
			h.mu.Lock()
			h.skipped = append(h.skipped, "heal "+n+": "+err.Error())
			h.mu.Unlock()
		} else {
			errs = append(errs, err)
		}
	}
	if err := h.broker.ensure(60 * time.Second); err != nil {
		errs = append(errs, err)
	}
	for _, c := range h.all() {
		if err := c.ensure(60 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitDrain waits until no message is unsent (dead letters aside) and both
// consumers processed every event of the orders topic, and returns when
// that first held (zero if it did not within DrainTimeout).
func (h *harness) waitDrain(ctx context.Context, healed time.Time) (time.Time, error) {
	q := fmt.Sprintf(`WITH m AS (SELECT id, topic, %[4]s AS status FROM %[1]s m)
SELECT
  (SELECT count(*) FROM m WHERE status NOT IN ('SENT', 'DEAD_LETTER')),
  (SELECT count(*) FROM m WHERE topic = '%[3]s' AND status = 'SENT'),
  (SELECT count(*) FROM %[2]s p JOIN m ON m.id = p.message_id WHERE m.topic = '%[3]s' AND p.consumer = 'billing'),
  (SELECT count(*) FROM %[2]s p JOIN m ON m.id = p.message_id WHERE m.topic = '%[3]s' AND p.consumer = 'inventory-service')`,
		pgx.Identifier{h.schemas.outbox, "outbox_messages"}.Sanitize(), pgx.Identifier{h.schemas.inbox, "inbox_processed"}.Sanitize(), topicOrders,
		h.statusOf("m"))
	deadline := healed.Add(h.cfg.DrainTimeout)
	lastLog := time.Now()
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return time.Time{}, fmt.Errorf("chaos: interrupted: %w", err)
		}
		var unsent, sent, billing, inventory int
		err := h.pool.QueryRow(ctx, q).Scan(&unsent, &sent, &billing, &inventory)
		if err == nil && unsent == 0 && billing >= sent && inventory >= sent {
			return time.Now(), nil
		}
		if time.Since(lastLog) > 10*time.Second {
			h.logf("draining: %d unsent, %d order events sent, processed by billing %d, inventory %d (%v)", unsent, sent, billing, inventory, err)
			lastLog = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Time{}, nil
}

// Report is the result of a run: the verdict and its figures, and what
// the run was.
type Report struct {
	Verdict
	Seed int64
	// Strategy is the relay strategy the run tested (Config.Strategy, or
	// the seed's).
	Strategy string
	// Duration is Config.Duration; Elapsed the whole run's time.
	Duration, Elapsed time.Duration
	// Faults counts the faults injected, by kind.
	Faults map[string]int
	// Skipped lists faults of the schedule that could not be injected.
	Skipped []string
	// UnexpectedExits are the processes that exited when no fault asked
	// them to (each was restarted).
	UnexpectedExits []string
	// Schedule is the fault schedule the seed gave.
	Schedule []PlannedFault
	// SampleEvery is Config.SampleEvery; Resources are the relays'
	// samples, in relay order.
	SampleEvery time.Duration
	Resources   []ResourceSeries
	// WorkDir holds the logs; empty once removed after a passing run.
	WorkDir string
}
