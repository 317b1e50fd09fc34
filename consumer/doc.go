// Package consumer runs a Kafka consumer group whose records are applied
// through an [inbox.Inbox]: each message once, in the consumer's own
// database transaction, in partition order.
//
// A billing service that writes one invoice per event, however often Kafka
// delivers it:
//
//	ib, err := inbox.New(pool, inbox.Config{})
//	...
//	err = ib.Migrate(ctx)
//	...
//	r, err := consumer.New(consumer.Config{
//		Brokers: []string{"localhost:9092"},
//		Group:   "billing",
//		Topics:  []string{"orders"},
//		Inbox:   ib,
//		Handler: func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
//			_, err := tx.Exec(ctx, "INSERT INTO invoices (order_id) VALUES ($1)", m.AggregateID)
//			return err
//		},
//	})
//	...
//	err = r.Run(ctx) // until ctx ends; nil after a clean stop
//
// # At least once, applied once
//
// Kafka delivers at least once: an offset is committed after a record was
// processed, so a consumer that dies in between gets the record again (or
// its successor on the partition does). The relay can also publish an event
// twice. The runner therefore never relies on delivering a record once; it
// relies on the inbox to apply it once:
//
//   - Each record is handed to [inbox.Inbox.Handle], which runs the handler
//     and records the message id in one transaction. A redelivered message
//     is reported as [inbox.Duplicate] and changes nothing.
//   - A record's offset is committed only after its transaction committed
//     (or the record was parked). A crash between the two redelivers the
//     record, and the inbox absorbs it.
//
// # PostgreSQL or SQLite
//
// Config.Inbox and Config.Handler give the runner a PostgreSQL inbox and
// its handler. Config.Applier takes any [Applier] instead, such as
// [inbox.SQLiteInbox.Bind] of a handler for a consumer whose database is a
// SQLite file; Inbox and Handler are the same as Applier: Inbox.Bind(Handler).
//
// # Order, retries and parking
//
// Each assigned partition has its own goroutine, which handles the
// partition's records strictly in offset order; partitions proceed in
// parallel. The outbox relay keys records by aggregate id, so the events of
// one aggregate are applied in the order they were published.
//
// A failed attempt is retried after min(RetryMax, RetryBase*2^(n-1)) minus
// up to half of it as jitter (200ms and 10s by default); the partition waits
// meanwhile, since a later event of the same aggregate must not overtake it.
// After MaxAttempts (5) failed attempts the message is parked
// ([inbox.Inbox.Park]: payload, headers, position, error, attempts) and the
// partition moves on. A record that breaks the record contract
// ([inbox.ErrMalformed]) and a handler error wrapping [inbox.ErrPermanent]
// are parked at once. Attempts that fail while the database does not answer
// at all are not counted: an outage parks nothing. List parked messages
// with [inbox.Inbox.Parked] and apply them, after a fix, with
// [inbox.Inbox.Replay].
//
// # Rebalances and shutdown
//
// The runner uses franz-go with autocommit off and rebalances blocked
// between a poll and the hand-off of its records. When partitions are
// revoked (another member joined, or this one stops), each of their
// goroutines finishes the record it is handling, abandons a retry it is
// waiting for, and commits the offset after the last record it finished;
// the next owner starts there. Records it had not started are not committed
// and are delivered to the next owner. When partitions are lost (the
// member's session expired), nothing is committed, since another member may
// own them already; anything applied but not committed comes back as a
// duplicate. So neither rebalances nor shutdown lose a record, and the
// inbox keeps any from being applied twice.
//
// [Runner.Run] returns nil after such a clean stop when its context ends.
// A handler attempt in progress at that moment is allowed to finish (up to
// Config.HandlerTimeout), so keep handlers short.
//
// A member that crashed holds its partitions until its session times out
// (Config.SessionTimeout). With Config.InstanceID the runner is a static
// member: restarted with the same id, it takes its partitions back at once,
// and it does not leave the group when it stops.
//
// # Observability
//
// Logs go to Config.Logger with the message id, aggregate id, topic,
// partition and offset. [Hooks] report each handled message (with its
// [inbox.Result] and latency), each retry and each parked message, for
// metrics.
package consumer
