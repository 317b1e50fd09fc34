package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The hot paths of the relay and of the application, one round trip each,
// for profiling and for comparing changes to the SQL:
//
//	go test ./internal/bench -run '^$' -bench . -benchtime 2000x

// benchStore returns a migrated store in a schema of the benchmark's own.
func benchStore(b *testing.B) (*pgstore.Store, func(n int)) {
	return benchStoreWith(b, pgstore.Config{})
}

// benchStoreWith is benchStore with a store configuration (Schema is set).
func benchStoreWith(b *testing.B, cfg pgstore.Config) (*pgstore.Store, func(n int)) {
	b.Helper()
	pool, schema := pgtest.Schema(b)
	cfg.Schema = schema
	st, err := pgstore.New(pool, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	r := &runner{cfg: Config{PayloadBytes: DefaultPayloadBytes, Topic: DefaultTopic}}
	load := func(n int) {
		ctx := context.Background()
		msgs := make([]outbox.Message, 0, enqueueChunk)
		for i := 0; i < n; {
			msgs = msgs[:0]
			for ; i < n && len(msgs) < enqueueChunk; i++ {
				msgs = append(msgs, r.message(uuid.Nil, fmt.Sprintf("order-%d", i)))
			}
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
				b.Fatal(err)
			}
		}
	}
	return st, load
}

// BenchmarkClaimMark is one round of the relay's loop without the broker:
// claim a batch of relay.DefaultBatchSize due messages, then mark them
// SENT. Reported per round and as messages per second.
func BenchmarkClaimMark(b *testing.B) {
	st, load := benchStore(b)
	load(b.N * relay.DefaultBatchSize)
	ctx := context.Background()
	p := store.ClaimParams{Owner: "bench", Limit: relay.DefaultBatchSize, Lease: time.Minute}
	seqs := make([]int64, 0, relay.DefaultBatchSize)
	b.ResetTimer()
	for range b.N {
		c, err := st.Claim(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Records) == 0 {
			b.Fatal("nothing to claim")
		}
		seqs = seqs[:0]
		for _, rec := range c.Records {
			seqs = append(seqs, rec.Seq)
		}
		if _, err := st.MarkSent(ctx, c.Token, seqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*relay.DefaultBatchSize)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkMarkClaim is the relay's loop with a store.MarkClaimer: the
// mark of batch N and the claim of batch N+1 in one round trip, as the
// relay runs it. The sub-benchmarks compare the store settings that matter
// for it: the relay's commits with and without waiting for the WAL flush,
// and claims from the claim floor or always from the start.
//
//	go test ./internal/bench -run '^$' -bench MarkClaim -benchtime 2000x
func BenchmarkMarkClaim(b *testing.B) {
	for _, v := range []struct {
		name string
		cfg  pgstore.Config
	}{
		{"default", pgstore.Config{}},
		{"synchronous", pgstore.Config{SynchronousRelayCommits: true}},
		{"no-floor", pgstore.Config{FullClaimInterval: -1}},
	} {
		b.Run(v.name, func(b *testing.B) {
			st, load := benchStoreWith(b, v.cfg)
			load(b.N*relay.DefaultBatchSize + relay.DefaultBatchSize)
			ctx := context.Background()
			p := store.ClaimParams{Owner: "bench", Limit: relay.DefaultBatchSize, Lease: time.Minute}
			c, err := st.Claim(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			seqs := make([]int64, 0, relay.DefaultBatchSize)
			b.ResetTimer()
			for range b.N {
				seqs = seqs[:0]
				for _, rec := range c.Records {
					seqs = append(seqs, rec.Seq)
				}
				if _, c, err = st.MarkSentAndClaim(ctx, c.Token, seqs, p); err != nil {
					b.Fatal(err)
				}
				if len(c.Records) == 0 {
					b.Fatal("nothing to claim")
				}
			}
			b.ReportMetric(float64(b.N*relay.DefaultBatchSize)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkRelayCycle is the relay's work for messages that were just
// committed, as in the steady phase (writers at full speed, a relay that
// keeps up): enqueue a few messages (not timed), claim them, mark them SENT.
// Besides the time it reports what each message costs PostgreSQL beyond the
// enqueue: WAL bytes (all WAL written during the claim and the mark, so run
// it on an otherwise idle server) and the share of the relay's row updates
// that PostgreSQL made in place (HOT, no index entries).
//
//	go test ./internal/bench -run '^$' -bench RelayCycle -benchtime 2000x
func BenchmarkRelayCycle(b *testing.B) {
	for _, n := range []int{4, 16} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) { benchRelayCycle(b, n) })
	}
}

// benchRelayCycle is BenchmarkRelayCycle with perCycle messages per claim.
func benchRelayCycle(b *testing.B, perCycle int) {
	st, load := benchStore(b)
	pool := pgtest.Pool(b, st.Schema())
	ctx := context.Background()
	p := store.ClaimParams{Owner: "bench", Limit: relay.DefaultBatchSize, Lease: time.Minute}
	seqs := make([]int64, 0, perCycle)
	var wal, updates, hot float64
	lsn := func() (l float64) {
		if err := pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").Scan(&l); err != nil {
			b.Fatal(err)
		}
		return l
	}
	for range b.N {
		b.StopTimer()
		load(perCycle)
		before := lsn()
		b.StartTimer()
		c, err := st.Claim(ctx, p)
		if err != nil || len(c.Records) != perCycle {
			b.Fatalf("claim: %d records, %v; want %d", len(c.Records), err, perCycle)
		}
		seqs = seqs[:0]
		for _, rec := range c.Records {
			seqs = append(seqs, rec.Seq)
		}
		if _, err := st.MarkSent(ctx, c.Token, seqs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		wal += lsn() - before
		b.StartTimer()
	}
	b.StopTimer()
	// The statistics of other backends arrive within a second or so.
	deadline := time.Now().Add(15 * time.Second)
	for updates < float64(2*b.N*perCycle) && time.Now().Before(deadline) {
		if err := pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE relid = $1::regclass`, st.Schema()+".outbox_messages").Scan(&updates, &hot); err != nil {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	msgs := float64(b.N * perCycle)
	b.ReportMetric(wal/msgs, "WAL-B/msg")
	b.ReportMetric(hot/updates*100, "%HOT")
	b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkEnqueue is the application's side: one transaction that
// enqueues 1 or 100 messages and commits. app-CPU-µs/msg is the CPU time of
// this process (the application's: validation, encoding, pgx, its garbage
// collection) per message, not the database's.
func BenchmarkEnqueue(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			st, _ := benchStore(b)
			pool := pgtest.Pool(b, st.Schema())
			r := &runner{cfg: Config{PayloadBytes: DefaultPayloadBytes, Topic: DefaultTopic}}
			msgs := make([]outbox.Message, n)
			for i := range msgs {
				msgs[i] = r.message(uuid.Nil, fmt.Sprintf("order-%d", i))
			}
			ctx := context.Background()
			cpu0, cpuOK := processCPU()
			for b.Loop() {
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
			if cpu1, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N*n), "app-CPU-µs/msg")
			}
		})
	}
}

// processCPU is the CPU time this process has used (user and system), from
// /proc/self/stat, and false where that cannot be read (not Linux).
func processCPU() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14 and stime 15 (proc(5)).
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, false
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHz, true
}
