package bench

import "time"

// Report is what Run measured. Each phase's section is nil when the phase
// did not run. It marshals to JSON as is (durations as milliseconds or
// seconds, named so).
type Report struct {
	StartedAt      time.Time `json:"startedAt"`
	ElapsedSeconds float64   `json:"elapsedSeconds"`
	Machine        Machine   `json:"machine"`
	Settings       Settings  `json:"settings"`

	Drain   *DrainReport     `json:"drain,omitempty"`
	Steady  *SteadyReport    `json:"steady,omitempty"`
	Latency *FixedRateReport `json:"latency,omitempty"`
	Hot     *HotReport       `json:"hot,omitempty"`
	Idle    *IdleReport      `json:"idle,omitempty"`
	Claim   *ClaimReport     `json:"claim,omitempty"`
	Memory  *MemoryReport    `json:"memory,omitempty"`

	// RelayLeastLossPercent is the writers' throughput loss that a relay
	// costing the machine as much CPU per message as the database-only
	// ceiling does (full batches, nothing to wait for) would cause when the
	// writers are bound by the CPU, as on a small machine: c/(c+w) with c
	// the ceiling's CPU per message and w the writers' CPU per
	// transaction. A relay keeping up with the writers claims smaller
	// batches and also runs the broker client, so it costs more; the
	// steady phase's loss can come close to this figure, and below it only
	// by the noise of the steady phase's comparison.
	// Set when the drain and the steady phase (served by the polling
	// relay) both ran and /proc/stat could be read.
	RelayLeastLossPercent float64 `json:"relayLeastLossPercent,omitempty"`

	// Goals are the targets next to the figures, for the phases
	// that ran.
	Goals []Goal `json:"goals"`
	// Notes explain skipped phases and anything else a reader of the
	// figures should know.
	Notes []string `json:"notes,omitempty"`
}

// Machine describes where the figures were measured.
type Machine struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel,omitempty"`
	GoVersion string `json:"goVersion"`
	// LoadAverage is the 1-minute load average at the start and at the end
	// of the run (Linux), a hint of what else ran on the machine.
	LoadAverageStart string `json:"loadAverageStart,omitempty"`
	LoadAverageEnd   string `json:"loadAverageEnd,omitempty"`
	// CPUPressurePercent is the share of the run's wall time during which
	// at least one runnable task waited for a CPU (Linux pressure stall
	// information, /proc/pressure/cpu "some"), or -1 where the kernel does
	// not report it. The bench's own writers, relays and broker count too:
	// on a machine with few CPUs it explains latency tails that no part of
	// the relay spends.
	CPUPressurePercent float64 `json:"cpuPressurePercent"`

	PostgreSQL        string `json:"postgresql"`
	SharedBuffers     string `json:"sharedBuffers"`
	SynchronousCommit string `json:"synchronousCommit"`
	Autovacuum        string `json:"autovacuum"`
	// Kafka is "embedded" or the seed brokers.
	Kafka string `json:"kafka"`
}

// Settings are the sizes the run used.
type Settings struct {
	Phases            []Phase `json:"phases"`
	Backlog           int     `json:"backlog"`
	Relays            int     `json:"relays"`
	Writers           int     `json:"writers"`
	Rate              int     `json:"rate"`
	DurationSeconds   float64 `json:"durationSeconds"`
	IdleWindowSeconds float64 `json:"idleWindowSeconds"`
	HistoryRows       int     `json:"historyRows"`
	Claims            int     `json:"claims"`
	Aggregates        int     `json:"aggregates"`
	PayloadBytes      int     `json:"payloadBytes"`
	BatchSize         int     `json:"batchSize"`
	RelayWorkers      int     `json:"relayWorkers"`
	PollIntervalMs    float64 `json:"pollIntervalMs"`
	LingerMs          float64 `json:"lingerMs"`
	LingerAbove       float64 `json:"lingerAbove"`
	// Mode is the relay of the steady and latency phases.
	Mode Mode `json:"mode"`
	// Cursor: every phase ran on outboxes in cursor mode.
	Cursor bool `json:"cursor"`
	// VacuumEverySeconds is Config.VacuumEvery; 0 when off.
	VacuumEverySeconds float64 `json:"vacuumEverySeconds"`
	Topic              string  `json:"topic"`
}

