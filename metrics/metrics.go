// Package metrics exports what the relay does, and what the outbox table
// holds, as Prometheus metrics. The core packages never import Prometheus:
// the relay reports through relay.Hooks, and the table's state is read on
// each scrape through a [SnapshotFunc] (the relay command's reads an
// ops.StatsCache, which any number of scrapers share).
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.NewRelay(reg)
//	...
//	r, err := relay.New(relay.Config{Store: st, Sink: snk, Hooks: m.Hooks()})
//	...
//	stats := ops.NewStatsCache(o, 5*time.Second) // o: an *ops.Ops
//	err = metrics.NewTable(reg, func(ctx context.Context) (metrics.Snapshot, error) {
//		s, err := stats.Stats(ctx)
//		return metrics.Snapshot{Counts: s.Counts, OldestUnsentAge: s.OldestUnsentAge, BlockedAggregates: s.BlockedAggregates}, err
//	}, 0)
//	...
//	srv, err := admin.New(admin.Config{Gatherer: reg}) // serves /metrics
//
// A consumer's come the same way: mc, err := metrics.NewConsumer(reg), then
// consumer.Config{Hooks: mc.Hooks("billing")} (see [NewConsumer]).
//
// Metric names (all prefixed outbox_):
//
//	relay_published_total              counter   messages acknowledged by the broker and marked SENT
//	relay_failed_attempts_total        counter   failed publish attempts, by class (retriable, permanent, unavailable, topic_unavailable)
//	relay_dead_lettered_total          counter   messages moved to DEAD_LETTER
//	relay_fenced_total                 counter   state changes refused because another relay took the lease over
//	relay_batch_size                   histogram messages per claim
//	relay_commit_to_ack_seconds        histogram from the message's creation to its SENT mark
//	relay_last_published_timestamp_seconds gauge  when the relay last marked a message SENT
//	messages{status}                   gauge     messages in the table by status
//	oldest_unsent_age_seconds          gauge     age of the oldest PENDING, FAILED or IN_FLIGHT message (or unsent QUEUED one)
//	blocked_aggregates                 gauge     aggregates whose head is a dead letter with messages waiting behind it
//	relay_mode{mode}                   gauge     1 for the relay mode the outbox records (claim, cursor or cdc; 'outbox mode'), 0 for the others
//	cursor_active                      gauge     1 while the outbox is in cursor mode (pgstore's EnableCursor)
//	cursor_position                    gauge     the cursor's saved position: QUEUED messages up to this seq are sent
//	cursor_leading                     gauge     1 while a relay holds the cursor's lease (reads and publishes QUEUED messages)
//	cursor_saved_age_seconds           gauge     time since the leader last saved the position (it does so at least every third of its lease)
//	cursor_lag_messages                gauge     QUEUED messages above the position: not sent yet (as of the last save)
//	cursor_lag_seconds                 gauge     age of the oldest of them
//	relay_topic_published_total{topic} counter   records of the topic acknowledged since the relay started (NewTopics)
//	relay_topic_unavailable{topic,reason} gauge  1 while the topic cannot take records; its messages wait (NewTopics)
//	scrape_errors_total                counter   failed reads of the table's state
//
// In cursor mode the unsent QUEUED messages are also in messages{status="PENDING"} and in
// oldest_unsent_age_seconds, and the QUEUED messages the cursor passed in messages{status="SENT"}.
package metrics

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink"
)

// Relay holds the relay's metrics. Create it with [NewRelay] and pass
// [Relay.Hooks] to relay.Config.Hooks.
type Relay struct {
	published     prometheus.Counter
	failed        *prometheus.CounterVec
	deadLettered  prometheus.Counter
	fenced        prometheus.Counter
	batchSize     prometheus.Histogram
	commitToAck   prometheus.Histogram
	lastPublished prometheus.Gauge
}

// NewRelay creates the relay metrics and registers them with reg.
func NewRelay(reg prometheus.Registerer) (*Relay, error) {
	m := &Relay{
		published: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outbox", Subsystem: "relay", Name: "published_total",
			Help: "Messages acknowledged by the broker and marked SENT."}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "outbox", Subsystem: "relay", Name: "failed_attempts_total",
			Help: "Failed publish attempts, by error class: retriable, permanent, unavailable or topic_unavailable."}, []string{"class"}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outbox", Subsystem: "relay", Name: "dead_lettered_total",
			Help: "Messages moved to DEAD_LETTER."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outbox", Subsystem: "relay", Name: "fenced_total",
			Help: "State changes refused because another relay had taken the lease over."}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "outbox", Subsystem: "relay", Name: "batch_size",
			Help: "Messages per claim.", Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000}}),
		commitToAck: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "outbox", Subsystem: "relay", Name: "commit_to_ack_seconds",
			Help:    "Time from a message's creation in the outbox to its SENT mark after the broker's ack.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
		lastPublished: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "outbox", Subsystem: "relay", Name: "last_published_timestamp_seconds",
			Help: "Unix time at which the relay last marked a message SENT."}),
	}
	for _, c := range []prometheus.Collector{m.published, m.failed, m.deadLettered, m.fenced, m.batchSize, m.commitToAck, m.lastPublished} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, class := range []sink.Class{sink.Retriable, sink.Permanent, sink.Unavailable, sink.TopicUnavailable} {
		m.failed.WithLabelValues(class.String())
	}
	return m, nil
}

