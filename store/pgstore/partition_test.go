package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// rangeNames returns the names of the range partitions (not the default).
func rangeNames(ps []pgstore.Partition) []string {
	var out []string
	for _, p := range ps {
		if !p.Default {
			out = append(out, p.Name)
		}
	}
	return out
}

func TestPartitioned_MigrateCreatesDefaultCurrentAndAhead(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, 24*time.Hour)
	ctx := pgstoretest.Context(t)
	ps, err := b.Store.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1+1+pgstore.DefaultPartitionsAhead || !ps[0].Default || ps[0].Name != "outbox_messages_default" {
		t.Fatalf("partitions = %+v, want the default, today and %d ahead", ps, pgstore.DefaultPartitionsAhead)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for i, p := range ps[1:] {
		from := today.Add(time.Duration(i) * 24 * time.Hour)
		if !p.From.Equal(from) || !p.To.Equal(from.Add(24*time.Hour)) || p.Name != "outbox_messages_p"+from.Format("20060102") {
			t.Errorf("partition %d = %+v, want [%s, +1d) named by its date", i, p, from)
		}
	}
	if d, err := b.Store.PartitionInterval(ctx); err != nil || d != 24*time.Hour {
		t.Fatalf("PartitionInterval = %s, %v; want 24h", d, err)
	}

	// Idempotent, and the interval cannot change.
	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	other, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema, Partitioning: pgstore.Partitioning{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Migrate(ctx); !errors.Is(err, pgstore.ErrPartitioning) {
		t.Fatalf("Migrate with another interval = %v, want ErrPartitioning", err)
	}
	// A store without Partitioning keeps using (and migrating) it.
	plain, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Migrate(ctx); err != nil {
		t.Fatalf("Migrate without Partitioning: %v", err)
	}
	if created, err := b.Store.EnsurePartitions(ctx, 0); err != nil || len(created) != 0 {
		t.Fatalf("EnsurePartitions on a complete set = %v, %v; want nothing created", created, err)
	}
	created, err := b.Store.EnsurePartitions(ctx, 5)
	if err != nil || len(created) != 2 {
		t.Fatalf("EnsurePartitions(5) = %v, %v; want the two new days", created, err)
	}
}

func TestPartitioned_PlainTableIsNotPartitioned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	if _, err := b.Store.Partitions(ctx); !errors.Is(err, pgstore.ErrNotPartitioned) {
		t.Fatalf("Partitions = %v, want ErrNotPartitioned", err)
	}
	if _, err := b.Store.EnsurePartitions(ctx, 0); !errors.Is(err, pgstore.ErrNotPartitioned) {
		t.Fatalf("EnsurePartitions = %v, want ErrNotPartitioned", err)
	}
	if d, err := b.Store.PartitionInterval(ctx); err != nil || d != 0 {
		t.Fatalf("PartitionInterval = %s, %v; want 0", d, err)
	}
}

func TestPartitioned_ConfigIsValidated(t *testing.T) {
	t.Parallel()
	for _, p := range []pgstore.Partitioning{{Interval: 90 * time.Minute}, {Interval: -time.Hour}, {Interval: time.Hour, Ahead: -1}} {
		_, err := pgstore.New(pgtest.Pool(t, "public"), pgstore.Config{Partitioning: p})
		if !errors.Is(err, pgstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "Partitioning.") {
			t.Errorf("New with %+v = %v, want ErrInvalidConfig naming the field", p, err)
		}
	}
}

// Event ids are unique within a partition: enqueueing an id again in the
// same interval fails, as on a plain table.
func TestPartitioned_DuplicateIDInAPartitionIsRejected(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, 24*time.Hour)
	m := pgstoretest.Msg("Order", "1")
	b.Enqueue(t, m)
	ctx := pgstoretest.Context(t)
	err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error { return b.Store.Enqueue(ctx, tx, m) })
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("second enqueue of %s = %v, want a unique violation", m.ID, err)
	}
}

// The NOTIFY trigger (migrations 002 and 008) is on the partitioned table.
func TestPartitioned_EnqueueNotifiesAnIdleRelay(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, time.Hour)
	ch, _ := listen(t, b.Store)
	b.Enqueue(t, pgstoretest.Msg("Order", "1"))
	expectWake(t, ch, "enqueue into the partitioned table with a relay idle")
}

