// Package orderservice is the order service of the reference order system:
// an HTTP JSON API over PostgreSQL ([New]) or SQLite ([NewSQLite]) that
// writes every change of an order
// and its event to the outbox in one transaction, so that an event exists
// if and only if the change committed.
//
// An order is placed (OrderPlaced, version 1 of the order), then paid
// (OrderPaid), shipped (OrderShipped) or cancelled (OrderCancelled, from
// PLACED or PAID). Each event has aggregate Order and the order id as key,
// goes to one topic, and carries the order's version, 1, 2, 3, ..., in its
// payload; the order's row is locked while it changes, so its events
// enter the outbox in version order. An action the status does not allow
// is refused (HTTP 409) and writes nothing.
//
// Amounts are decimal strings ("150.00", at most two decimals) in the API
// and integers of minor units inside; floats never hold money. The
// payloads are the contracts of package events, not this package's types.
//
// A client that sends an Idempotency-Key with POST /orders may retry
// safely: the retry returns the first order, with status 201 and the same
// body, instead of placing a second one.
//
// The service runs on database/sql with the same Go code on both
// databases: PostgreSQL through pgx's stdlib driver, SQLite through
// sqlitestore.Open. It holds an outbox.Enqueuer[*sql.Tx] (the PostgreSQL
// store's SQL(), or a *sqlitestore.Store) and enqueues each event with
// Enqueue(ctx, tx, msg) in the transaction of its change. What differs
// between the databases is in the SQL files only: sql/ for PostgreSQL,
// sql/sqlite/ for SQLite.
//
//	db := stdlib.OpenDBFromPool(pool)
//	svc, err := orderservice.New(db, store.SQL(), orderservice.Config{})
//	...
//	err = svc.Migrate(ctx)            // the service's own tables, if missing
//	srv := svc.HTTPServer()           // svc.Handler() with every connection's timeouts set
//	srv.Addr = addr
//	err = srv.ListenAndServe()
package orderservice