// DrainReport compares the relay's end-to-end drain with the database-only
// ceiling, all on a backlog of Messages messages.
type DrainReport struct {
	Messages int `json:"messages"`
	// CeilingLoops is the number of concurrent claim-and-mark loops of the
	// ceiling: the relay's Workers.
	CeilingLoops      int     `json:"ceilingLoops"`
	CeilingPerSecond  float64 `json:"ceilingPerSecond"`
	OneRelayPerSecond float64 `json:"oneRelayPerSecond"`
	Relays            int     `json:"relays"`
	// RelaysCeilingLoops is Relays times the relay's Workers: the loops of
	// the ceiling that the several relays are compared with.
	RelaysCeilingLoops     int     `json:"relaysCeilingLoops"`
	RelaysCeilingPerSecond float64 `json:"relaysCeilingPerSecond"`
	RelaysPerSecond        float64 `json:"relaysPerSecond"`
	// OneRelayRatio is OneRelayPerSecond over CeilingPerSecond;
	// RelaysRatio is RelaysPerSecond over RelaysCeilingPerSecond.
	OneRelayRatio float64 `json:"oneRelayRatio"`
	RelaysRatio   float64 `json:"relaysRatio"`
	// CeilingCPUMicrosPerMessage is the machine's busy CPU time (all
	// processes: PostgreSQL, the loops' Go side, anything else) per
	// message while the CeilingLoops loops drained the backlog, and
	// CeilingCPUBusyPercent the share of all CPUs that was busy meanwhile;
	// 0 where /proc/stat cannot be read. What the relay's SQL costs per
	// message in full batches with nothing to wait for: the least a relay
	// can cost (see Report.RelayLeastLossPercent).
	CeilingCPUMicrosPerMessage float64 `json:"ceilingCpuMicrosPerMessage"`
	CeilingCPUBusyPercent      float64 `json:"ceilingCpuBusyPercent"`
	// FailedPublishes counts publishes the relays reported as failed.
	FailedPublishes int64 `json:"failedPublishes"`
}

// Latency is a distribution of per-message times from the moment the
// writer's COMMIT returned (see Delivery for the ends).
type Latency struct {
	Count int     `json:"count"`
	P50Ms float64 `json:"p50Ms"`
	P90Ms float64 `json:"p90Ms"`
	P99Ms float64 `json:"p99Ms"`
	// P999Ms is the 99.9th percentile.
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
}