// Hooks returns relay hooks that feed these metrics.
func (m *Relay) Hooks() relay.Hooks {
	return relay.Hooks{
		Claimed: func(n int) { m.batchSize.Observe(float64(n)) },
		Published: func(_ outbox.Record, since time.Duration) {
			m.published.Inc()
			m.commitToAck.Observe(since.Seconds())
			m.lastPublished.SetToCurrentTime()
		},
		Failed: func(_ outbox.Record, err error, dead bool) {
			m.failed.WithLabelValues(sink.Classify(err).String()).Inc()
			if dead {
				m.deadLettered.Inc()
			}
		},
		Fenced: func(n int) { m.fenced.Add(float64(n)) },
	}
}

// Snapshot is the state of the outbox table that the gauges export.
type Snapshot struct {
	// Counts are the messages by status.
	Counts map[outbox.Status]int64
	// OldestUnsentAge is the age of the oldest unsent message, 0 if none.
	OldestUnsentAge time.Duration
	// BlockedAggregates counts aggregates waiting behind a dead letter.
	BlockedAggregates int64
	// Mode is the relay mode the outbox records: claim, cursor or cdc
	// (pgstore.Store.Mode, ops.CursorState.Mode). Empty exports no
	// relay_mode gauge.
	Mode string
	// Cursor is the cursor of cursor mode; the zero value for an outbox
	// in claim mode.
	Cursor CursorSnapshot
}

// relayModes are the modes the relay_mode gauge always exports, 0 for
// those the outbox is not in.
var relayModes = []string{"claim", "cursor", "cdc"}

// CursorSnapshot is the state of the cursor of cursor mode (ops.Stats'
// Cursor) that the cursor_* gauges export.
type CursorSnapshot struct {
	// Active is true while the outbox is in cursor mode.
	Active bool
	// Position is the cursor's saved position.
	Position int64
	// Leading is true while a relay holds the cursor's lease.
	Leading bool
	// SavedAge is the time since the position was last saved; 0 without
	// a cursor.
	SavedAge time.Duration
	// LagMessages counts the QUEUED messages above the position, and
	// LagAge is the age of the oldest of them (0 when none).
	LagMessages int64
	LagAge      time.Duration
}

// SnapshotFunc reads the table's state; it is called on every scrape.
type SnapshotFunc func(ctx context.Context) (Snapshot, error)

// allStatuses are exported even when zero, so alerts see 0, not absence.
var allStatuses = []outbox.Status{outbox.StatusPending, outbox.StatusInFlight, outbox.StatusSent, outbox.StatusFailed, outbox.StatusDeadLetter, outbox.StatusDiscarded}

// tableCollector reads a Snapshot on each scrape.
type tableCollector struct {
	fn      SnapshotFunc
	timeout time.Duration

	messages, oldest, blocked, mode *prometheus.Desc
	cursor                          []cursorGauge
	errors                          prometheus.Counter
}

// cursorGauge is one of the cursor_* gauges and how a snapshot gives its
// value.
type cursorGauge struct {
	desc  *prometheus.Desc
	value func(CursorSnapshot) float64
}

