// Package relay publishes the outbox. It is the relay's core: its workers
// claim due messages in small batches through a strategy (package
// relay/strategy: claim, cursor), publish them with a sink.Sink, and mark
// them SENT only after the broker acknowledged them; package
// relay/failure decides what happens to a message whose publish failed.
//
// A relay over a PostgreSQL outbox, publishing to Kafka until ctx ends:
//
//	st, err := pgstore.New(pool, pgstore.Config{Schema: "outbox"})
//	...
//	snk, err := kafka.New(kafka.Config{Brokers: []string{"localhost:9092"}})
//	...
//	defer snk.Close()
//	r, err := relay.New(relay.Config{Store: st, Sink: snk})
//	...
//	if err := r.Start(ctx); err != nil {
//		return err
//	}
//	defer r.Stop(context.Background()) // waits for the acks in flight
//
// [Relay.Run] does Start, waits for ctx to end and does Stop, for a main
// function. Any number of relays may run over one outbox.
//
// # Guarantees
//
//   - At least once: a message is marked SENT only after its ack. A relay
//     that dies after the ack but before the mark leaves the message
//     IN_FLIGHT; when its lease expires another relay (or the restarted one)
//     sends it again. Consumers must be idempotent (see package inbox).
//   - No two relays send a message at the same time: claims use
//     FOR UPDATE SKIP LOCKED and a lease; every state change after the claim
//     is fenced by the claim's token, so a relay whose lease was taken over
//     changes nothing.
//   - Order per aggregate: a store claims only the head of each aggregate
//     (no earlier message of it unsent), or a run that starts with it (see
//     Runs), so a message never overtakes an earlier one of its aggregate,
//     whatever the number of relays. A message that is retrying or
//     dead-lettered blocks only its own aggregate.
//   - Failures: a retriable error counts an attempt and schedules a retry
//     after min(RetryMax, RetryBase*2^attempts) minus up to half of it as
//     jitter; after MaxAttempts the message is DEAD_LETTER. A record the
//     broker will never accept (too large, invalid, a topic name Kafka
//     cannot have) dead-letters at once with the broker's reason, and so
//     does a message that is itself invalid (a row written with plain SQL
//     whose headers are not a JSON object of string values: see
//     outbox.Record.Invalid), with the column and the rule, without being
//     published; the rest of its batch is published as usual. A topic
//     that cannot take records (missing, not authorized) is not the
//     message's fault: nothing is counted, the message waits and is tried
//     again every few seconds, and other topics flow. An
//     unreachable broker is not the message's fault: nothing is counted,
//     and the whole relay pauses with a growing backoff instead of
//     looping. Package [failure] makes these decisions, for the CDC relay
//     too.
//   - No database transaction is held open while waiting for the broker:
//     claim and mark are separate short statements.
//   - A missing store (its tables not created, or the wrong schema: an
//     error wrapping store.ErrNotMigrated) costs no event: the relay logs
//     the error, which says how to fix it, when it begins and then every
//     30 seconds, retries every few seconds, and goes on, with a log line,
//     once the tables exist.
//
// # Runs
//
// A run is several consecutive messages of one aggregate in one batch. A
// store that can claims an aggregate's head with the messages right after
// it, up to Config.MaxRun messages and Config.MaxRunBytes of payload
// (store.ClaimParams), and the relay publishes the batch in one call
// (sink.RunSink.PublishRuns) and marks the run together. MaxRun defaults
// to 1, which turns runs off; above 1 the sink must be a sink.RunSink. A
// plain sink.Sink never gets two messages of one aggregate in a call: if a
// strategy hands out a run all the same, the relay publishes the first
// message of each aggregate and gives the others back unsent.
//
// After a failure, order holds per aggregate: the messages before its first
// one that was not acknowledged are marked SENT; that one is failed (or
// given back) as its error says; every later message of the aggregate in
// the batch is given back unsent (Release), whatever its own error, with no
// attempt counted and no hook called, so that it goes out again only after
// the earlier one. The relay gives them back before it records the
// failure, so that the failed message stays leased while they go back. A
// later message that the sink acknowledged all the same (which a RunSink
// must not do) is on the topic: it is marked SENT, and the relay logs at
// error level that order on the topic is broken for its aggregate.
//
// # Modes
//
// The core of the relay (its workers, publishing, failures and lifecycle)
// drives a strategy (package [strategy]), which finds the messages to
// publish and records what became of them; the core never asks which
// strategy runs. Config.Strategy sets it, and Config.Store is short for
// the claim strategy over a store. The outbox records which strategy
// publishes it (pgstore.Store.Mode; "outbox mode"):
//
//   - claim, the default (package [claim]): every relay claims due
//     messages from a store.Queue and marks each one, as above; any number
//     of relays share the work. Over pgstore, the mark of a published
//     batch claims the next batch in the same round trip.
//   - cursor (package relay/cursor, PostgreSQL): one relay at a time, the
//     leader, reads new messages in seq order and keeps a position instead
//     of marking each message, and hands the lead over when it stops.
//     Messages whose publish failed, and the later ones of their
//     aggregates, are claimed and marked as in claim mode.
//   - cdc (package relay/cdc): one relay at a time reads the inserts from
//     the write-ahead log; a Relay over its stream strategy publishes them
//     (the workers claim from the messages read, in commit order, one per
//     aggregate at a time), and its table path is a Relay over the claim
//     strategy, for the aggregates the stream handed to it.
//
// Over PostgreSQL, package relay/modes runs the strategy of the mode the
// outbox records, and follows a switch from claim to cursor while the
// relay runs; "outbox relay" uses it:
//
//	r, err := relay.New(relay.Config{Strategy: modes.New(st, logger), Sink: sink})
//
// # Lifecycle
//
// [Relay.Start] returns once the strategy's wake-ups are set up (at once
// with Config.DisableListen or a strategy without them; within
// pgstore.ListenProbeTimeout, 5s, behind a pooler that does not deliver
// notifications); [Relay.Stop] stops claiming, waits for outstanding acks
// up to Config.ShutdownTimeout, releases the leases of whatever was not
// sent, closes the strategy after the last mark (a leader hands its lead
// over) and the relay's listening connection, and is safe to call more
// than once. Once Stop returned, the relay holds no
// connection and runs no goroutine, whatever the context Start was given. [Relay.Run]
// does both around a context, for a main function.
package relay