// SteadyReport is the steady state: writers at their maximum rate without
// and with the relay, in alternating segments (see docs/performance.md).
type SteadyReport struct {
	Writers int `json:"writers"`
	// DurationSeconds is the writing time with the relay, in Segments
	// segments; as much again is written without it, in Segments+1.
	DurationSeconds float64 `json:"durationSeconds"`
	Segments        int     `json:"segments"`
	// WithoutRelayTxPerSecond and WithRelayTxPerSecond are committed
	// business transactions (one outbox message each) per second, the mean
	// over the segments without and with the relay.
	WithoutRelayTxPerSecond float64 `json:"withoutRelayTxPerSecond"`
	WithRelayTxPerSecond    float64 `json:"withRelayTxPerSecond"`
	// SegmentTxPerSecond is each segment with the relay, and
	// SegmentLossPercent how much slower it was than the mean of the two
	// segments without it around it; WithoutSegmentTxPerSecond is each
	// segment without it, in order (one more).
	SegmentTxPerSecond        []float64 `json:"segmentTxPerSecond"`
	WithoutSegmentTxPerSecond []float64 `json:"withoutSegmentTxPerSecond"`
	SegmentLossPercent        []float64 `json:"segmentLossPercent"`
	// SegmentTransactions is the number of business transactions (and
	// messages) each segment with the relay committed: the messages whose
	// latencies CommitToAck and Delivery give.
	SegmentTransactions []int64 `json:"segmentTransactions"`
	// ThroughputLossPercent is the median of SegmentLossPercent: how much
	// slower the writers were with the relay running (negative: faster).
	ThroughputLossPercent float64 `json:"throughputLossPercent"`
	// Backlog (committed minus acknowledged) a quarter second into the
	// first segment with the relay, at the end of the last, and its
	// maximum.
	BacklogStart int64 `json:"backlogStart"`
	BacklogEnd   int64 `json:"backlogEnd"`
	BacklogMax   int64 `json:"backlogMax"`
	// BacklogTrendPerSecond is the mean over the segments with the relay of
	// the Theil-Sen slope (the median of the slopes between every two
	// samples) of the backlog sampled every 250ms (from the segment's
	// second sample on).
	BacklogTrendPerSecond float64 `json:"backlogTrendPerSecond"`
	// BacklogGrows is true when the trend exceeds 1% of the write rate.
	BacklogGrows bool `json:"backlogGrows"`
	// WritersCPUMicrosPerTx is the machine's busy CPU time per business
	// transaction in the segments without the relay, and
	// WritersCPUBusyPercent the share of all CPUs that was busy meanwhile
	// (near 100 when the writers are bound by the CPU); 0 where /proc/stat
	// cannot be read.
	WritersCPUMicrosPerTx float64 `json:"writersCpuMicrosPerTx"`
	WritersCPUBusyPercent float64 `json:"writersCpuBusyPercent"`
	Delivery
	// Relay is what the relay did for it.
	Relay RelayWork `json:"relay"`
}

// Delivery is how long the messages of a phase took from the writer's
// commit, measured per message.
type Delivery struct {
	// CommitToAck is from the writer's COMMIT returning to the broker's
	// acknowledgement of the message (the sink's Publish returning without
	// an error for it): from then on a consumer can read it.
	CommitToAck Latency `json:"commitToAck"`
	// CommitToPublish and PublishToAck split CommitToAck, over the same
	// messages: from the commit to the relay handing the message to the
	// broker client (waiting for a poll or wake-up, and the read), and from
	// there to the broker's acknowledgement.
	CommitToPublish Latency `json:"commitToPublish"`
	PublishToAck    Latency `json:"publishToAck"`
	// CommitToMarked is from the commit to the relay's mark (SENT) after
	// the acknowledgement, when Hooks.Published runs.
	CommitToMarked Latency `json:"commitToMarked"`
	// Unacked counts messages not marked SENT within StallTimeout after
	// the writers stopped.
	Unacked int `json:"unacked"`
}

// RelayWork is what a relay spent on the messages of a phase: how many
// claims it made, how many messages each took on average, and how many
// round trips to PostgreSQL (socket writes on its pool and its LISTEN
// connection) it made per message.
type RelayWork struct {
	Claims               int64   `json:"claims"`
	MessagesPerClaim     float64 `json:"messagesPerClaim"`
	RoundTrips           int64   `json:"roundTrips"`
	RoundTripsPerMessage float64 `json:"roundTripsPerMessage"`
}

// FixedRateReport is the latency at a fixed enqueue rate.
type FixedRateReport struct {
	TargetPerSecond   int     `json:"targetPerSecond"`
	AchievedPerSecond float64 `json:"achievedPerSecond"`
	// Writers is the number of goroutines that kept to the schedule.
	Writers         int     `json:"writers"`
	DurationSeconds float64 `json:"durationSeconds"`
	Delivery
	// Transactions is how long the writers' own business transactions took,
	// from BEGIN to COMMIT returning, over the measured messages: what the
	// database's commits cost at the same time, for comparison with
	// commit-to-ack.
	Transactions Latency `json:"transactions"`
	// Relay is what the relay did for it.
	Relay RelayWork `json:"relay"`
}

