package ops_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// Read the outbox's state, as a status page or a metrics collector would.
func ExampleOps_Stats() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	o, err := ops.New(pool, ops.Config{Schema: "outbox"})
	if err != nil {
		log.Fatal(err)
	}
	s, err := o.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("pending %d, dead letters %d, %s behind, %d aggregates blocked\n",
		s.Counts["PENDING"], s.Counts["DEAD_LETTER"], s.OldestUnsentAge, s.BlockedAggregates)
}

// Check the cursor of an outbox in cursor mode: who leads it and how far it
// is behind.
func ExampleOps_Cursor() {
	ctx := context.Background()
	var o *ops.Ops // from ops.New
	c, err := o.Cursor(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if c.Mode != ops.ModeCursor {
		fmt.Println("claim mode")
		return
	}
	if !c.Leading {
		fmt.Println("no relay leads the cursor: start one")
	}
	fmt.Printf("position %d, saved %s ago; %d message(s) waiting, the oldest %s old\n",
		c.Position, c.At.Sub(c.SavedAt), c.LagMessages, c.LagAge)
}

// Replay the dead letters of one event type after fixing their cause, and
// discard one that can never be published.
func ExampleOps_Replay() {
	ctx := context.Background()
	var o *ops.Ops // from ops.New
	res, err := o.Replay(ctx, ops.Request{
		Actor:  "alice@ops-box",
		Reason: "topic invoices created",
		Filter: &ops.Filter{EventType: "InvoiceIssued"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replayed", len(res.IDs), "messages; audit entry", res.AuditID)

	poison := uuid.MustParse("0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f60")
	if _, err := o.Discard(ctx, ops.Request{Reason: "payload references a deleted order", IDs: []uuid.UUID{poison}}); err != nil {
		log.Fatal(err)
	}
}

// Find the cause of an incident, fix it, and replay the whole group of
// dead letters it left, in batches and at a bounded rate.
func ExampleOps_DeadLetterGroups() {
	ctx := context.Background()
	var o *ops.Ops // from ops.New
	groups, err := o.DeadLetterGroups(ctx, ops.Filter{Since: time.Now().Add(-24 * time.Hour)})
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range groups {
		fmt.Printf("%s %6d %-30s %-10s %s\n", g.Key, g.Count, g.ErrorClass, g.Topic, g.EventType)
	}
	// The largest group is MESSAGE_TOO_LARGE on orders: once the topic's
	// max.message.bytes is raised, replay it.
	res, err := o.Replay(ctx, ops.Request{
		Reason:    "max.message.bytes of orders raised to 4 MB",
		Filter:    &ops.Filter{Group: groups[0].Key},
		BatchSize: 500,
		Rate:      2000,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replayed", len(res.IDs), "messages in", len(res.AuditIDs), "transactions")
}

// Re-publish a week of Order events so that a new consumer can build its
// state; run it again with the same name to continue after a crash.
func ExampleOps_Republish() {
	ctx := context.Background()
	var o *ops.Ops // from ops.New
	snk, err := kafka.New(kafka.Config{Brokers: []string{"kafka-1:9092"}, TopicByAggregateType: map[string]string{"Order": "orders"}})
	if err != nil {
		log.Fatal(err)
	}
	defer snk.Close()
	p, err := o.Republish(ctx, ops.RepublishConfig{
		Name:          "rebuild-billing",
		Since:         time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		AggregateType: "Order",
		Rate:          1000,
	}, snk)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("republished", p.Published, "events")
}

// Keep SENT messages for a week, deleting older ones every hour.
func ExampleOps_CleanupEvery() {
	ctx := context.Background()
	var o *ops.Ops // from ops.New
	err := o.CleanupEvery(ctx, ops.CleanupConfig{OlderThan: 7 * 24 * time.Hour}, time.Hour)
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
