// Package bench is the measuring instrument behind 'outbox-lab bench': it
// runs the relay against a real PostgreSQL server and a Kafka-protocol
// broker (the embedded one, or a given cluster) and reports, in one run and
// side by side, the figures and the goals of the performance issue
// (docs/performance.md).
//
// # Phases
//
// [Run] runs the phases of [Config.Phases] in this order, each in fresh
// schemas named outbox_bench_<scenario>_<random> that it drops afterwards:
//
//   - drain: a backlog of Config.Backlog messages (analyzed after loading)
//     drained four times. The database-only ceiling: the store's own Claim
//     and MarkSent (MarkSentAndClaim, one round trip, when the store has
//     it, as the relay uses it) in a tight loop, with the relay's batch
//     size and as many loops as the relay has workers, publishing nothing,
//     so the SQL is the relay's by construction. End to end with one relay. The ceiling again
//     with as many loops as Config.Relays relays have workers, and end to
//     end with Config.Relays relays (in-process, each with its own pool and
//     Kafka client). The report gives each relay rate as a ratio of the
//     ceiling with the same number of loops.
//   - steady: Config.Writers goroutines commit business transactions (an
//     order row and its outbox message) back to back: for Config.Duration/2
//     without a relay, for Config.Duration with one (in its own schema),
//     and for Config.Duration/2 without again; the two runs without are
//     averaged, so that a machine growing busier or quieter is not taken
//     for the relay's cost. It reports the throughput loss, the backlog
//     (committed minus acknowledged, sampled every 250ms) and its trend,
//     and commit-to-ack per message.
//   - latency: Config.Rate messages per second on an open schedule for
//     Config.Duration, by Config.LatencyWriters goroutines, after one
//     unmeasured second of it, with commit-to-ack per message and the
//     writers' own transaction times.
//   - hot: for each of Config.HotStrategies (claim mode, cursor mode), one
//     relay drains four backlogs of Config.HotBacklog messages, each loaded
//     and analyzed in a fresh schema: round robin over Config.Aggregates
//     (the reference, drained to the end), on 1 aggregate, round robin on
//     HotFewAggregates, and Zipf-skewed (HotZipfExponent, a fixed seed)
//     over Config.Aggregates. Each skewed drain stops when drained or after
//     HotBudgetFactor times the reference's time (at least HotMinBudget, at
//     most Config.HotDrainLimit) and gives the rate over what it drained and
//     its ratio to the reference. Then the latency phase's fixed rate with
//     every message on one aggregate, waiting at most 5 s for the
//     acknowledgements after the writers stopped.
//   - idle: a relay on an empty outbox; over Config.IdleWindow it counts
//     statements (a pgx QueryTracer) and socket writes (a wrapped DialFunc,
//     which also sees the pool's pings), on the pool and the LISTEN
//     connection.
//   - claim: Config.Claims claims timed on a table with only the claimable
//     rows, on one that also holds Config.HistoryRows SENT rows, on one
//     where as many rows were just marked SENT with autovacuum off, so that
//     their dead tuples are still in the table and its indexes, and on a
//     backlog of Config.Backlog messages in a table last analyzed while
//     empty (a backlog after a broker outage, before autovacuum's ANALYZE).
//   - memory: 'outbox relay' run as a child process (Config.RelayBinary)
//     on backlogs of Config.Backlog/10 and Config.Backlog; the peak
//     resident set (VmHWM) of each run.
//
// Commit-to-ack is measured per message id: from the moment the writer's
// COMMIT returned to the moment the relay's Hooks.Published reported the
// message acknowledged by the broker and marked SENT.
//
// The report ([Report]) marshals to JSON; [WriteText] prints it as tables
// with each goal's PASS or MISS. The figures are only as quiet as the
// machine: a busy machine gives lower rates and higher latencies, and
// Report.Machine records the load average before and after.
package bench
