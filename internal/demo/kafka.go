package demo

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// embeddedBroker is the embedded broker, stoppable and restartable on the
// same address and data directory.
type embeddedBroker struct {
	cfg broker.Config

	mu sync.Mutex
	b  *broker.Broker
}

func startEmbeddedBroker(listen, dataDir string, log *slog.Logger) (*embeddedBroker, error) {
	cfg := broker.Config{Listen: listen, DataDir: dataDir, SeedTopics: []string{TopicOrders, TopicInventory}, Logger: log}
	b, err := broker.Start(cfg)
	if err != nil {
		return nil, fmt.Errorf("demo: start the embedded broker: %w", err)
	}
	cfg.Listen = b.Addrs()[0] // the same port when started again
	return &embeddedBroker{cfg: cfg, b: b}, nil
}

func (e *embeddedBroker) addrs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return []string{e.cfg.Listen}
}

// stop stops the broker; its data stays in the data directory.
func (e *embeddedBroker) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.b != nil {
		e.b.Close()
		e.b = nil
	}
}

// start starts a stopped broker again on the same address and data. The
// port was just released, so a few attempts are allowed.
func (e *embeddedBroker) start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.b != nil {
		return nil
	}
	var err error
	for range 50 {
		var b *broker.Broker
		if b, err = broker.Start(e.cfg); err == nil {
			e.b = b
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("demo: start the embedded broker again on %s: %w", e.cfg.Listen, err)
}

// audit reads the orders topic on its own, with no consumer group, to
// check what was published independently of the consumers.
type audit struct {
	mu sync.Mutex
	// copies counts the records of each event id.
	copies map[uuid.UUID]int
	// byOrder holds the distinct event ids of each order.
	byOrder map[string]map[uuid.UUID]bool
	records int
}

func newAudit() *audit {
	return &audit{copies: map[uuid.UUID]int{}, byOrder: map[string]map[uuid.UUID]bool{}}
}

// run reads the topic from the start until ctx ends.
func (a *audit) run(ctx context.Context, client *kgo.Client, log *slog.Logger) {
	for {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			log.Debug("demo audit: fetch error", slog.String("topic", topic), slog.Any("error", err))
		})
		fetches.EachRecord(func(r *kgo.Record) {
			msg, err := inbox.FromRecord(r)
			if err != nil {
				log.Warn("demo audit: malformed record", slog.Any("error", err))
				return
			}
			a.mu.Lock()
			a.records++
			a.copies[msg.ID]++
			ids := a.byOrder[msg.AggregateID]
			if ids == nil {
				ids = map[uuid.UUID]bool{}
				a.byOrder[msg.AggregateID] = ids
			}
			ids[msg.ID] = true
			a.mu.Unlock()
		})
	}
}

// total returns the number of records read.
func (a *audit) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.records
}

// events returns the number of distinct events of the order on the topic.
func (a *audit) events(orderID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byOrder[orderID])
}

// duplicates returns the number of records that repeat an event id, among
// the events of orders.
func (a *audit) duplicates(orders map[string]bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for order, ids := range a.byOrder {
		if !orders[order] {
			continue
		}
		for id := range ids {
			n += a.copies[id] - 1
		}
	}
	return n
}

// newAuditClient is a plain reader of the orders topic from its start.
func newAuditClient(brokers []string, extra []kgo.Opt, log *slog.Logger) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(brokers...), kgo.ClientID(auditClientID),
		kgo.ConsumeTopics(TopicOrders), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.WithLogger(kafka.Logger(log)),
	}, extra...)
	return kgo.NewClient(opts...)
}

// placedAt returns when the order of an OrderPlaced was created, from its
// payload (the service's clock, before its transaction committed).
func placedAt(msg inbox.Message) (time.Time, bool) {
	ev, err := events.Decode(msg)
	if err != nil {
		return time.Time{}, false
	}
	p, ok := ev.(events.OrderPlaced)
	return p.PlacedAt, ok
}
