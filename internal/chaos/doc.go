// Package chaos is a fault-injection harness for the whole outbox system,
// with a checker that does not trust the system it checks.
//
// [Run] starts the real processes of the reference order system, each
// as a child process of the outbox-lab binary (two order services, several
// relays, the billing and inventory consumers, and the embedded broker with
// an on-disk data directory), against real PostgreSQL. Every link to
// PostgreSQL and to the broker passes through an embedded toxiproxy, so that
// latency, resets and blackholes can be put on it. The broker advertises the
// proxy's address (it listens on 127.0.0.1 and advertises 127.0.0.2, where
// the proxy listens on the same port), because Kafka clients reconnect to
// the advertised address, not to the seed they were given.
//
// While a seeded workload runs (concurrent HTTP clients over a skewed set
// of orders, rejected orders, oversized poison messages, direct enqueues on
// a few hot aggregates, transactions held open for seconds and sometimes
// rolled back), a fault schedule derived from the same seed kills, pauses
// and restarts processes, stops the broker, restarts PostgreSQL (only with
// Config.PGRestart) and degrades links. Then everything is healed, the
// harness waits for the backlog to drain, reads the topics with its own
// franz-go client from the start, reads the consumers' effect tables and
// the outbox, and hands these observations to [Check], a pure function that
// decides which invariants hold. The same seed gives the same workload
// choices and the same fault schedule; the timing of the processes
// themselves is not reproducible.
//
// The command is 'outbox-lab chaos'; docs/chaos.md describes the invariants,
// the faults and the report.
package chaos
