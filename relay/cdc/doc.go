// Package cdc is the outbox relay in change-data-capture mode: instead of
// polling the outbox table, it reads the outbox inserts from PostgreSQL's
// write-ahead log through logical replication (the built-in pgoutput
// plugin), and publishes them with the same sink, hence the same Kafka
// record contract, as the polling relay. The outbox table and the
// application's Enqueue calls stay as they are; only the relay changes.
// docs/cdc.md is the operator's guide.
//
// # Setting up
//
// PostgreSQL needs wal_level = logical, and the relay's role the
// REPLICATION attribute. Run the store's migrations ("outbox migrate"),
// switch the outbox to CDC mode ("outbox mode set cdc",
// pgstore.Store.SetMode), then:
//
//	r, err := cdc.New(cdc.Config{Pool: pool, Sink: kafkaSink, Schema: "outbox"})
//	...
//	err = r.Run(ctx) // until ctx is done, or a fatal error such as ErrSlotLost
//
// The outbox records its relay mode (pgstore.Store.Mode). The relay checks
// it each time it becomes the active relay for its slot, before it creates
// or reads the slot, and stops with an error wrapping ErrNotCDCMode when it
// is not cdc: the mode permits the slot, the relay creates it. Switching
// the outbox out of CDC mode (pgstore.Store.SetMode) drops the slot, and is
// refused while a relay streams from it. A switch that runs while the
// relay sets up is seen before the stream starts (the relay reads the mode
// again, after the switch, and drops the slot it made), and the streaming
// relay reads the mode at each renewal of its lease and stops when it is
// no longer cdc.
//
// At start the relay creates, if absent, its three small tables in the
// outbox schema (outbox_cdc_slots, outbox_cdc_deferred, outbox_cdc_leases),
// a publication on the outbox table that publishes inserts only, and a
// named logical replication slot. The publication publishes a time-partitioned outbox
// table (pgstore.Config.Partitioning) through its root, so inserts into any
// partition arrive as rows of outbox_messages, and partitions may be
// created and dropped (ops.MaintainPartitions) while the relay streams.
//
// A relay started before the migrations, or on the wrong schema, waits:
// it logs an error that names the schema and the fix ("no outbox tables
// in schema ...: run 'outbox migrate --schema ...'"), when it begins and
// then every 30 seconds, tries again every Config.StandbyInterval, and
// sets up and streams once the tables exist, without a restart.
//
// # How a message travels
//
// The relay receives each committed transaction's inserts in commit order
// and reads them in batches of up to Config.BatchSize:
//
//  1. Check (one statement per batch): a message is published from the
//     stream only if its row is still PENDING, its aggregate is not deferred
//     to the table path (below), and no earlier message of its aggregate is
//     FAILED, IN_FLIGHT or DEAD_LETTER. A row that is SENT or gone was
//     handled already and is skipped; any other message, and its aggregate,
//     goes to the table path. The checked batch joins the ledger, the
//     relay's in-memory list of the messages in flight, in stream order
//     (kept for one streaming connection, rebuilt from the slot after a
//     reconnect).
//  2. Publish: the workers of a relay core (package relay, the same core as
//     the polling relay's, driving the stream as its strategy) claim the
//     ready messages, oldest first, with at most one message of each
//     aggregate in flight at a time: a message is ready only once the previous message of its aggregate
//     was acknowledged. If that one failed or was deferred, the message is
//     deferred too. There are ceil(MaxInFlight / BatchSize) workers, each
//     claiming up to BatchSize messages. With runs (Config.MaxRun, below)
//     one claim holds several messages of an aggregate.
//  3. Record, in one statement (record.sql) for everything that waits to be
//     recorded: SENT marks (or deletes, with CleanupDelete) of the acks,
//     failures, deferred aggregates. Two records may run at once; one that
//     hands aggregates to the table path starts only after the records
//     started before it returned. A worker's mark of acks returns once it
//     handed them to the record, and Hooks.Published is called once that
//     record committed; a mark of failures returns once its record
//     committed, and the failures are reported then.
//  4. Confirm: the position up to which every message is recorded (or was
//     skipped) is reported to the server, which may then discard the WAL
//     before it. On a crash or reconnect the stream restarts from the last
//     confirmed position: messages are sent again, never lost (the check
//     skips the ones already recorded).
//
// The steps overlap: while earlier messages await their acks and their
// record, the relay reads and checks the next batches, up to
// Config.MaxInFlight messages and Config.MaxInFlightBytes. The byte bound
// counts every message from the moment the stream reader has decoded it
// until the confirmed position passed it, so it bounds the relay's memory
// (see Config.MaxInFlightBytes). The confirmed position moves in stream
// order only, over recorded messages only, so it never passes a message
// that is not acknowledged and recorded (or handed to the table path).
// Order per aggregate holds across batches; across aggregates, messages in
// flight overlap, so records of different aggregates may reach the broker
// in another order than their commits (MaxInFlight = BatchSize reads one
// batch at a time with one worker, whose claims follow commit order).
//
// # Runs
//
// Config.MaxRun above 1 (it defaults to 1, which turns runs off; the sink
// must then implement sink.RunSink) lets a claim hand out a run per
// aggregate: its ready message and the messages of the aggregate right
// after it in commit order that the check passed, up to MaxRun messages
// and Config.MaxRunBytes of payload (the first message whatever its size).
// A claim takes the first messages of the aggregates first, oldest first,
// and then, while BatchSize allows, the second message of each run, then
// the third, and so on. The core publishes the batch in one call
// (sink.RunSink.PublishRuns). An aggregate's next messages are handed out
// only once none of its run is out: after the acks of the whole run, or
// once the messages not acknowledged are back.
//
// A run settles as in the polling relay (package relay, "Runs"): the
// messages before the first one not acknowledged are recorded SENT, and
// the confirmed position moves over them once that record committed; the
// later messages of the run are given back, to the front of their
// aggregate's queue, in order, before the first one's failure is settled.
// A failure that found the broker unreachable gives that message back too,
// so the run is published again from there, in order. Any other failure is
// recorded, and hands the aggregate to the table path with the failed
// message and every message behind it; the stream hands out nothing more of
// the aggregate until the table path releases it. A session that ends while
// a run is out gets the whole run back, and a crash before a run's record
// committed leaves it to the next session, which reads it from the slot
// again.
//
// # The table path
//
// A message the stream cannot publish in order (its publish failed, or an
// earlier message of its aggregate is dead-lettered or held by another
// relay, or it was unsent when the slot was created) is left in the table,
// and its aggregate is recorded in outbox_cdc_deferred. The table path, the
// polling relay's claim-publish-mark loop restricted to deferred
// aggregates, sends those messages with the polling relay's retries,
// backoff and dead letters, in order per aggregate. When an aggregate has
// nothing unsent left, it is released and its next messages come from the
// stream again.
//
// # Failures
//
//   - Retriable publish error: the attempt is counted, the row becomes
//     FAILED with the next attempt scheduled, and the table path retries it
//     (as in polling mode), up to MaxAttempts.
//   - Permanent error: DEAD_LETTER at once; later messages of the
//     aggregate wait in the table until the dead letter is replayed or
//     discarded.
//   - Broker unreachable: nothing is counted and nothing recorded; the
//     relay core pauses with a growing pause, the messages go back to the
//     ledger, first in line, and are published again after it, in order;
//     the relay stops reading the stream at the in-flight bounds, and the
//     slot keeps its position.
//
// # Slot safety
//
// One relay streams from a slot at a time, the active one: it holds a
// session-level advisory lock keyed by the slot name on its replication
// connection, and the slot's lease in outbox_cdc_leases, a token and an
// expiry that it renews every third of Config.LeaderLease (5 s) on Pool,
// whether it streams, idles or waits for the broker. The others wait as
// standbys. A standby takes over when the active relay's replication
// connection ends (it stopped or died, or the connection was cut), or when
// the active relay's lease expired while its connection lives on: a hung
// process (stopped, or cut off from the database by a partition that leaves the TCP
// connection open). Then the standby takes the lease under a new token,
// terminates the backends that hold the slot's lock or the slot
// (pg_terminate_backend: the relays' role needs to be the hung relay's, or
// a member of pg_signal_backend), and streams from the slot's confirmed
// position. Standbys check at least five times per lease, so a hung relay
// is replaced within about LeaderLease and a second.
//
// Fencing: every write of the active relay carries its lease token. The
// deferrals of the check and every record (marks or deletes, failures,
// deferrals) change nothing unless the lease carries the token,
// and they hold the lease row (FOR SHARE) until they commit, so a takeover
// waits for a record under way and no record of the old relay commits after
// it. Status updates, which move the slot's confirmed position, go out only
// while the relay's own clock says its lease holds (until a tenth before it
// ends); after a takeover the old relay's walsender is gone anyway. A relay
// that resumes after it lost the lead logs "lost the lead of the slot",
// records and confirms nothing more, ends its stream and stands by.
//
// Nothing is lost, and order per aggregate holds, across a takeover. The
// confirmed position moves only over messages whose record committed under
// the lease (or that the check skipped), and the new active relay streams from that position once the
// old relay's walsender has ended: every message after it comes through
// the new stream, and every message before it was recorded by the old
// relay, SENT after its ack or handed to the table path, which publishes in
// order. A refused record leaves its rows as they were, for the new relay
// to check and publish itself. The old relay's publishes that were in
// flight when it hung may reach the broker after it resumes: duplicates,
// which at-least-once delivery allows, but never a message ahead of an
// earlier one of its aggregate. A relay publishes a message only after the
// previous message of its aggregate was acknowledged (or found SENT), so
// whichever relay delivers a message first, the earlier messages of its
// aggregate were delivered before it.
//
// Status updates go out every StatusInterval; an idle stream writes a
// heartbeat into the WAL every HeartbeatInterval so the slot's position
// follows the server's. [Relay.Lag] reports the slot's lag in bytes and
// age. A slot that was recorded in outbox_cdc_slots but is gone or
// invalidated stops the relay with [ErrSlotLost] instead of being silently
// recreated.
package cdc