// HotReport is the hot phase: for each strategy, one relay draining
// backlogs of the same size placed differently on aggregates, and
// commit-to-ack with every message on one aggregate.
type HotReport struct {
	// Messages is the size of every backlog.
	Messages int `json:"messages"`
	// Aggregates is the number of aggregates of the spread and the
	// Zipf-skewed backlogs, FewAggregates that of the backlog on a few.
	Aggregates    int `json:"aggregates"`
	FewAggregates int `json:"fewAggregates"`
	// ZipfExponent is the exponent s of the Zipf-skewed backlog.
	ZipfExponent float64 `json:"zipfExponent"`
	// DrainLimitSeconds is Config.HotDrainLimit.
	DrainLimitSeconds float64             `json:"drainLimitSeconds"`
	Strategies        []HotStrategyReport `json:"strategies"`
}

// HotStrategyReport is the hot phase for one strategy.
type HotStrategyReport struct {
	Strategy Strategy `json:"strategy"`
	// Spread is the reference: the backlog round robin over
	// HotReport.Aggregates aggregates, drained to the end.
	Spread HotDrain `json:"spread"`
	// BudgetSeconds is how long each of the other drains ran at most:
	// HotBudgetFactor times Spread's time, at least HotMinBudget, at most
	// HotReport.DrainLimitSeconds.
	BudgetSeconds float64 `json:"budgetSeconds"`
	// OneAggregate, FewAggregates and Zipf are the backlog on 1 aggregate,
	// round robin on HotReport.FewAggregates, and Zipf-skewed over
	// HotReport.Aggregates.
	OneAggregate  HotDrain `json:"oneAggregate"`
	FewAggregates HotDrain `json:"fewAggregates"`
	Zipf          HotDrain `json:"zipf"`
	// OneAggregateLatency is commit-to-ack at Config.Rate with every
	// message on one aggregate; messages not acknowledged within 5 s after
	// the writers stopped count in its Unacked.
	OneAggregateLatency *FixedRateReport `json:"oneAggregateLatency"`
}

// HotDrain is one relay draining one backlog of the hot phase.
type HotDrain struct {
	Messages int `json:"messages"`
	// Aggregates is the number of distinct aggregates the backlog is on,
	// BusiestShare the share of its messages on the busiest one.
	Aggregates   int     `json:"aggregates"`
	BusiestShare float64 `json:"busiestShare"`
	// Drained is the number of messages acknowledged and marked SENT in
	// Seconds, from the relay's start; Complete is true when that is all of
	// them, false when the drain's budget ran out first.
	Drained  int64   `json:"drained"`
	Seconds  float64 `json:"seconds"`
	Complete bool    `json:"complete"`
	// PerSecond is Drained over Seconds. Of an incomplete drain of a
	// skewed backlog it is more than the whole drain's rate would be: the
	// busiest aggregates' messages are the ones left.
	PerSecond float64 `json:"perSecond"`
	// Ratio is PerSecond over the spread drain's (0 for the spread drain).
	Ratio float64 `json:"ratio"`
	// FailedPublishes counts publishes the relay reported as failed.
	FailedPublishes int64 `json:"failedPublishes"`
}

// IdleReport is what an idle relay sends to PostgreSQL.
type IdleReport struct {
	WindowSeconds float64 `json:"windowSeconds"`
	// Statements counts queries through pgx (QueryTracer and BatchTracer:
	// each statement of a batch counts), on the pool and on the LISTEN
	// connection. A batch of several statements is one round trip.
	Statements          int64   `json:"statements"`
	StatementsPerSecond float64 `json:"statementsPerSecond"`
	// RoundTrips counts writes to the database sockets: statements plus
	// what pgx sends on its own, such as the pool's liveness pings.
	RoundTrips          int64   `json:"roundTrips"`
	RoundTripsPerSecond float64 `json:"roundTripsPerSecond"`
}

