// Package demo runs the whole reference order system in one process, with
// nothing installed: 'outbox-lab demo'. [Run] starts
//
//   - three SQLite databases in a data directory, one per service, as each
//     service owns its data: orders.db (the orders and the order service's
//     outbox), billing.db (invoices and billing's inbox) and inventory.db
//     (stock, reservations, the inventory's inbox and its own outbox, for
//     StockReserved / StockRejected / StockReleased);
//   - the embedded Kafka-protocol broker (package broker), keeping its data
//     in the data directory too, so that it can be stopped and started again;
//   - the order service's HTTP API on 127.0.0.1 (the port is printed);
//   - two relays, one per outbox (orders.db and inventory.db);
//   - the billing and inventory consumers (package consumer, with the SQLite
//     inbox);
//   - a load generator that places orders at a steady rate over HTTP, pays,
//     ships and cancels some, and sends some invalid ones that must be
//     rejected;
//   - an independent reader of the orders topic, which the checks use.
//
// It shows one updating progress line, and at the end (Config.Duration or a
// cancelled context) it stops the load, waits for the backlog to drain
// (bounded by Config.DrainTimeout), checks the invariants and returns a
// [Summary]: every accepted order is in the order database with all its
// events on the topic, exactly one invoice in the state its events imply and
// exactly one reservation; nothing is left unsent; no dead letters; no
// parked messages; every duplicate delivery was absorbed (no second
// invoice or reservation). Run returns an error wrapping [ErrInvariant] if
// one fails.
//
// With Config.Chaos it kills a relay at random moments the hard way (its
// claimed messages stay leased, as after a crash, and come back when the
// short demo lease expires; half the time right after the broker
// acknowledged a batch and before it was marked sent, which makes
// duplicates), starts a new one, and stops the embedded broker for a few
// seconds and starts it again on the same data. The invariants must hold
// all the same.
//
// Config.DatabaseURL and Config.KafkaBrokers run the same system on
// PostgreSQL (pgstore and the pgx inbox, in schemas of their own) and a
// real Kafka cluster instead.
package demo