func newCursorGauges() []cursorGauge {
	gauge := func(name, help string, value func(CursorSnapshot) float64) cursorGauge {
		return cursorGauge{prometheus.NewDesc("outbox_cursor_"+name, help, nil, nil), value}
	}
	return []cursorGauge{
		gauge("active", "1 while the outbox is in cursor mode.", func(c CursorSnapshot) float64 { return boolGauge(c.Active) }),
		gauge("position", "The cursor's saved position: every QUEUED message up to this seq is sent.",
			func(c CursorSnapshot) float64 { return float64(c.Position) }),
		gauge("leading", "1 while a relay holds the cursor's lease and publishes the QUEUED messages.",
			func(c CursorSnapshot) float64 { return boolGauge(c.Leading) }),
		gauge("saved_age_seconds", "Time since the leading relay last saved the cursor's position; 0 without a cursor.",
			func(c CursorSnapshot) float64 { return c.SavedAge.Seconds() }),
		gauge("lag_messages", "QUEUED messages above the cursor's position: not sent yet, as of its last save.",
			func(c CursorSnapshot) float64 { return float64(c.LagMessages) }),
		gauge("lag_seconds", "Age of the oldest QUEUED message above the cursor's position; 0 when none.",
			func(c CursorSnapshot) float64 { return c.LagAge.Seconds() }),
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ErrNoSnapshot is returned by NewTable when fn is nil.
var ErrNoSnapshot = errors.New("metrics: SnapshotFunc is required")

// NewTable registers gauges that read the outbox table's state through fn
// on each scrape, bounded by timeout (defaults to 5s when zero).
func NewTable(reg prometheus.Registerer, fn SnapshotFunc, timeout time.Duration) error {
	if fn == nil {
		return ErrNoSnapshot
	}
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	c := &tableCollector{
		fn: fn, timeout: timeout,
		messages: prometheus.NewDesc("outbox_messages", "Messages in the outbox table by status.", []string{"status"}, nil),
		oldest:   prometheus.NewDesc("outbox_oldest_unsent_age_seconds", "Age of the oldest PENDING, FAILED or IN_FLIGHT message, or QUEUED one above the cursor's position; 0 when none.", nil, nil),
		blocked:  prometheus.NewDesc("outbox_blocked_aggregates", "Aggregates whose head is a dead letter with messages waiting behind it.", nil, nil),
		mode: prometheus.NewDesc("outbox_relay_mode", "1 for the relay mode the outbox records (claim, cursor or cdc), 0 for the others.",
			[]string{"mode"}, nil),
		cursor: newCursorGauges(),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "outbox", Name: "scrape_errors_total",
			Help: "Failed reads of the outbox table's state."}),
	}
	return reg.Register(c)
}

func (c *tableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.messages
	ch <- c.oldest
	ch <- c.blocked
	ch <- c.mode
	for _, g := range c.cursor {
		ch <- g.desc
	}
	c.errors.Describe(ch)
}

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	s, err := c.fn(ctx)
	// The counter goes out from here, after the read, so that the scrape
	// whose read failed already counts it. Registered on its own, the
	// registry could collect it before this read, concurrently.
	defer c.errors.Collect(ch)
	if err != nil {
		c.errors.Inc()
		return // no stale values: the gauges are absent for this scrape
	}
	for _, st := range allStatuses {
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(s.Counts[st]), string(st))
	}
	for st, n := range s.Counts {
		if !isKnown(st) {
			ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(n), string(st))
		}
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestUnsentAge.Seconds())
	ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, float64(s.BlockedAggregates))
	if s.Mode != "" {
		for _, m := range relayModes {
			ch <- prometheus.MustNewConstMetric(c.mode, prometheus.GaugeValue, boolGauge(m == s.Mode), m)
		}
	}
	for _, g := range c.cursor {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(s.Cursor))
	}
}

func isKnown(st outbox.Status) bool {
	for _, k := range allStatuses {
		if k == st {
			return true
		}
	}
	return false
}

// SlotLag is a CDC replication slot's lag, as package cdc reports it.
type SlotLag struct {
	// Bytes of WAL the slot holds back.
	Bytes int64
	// Age of the oldest message received from the stream and not yet
	// confirmed.
	Age time.Duration
	// Active reports whether a relay streams from the slot.
	Active bool
}

// SlotLagFunc reads a slot's lag; it is called on every scrape.
type SlotLagFunc func(ctx context.Context) (SlotLag, error)

// NewSlotLag registers gauges for a CDC relay's replication slot, read
// through fn on each scrape (bounded by 5s):
//
//	cdc_slot_lag_bytes{slot}    WAL the slot holds back (PostgreSQL keeps it until confirmed)
//	cdc_slot_lag_seconds{slot}  age of the oldest received, unconfirmed message
//	cdc_slot_active{slot}       1 while a relay streams from the slot
func NewSlotLag(reg prometheus.Registerer, slot string, fn SlotLagFunc) error {
	if fn == nil {
		return ErrNoSnapshot
	}
	read := func(pick func(SlotLag) float64) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			l, err := fn(ctx)
			if err != nil {
				return math.NaN()
			}
			return pick(l)
		}
	}
	labels := prometheus.Labels{"slot": slot}
	for _, g := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "outbox", Subsystem: "cdc", Name: "slot_lag_bytes", ConstLabels: labels,
			Help: "WAL the CDC relay's replication slot holds back."}, read(func(l SlotLag) float64 { return float64(l.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "outbox", Subsystem: "cdc", Name: "slot_lag_seconds", ConstLabels: labels,
			Help: "Age of the oldest message received from the stream and not yet confirmed."}, read(func(l SlotLag) float64 { return l.Age.Seconds() })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "outbox", Subsystem: "cdc", Name: "slot_active", ConstLabels: labels,
			Help: "1 while a relay streams from the slot."}, read(func(l SlotLag) float64 { return boolGauge(l.Active) })),
	} {
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return nil
}