// ClaimTimes are the times of consecutive claims in one scenario.
type ClaimTimes struct {
	// HistoryRows are the sent rows in the table besides the claimable ones.
	HistoryRows int `json:"historyRows"`
	// Claimable is the number of due messages loaded for the claims.
	Claimable int `json:"claimable"`
	// LoadSeconds is how long preparing the table took.
	LoadSeconds float64 `json:"loadSeconds"`
	// CheckpointSeconds is how long the CHECKPOINT after the load took
	// (untimed for the claims): the load's writes reach the disk before
	// the claims are timed, not during them. CheckpointError is why it
	// did not run (the bench's user may not checkpoint), if it did not.
	CheckpointSeconds float64 `json:"checkpointSeconds"`
	CheckpointError   string  `json:"checkpointError,omitempty"`
	Claims            int     `json:"claims"`
	FirstMs           float64 `json:"firstMs"`
	P50Ms             float64 `json:"p50Ms"`
	P99Ms             float64 `json:"p99Ms"`
	MaxMs             float64 `json:"maxMs"`
}

// ClaimReport compares claim times with and without a large history.
type ClaimReport struct {
	BatchSize int `json:"batchSize"`
	// Empty: only the claimable rows. History: HistoryRows rows inserted
	// as SENT. JustMarked: HistoryRows rows inserted PENDING and then
	// marked SENT, with autovacuum off for the table, so that their dead
	// tuples are still there. StaleStats: the table was analyzed while
	// empty, then a backlog of Config.Backlog messages arrived (as after a
	// broker outage) and no ANALYZE ran since.
	Empty      ClaimTimes `json:"empty"`
	History    ClaimTimes `json:"history"`
	JustMarked ClaimTimes `json:"justMarked"`
	StaleStats ClaimTimes `json:"staleStats"`
	// Ratios of the p99 to the empty table's p99.
	HistoryP99Ratio    float64 `json:"historyP99Ratio"`
	JustMarkedP99Ratio float64 `json:"justMarkedP99Ratio"`
	StaleStatsP99Ratio float64 `json:"staleStatsP99Ratio"`
	// Ratios of the first claim to the empty table's first claim. Every
	// first claim follows the table's ANALYZE, which invalidates the cached
	// plans, so it replans; it also seeds the claim floor (or, in cursor
	// mode, takes the lead). The empty table's first claim paid the same,
	// so the ratio is what the table's history adds. (Until 2026-12-02 the
	// bench divided by the empty table's p99, in fields named
	// justMarkedFirstRatio and staleStatsFirstRatio; the first claim on the
	// empty table alone came to 1.3-2.7x of that.)
	JustMarkedFirstToFirstRatio float64 `json:"justMarkedFirstToFirstRatio"`
	StaleStatsFirstToFirstRatio float64 `json:"staleStatsFirstToFirstRatio"`
}

// MemoryReport is the peak resident memory of the outbox relay process
// draining a small and a large backlog.
type MemoryReport struct {
	// Method says how memory was measured.
	Method         string  `json:"method"`
	SmallBacklog   int     `json:"smallBacklog"`
	LargeBacklog   int     `json:"largeBacklog"`
	SmallPeakBytes int64   `json:"smallPeakBytes"`
	LargePeakBytes int64   `json:"largePeakBytes"`
	Ratio          float64 `json:"ratio"`
	// Drain rates of the process, from its start to an empty backlog
	// (start-up included).
	SmallDrainPerSecond float64 `json:"smallDrainPerSecond"`
	LargeDrainPerSecond float64 `json:"largeDrainPerSecond"`
}

// Goal is one of the targets, with the figure measured for it.
type Goal struct {
	Name string `json:"name"`
	// Target and Measured are for people ("<= 3 ms", "2.1 ms").
	Target   string `json:"target"`
	Measured string `json:"measured"`
	// Value and Limit are for machines, in the unit of the goal.
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Pass  bool    `json:"pass"`
}
