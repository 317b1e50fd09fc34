package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// BenchmarkClaim measures one claim of 100 (released again, so the backlog
// stays) on backlogs spread over a varying number of aggregates: 10,000
// aggregates give every row a head; 10 give 10 heads with the rest of the
// backlog waiting behind them. A claim's cost should not grow with the
// backlog behind the heads.
//
//	go test ./store/sqlitestore -run '^$' -bench Claim -benchtime 50x
func BenchmarkClaim(b *testing.B) {
	for _, c := range []struct{ backlog, aggs int }{{20000, 10000}, {20000, 10}, {20000, 1}, {200000, 10}} {
		backlog, aggs := c.backlog, c.aggs
		b.Run(fmt.Sprintf("backlog=%d/aggregates=%d", backlog, aggs), func(b *testing.B) {
			ctx := context.Background()
			db, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "app.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			s, err := sqlitestore.New(db, sqlitestore.Config{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			for start := 0; start < backlog; start += 1000 {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				msgs := make([]outbox.Message, 0, 1000)
				for i := start; i < start+1000; i++ {
					msgs = append(msgs, outbox.Message{Topic: "bench", AggregateType: "order",
						AggregateID: fmt.Sprint(i % aggs), EventType: "OrderPlaced", Payload: []byte(`{}`)})
				}
				if err := s.Enqueue(ctx, tx, msgs...); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
				b.Fatal(err)
			}
			want := min(100, aggs)
			b.ResetTimer()
			for range b.N {
				c, err := s.Claim(ctx, store.ClaimParams{Owner: "bench", Limit: 100, Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if len(c.Records) != want {
					b.Fatalf("claimed %d, want %d", len(c.Records), want)
				}
				seqs := make([]int64, len(c.Records))
				for i, r := range c.Records {
					seqs[i] = r.Seq
				}
				if _, err := s.Release(ctx, c.Token, seqs); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