// A plain table with rows in every state keeps them when it is
// partitioned: it becomes the legacy partition, ids, seqs, states and
// leases unchanged, seq continues after it, and the relay's calls work
// across the old partition and the new.
func TestPartitioned_ConvertsATableWithRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	var old []outbox.Message
	for i := range 6 {
		old = append(old, pgstoretest.Msg("Order", []string{"a", "b", "c"}[i%3]))
	}
	oldSeqs := b.Enqueue(t, old...)
	c, err := b.Store.Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute})
	if err != nil || len(c.Records) != 3 {
		t.Fatalf("Claim = %d records, %v; want the 3 heads", len(c.Records), err)
	}
	if n, err := b.Store.MarkSent(ctx, c.Token, []int64{c.Records[0].Seq}); err != nil || n != 1 {
		t.Fatalf("MarkSent = %d, %v", n, err)
	}
	// Records 1 and 2 stay IN_FLIGHT under c's lease across the change.

	p, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema, Partitioning: pgstore.Partitioning{Interval: time.Hour, Ahead: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Migrate(ctx); err != nil {
		t.Fatalf("Migrate with Partitioning: %v", err)
	}
	ps, err := p.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := rangeNames(ps)
	if len(names) == 0 || names[0] != "outbox_messages_legacy" || !ps[1].From.IsZero() {
		t.Fatalf("partitions = %+v, want outbox_messages_legacy from MINVALUE first", ps)
	}
	// Every index of the parent (the primary key and migrations 001, 003,
	// 007 and 014's partial indexes) has its partition on the legacy table.
	var parentIdx, attached int
	if err := b.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_index WHERE indrelid = 'outbox_messages'::regclass),
		(SELECT count(*) FROM pg_index x JOIN pg_inherits i ON i.inhrelid = x.indexrelid
		 WHERE x.indrelid = 'outbox_messages_legacy'::regclass)`).Scan(&parentIdx, &attached); err != nil {
		t.Fatal(err)
	}
	if parentIdx != 6 || attached != parentIdx {
		t.Fatalf("parent has %d indexes, legacy partition %d of them; want 6 and 6", parentIdx, attached)
	}
	for _, m := range old {
		r, err := p.Get(ctx, m.ID)
		if err != nil || r.ID != m.ID {
			t.Fatalf("Get(%s) after partitioning = %+v, %v", m.ID, r, err)
		}
	}
	// The fenced marks of the claim made before the change still apply.
	if n, err := p.MarkSent(ctx, c.Token, []int64{c.Records[1].Seq, c.Records[2].Seq}); err != nil || n != 2 {
		t.Fatalf("MarkSent of the pre-change claim = %d, %v; want 2", n, err)
	}
	fresh := pgstoretest.Msg("Order", "a")
	b.Enqueue(t, fresh)
	r, err := p.Get(ctx, fresh.ID)
	if err != nil {
		t.Fatal(err)
	}
	if maxOld := oldSeqs[len(oldSeqs)-1]; r.Seq <= maxOld {
		t.Fatalf("new seq %d does not follow the legacy rows' %d", r.Seq, maxOld)
	}
	// Aggregate a: old[3] is its head now; the new message waits behind
	// it, across partitions.
	c2, err := p.Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, rec := range c2.Records {
		got[rec.ID.String()] = true
	}
	if len(c2.Records) != 3 || !got[old[3].ID.String()] || got[fresh.ID.String()] {
		t.Fatalf("claim after partitioning = %v, want old[3..5] and not the newer message of aggregate a", pgstoretest.Seqs(c2.Records))
	}
}

// Rows that land in the default partition (no partition covered their
// time) are moved into a partition made for them by the next
// EnsurePartitions, unchanged.
func TestPartitioned_RowsInTheDefaultPartitionAreMovedOut(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, time.Hour)
	ctx := pgstoretest.Context(t)
	m := pgstoretest.Msg("Order", "1")
	b.Enqueue(t, m)
	before, err := b.Store.Get(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Three days old: no partition covers it, so it moves to the default.
	if _, err := b.Pool.Exec(ctx, "UPDATE outbox_messages SET created_at = created_at - interval '3 days' WHERE id = $1", m.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM outbox_messages_default").Scan(&n); err != nil || n != 1 {
		t.Fatalf("default partition holds %d rows, %v; want 1", n, err)
	}
	created, err := b.Store.EnsurePartitions(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "outbox_messages_p" + before.CreatedAt.Add(-72*time.Hour).UTC().Format("2006010215")
	if len(created) != 1 || created[0] != want {
		t.Fatalf("EnsurePartitions created %v, want [%s]", created, want)
	}
	if err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM outbox_messages_default").Scan(&n); err != nil || n != 0 {
		t.Fatalf("default partition holds %d rows after EnsurePartitions, %v; want 0", n, err)
	}
	if err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM "+want+" WHERE id = $1", m.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%s holds %d rows with the id, %v; want 1", want, n, err)
	}
	after, err := b.Store.Get(ctx, m.ID)
	if err != nil || after.Seq != before.Seq || after.Status != outbox.StatusPending {
		t.Fatalf("after the move: %+v, %v; want seq %d PENDING", after, err, before.Seq)
	}
}
