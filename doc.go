// Package outbox implements the transactional outbox pattern: an
// application writes the events it wants to publish into an outbox table
// inside the same database transaction as its business change, and a relay
// publishes them to Kafka afterwards. This package holds what every part
// shares: [Message], its validation ([Prepare], [Validate]) and the states a
// stored message goes through.
//
// # The dual-write problem
//
// A service that updates its database and then publishes an event does two
// writes to two systems, and no transaction spans both. If it crashes, or
// the broker is down, between the two, the order is placed but nobody hears
// of it; publish first and a failed commit announces an order that does not
// exist.
//
// The outbox turns the second write into a row in the first: the event is
// committed or rolled back together with the change it describes. Getting
// it from the table to the broker is then a retryable job that cannot lose
// a committed event.
//
// # Enqueue in your transaction
//
// With PostgreSQL, create a store with
// [github.com/outbox-dev/outbox/store/pgstore.New], run its migrations once
// (or "outbox migrate"), and enqueue in the transaction that makes the
// change. With pgx:
//
//	tx, err := pool.Begin(ctx)
//	...
//	defer tx.Rollback(ctx) // a no-op after Commit
//	_, err = tx.Exec(ctx, "UPDATE orders SET state = 'placed' WHERE id = $1", orderID)
//	...
//	err = st.Enqueue(ctx, tx, outbox.Message{
//		AggregateType: "Order",
//		AggregateID:   orderID,
//		EventType:     "OrderPlaced",
//		Payload:       payload,
//	})
//	...
//	err = tx.Commit(ctx)
//
// With database/sql (opened with the pgx driver) the call is
// st.SQL().Enqueue(ctx, sqlTx, msgs...). The events become visible to the
// relay only if the transaction commits. Both calls first run [Prepare]: an
// invalid message is a *[ValidationError] wrapping [ErrInvalidMessage], and
// nothing is written.
//
// Every store is an [Enqueuer] of its driver's transaction type: code that
// takes an Enqueuer[*sql.Tx] enqueues on PostgreSQL (st.SQL()) and SQLite
// (a *sqlitestore.Store) alike.
//
// # The relay
//
// Package [github.com/outbox-dev/outbox/relay] claims due messages in small
// batches (FOR UPDATE SKIP LOCKED plus a lease, so several relays can run at
// once), publishes them and marks them SENT only after the broker
// acknowledged them. Run it in your own process with relay.New and
// Relay.Start/Stop, or as a separate service with the "outbox relay"
// command.
//
// # At-least-once delivery
//
// A relay that dies after the broker's ack but before marking the message
// SENT leaves it leased; once the lease expires the message is published
// again. Every message is therefore delivered at least once, occasionally
// twice. Consumers must be idempotent: each record carries the message's
// [Message.ID] in the eventId header, and a consumer that records the ids it
// has handled, in the same transaction as the handling, can drop
// duplicates.
//
// # Ordering per aggregate
//
// [Message.AggregateID] is the Kafka record key, and messages of one
// aggregate (AggregateType and AggregateID) are published in enqueue order:
// the relay publishes an aggregate's message only when every earlier
// committed one of that aggregate has been sent. A retrying or dead-lettered
// message holds up its own aggregate and no other.
//
// Enqueue order is fixed when the row is inserted, not when its transaction
// commits. A message whose transaction commits late is never skipped: it
// goes out as soon as it is visible, even if a later-enqueued message of
// the same aggregate, committed earlier, has gone out already. Applications
// that lock the aggregate's row (SELECT ... FOR UPDATE on the order) before
// enqueueing serialize their transactions on it, so that enqueue order equals
// commit order, and publish order follows.
//
// # Failure states
//
// A stored message has one [Status]:
//
//   - PENDING: enqueued, waiting for its first publish.
//   - IN_FLIGHT: claimed by a relay under a lease (package pgstore stores it
//     as PENDING or FAILED with a lease token). The broker's ack moves it
//     to SENT; a failed publish to FAILED or DEAD_LETTER; a relay shutting
//     down gives it back (PENDING, or FAILED if it had failed before); a
//     lease that expires lets another relay claim it again.
//   - SENT: acknowledged by the broker. Final.
//   - FAILED: a publish failed; it is claimed again (back to IN_FLIGHT)
//     after an exponential backoff.
//   - DEAD_LETTER: it failed relay.Config.MaxAttempts times, or the broker
//     refused it for good (too large, invalid). It and
//     every later message of its aggregate wait until an operator replays
//     it (back to PENDING) or discards it.
//
// Only failures that are the message's fault count towards MaxAttempts. An
// unreachable broker is not: its messages go to FAILED without a counted
// attempt, and the relay pauses as a whole until the broker is back.
package outbox
