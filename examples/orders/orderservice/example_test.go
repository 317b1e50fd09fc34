package orderservice_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-dev/outbox/examples/orders/orderservice"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	outbox, err := pgstore.New(pool, pgstore.Config{Schema: "outbox"}) // created by 'outbox migrate'
	if err != nil {
		log.Fatal(err)
	}
	// database/sql on the pool, through pgx's stdlib driver; the service
	// enqueues with outbox.SQL(), an outbox.Enqueuer[*sql.Tx].
	db := stdlib.OpenDBFromPool(pool)
	svc, err := orderservice.New(db, outbox.SQL(), orderservice.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := svc.Migrate(ctx); err != nil { // the orders tables, if missing
		log.Fatal(err)
	}
	// HTTPServer is svc.Handler() with every connection's timeouts set, so
	// that slow clients cannot hold connections open.
	srv := svc.HTTPServer()
	srv.Addr = "127.0.0.1:8080"
	log.Fatal(srv.ListenAndServe())
}

func ExampleService_Place() {
	var svc *orderservice.Service // from orderservice.New
	ctx := context.Background()

	// The order and its OrderPlaced event commit together. The same
	// idempotency key returns the first order again instead of a second one.
	order, replayed, err := svc.Place(ctx, orderservice.PlaceOrder{
		CustomerID: "C-42", Amount: "150.00", Currency: "EUR",
		Items: []orderservice.Item{{SKU: "BOOK-1", Quantity: 2}},
	}, "client-request-7d1c")
	if err != nil {
		log.Fatal(err) // a *orderservice.FieldError names the bad field
	}
	log.Println(order.ID, order.Status, replayed)
}
