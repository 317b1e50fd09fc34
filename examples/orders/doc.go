// Package orders is the reference order system, built on this toolkit:
// an order service that writes each order and its events in one
// transaction, the relay that publishes them, and two idempotent consumers,
// billing and inventory. Each part runs as a process of its own, from its
// main under examples/orders/cmd (on PostgreSQL, or on a SQLite file of
// its own with --sqlite):
//
//	outbox migrate                      # the outbox tables
//	outbox relay
//	go run ./examples/orders/cmd/orderservice --listen 127.0.0.1:8080
//	go run ./examples/orders/cmd/billing
//	go run ./examples/orders/cmd/inventory
//
// or from the outbox-lab command (cmd/outbox-lab, the outbox command with
// its lab), which runs the same on PostgreSQL:
//
//	outbox-lab example orders --listen 127.0.0.1:8080
//	outbox-lab example billing
//	outbox-lab example inventory
//
// Each part's package has a Run(ctx, RunConfig) that both call.
//
// The subpackages are the parts:
//
//   - [github.com/outbox-dev/outbox/examples/orders/money]: decimal amounts
//     without floats, and the accepted currencies.
//   - [github.com/outbox-dev/outbox/examples/orders/events]: the event
//     contracts (payloads per event and version), encoding for producers,
//     decoding with upcasting for consumers. docs/events.md documents them.
//   - [github.com/outbox-dev/outbox/examples/orders/orderservice]: the HTTP
//     order service and its order lifecycle.
//   - [github.com/outbox-dev/outbox/examples/orders/billing]: invoices and
//     credit notes (consumer group "billing").
//   - [github.com/outbox-dev/outbox/examples/orders/inventory]: stock
//     reservations (consumer group "inventory-service").
//
// The services run on PostgreSQL (New) or on SQLite (NewSQLite) with the
// same Go code, on database/sql: PostgreSQL through pgx's stdlib driver
// (stdlib.OpenDBFromPool(pool)), SQLite through sqlitestore.Open. Each
// enqueues its events with an outbox.Enqueuer[*sql.Tx] (the PostgreSQL
// store's SQL(), or a *sqlitestore.Store), and the consumers' handlers are
// inbox.SQLHandlerFunc, bound with inb.SQL().Bind(h) on PostgreSQL and
// sqliteInbox.Bind(h) on SQLite. What differs between the databases is in
// each service's SQL files: sql/ for PostgreSQL, sql/sqlite/ for SQLite.
// 'outbox-lab demo' runs them all in one
// process on SQLite files; the end-to-end test in internal/e2e runs them as
// separate processes on PostgreSQL.
package orders
