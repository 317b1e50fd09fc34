package cursor_test

import (
	"context"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The relay's core drives a strategy as this loop does, which drains the
// backlog: claim, publish, mark sent (claiming the next batch with the
// mark when the strategy can), and close once it stops.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://relay@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.Config{Schema: "outbox"})
	if err != nil {
		log.Fatal(err)
	}

	var s strategy.Strategy = cursor.New(st) // one Strategy per relay
	defer func() {
		// The leader saves its position and hands the lead over at once.
		if err := s.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	p := store.ClaimParams{Owner: "relay-1", Limit: 100, Lease: 30 * time.Second}
	next := &strategy.Next{Params: p, Linger: func() bool { return true }}
	c, err := s.Claim(ctx, p) // in claim mode: an error wrapping pgstore.ErrNotCursorMode
	for err == nil && len(c.Records) > 0 {
		seqs := make([]int64, len(c.Records))
		for i, rec := range c.Records {
			seqs[i] = rec.Seq // publish rec here
		}
		var claimed *store.Claim
		if _, claimed, err = s.MarkSent(ctx, c.Token, seqs, next); err == nil {
			if claimed != nil {
				c = *claimed
			} else {
				// The leader marked in memory, without a round trip.
				c, err = s.Claim(ctx, p)
			}
		}
	}
	if err != nil {
		log.Print(err)
	}
}
