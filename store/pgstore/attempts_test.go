package pgstore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store"
)

type attemptRow struct {
	Seq       int64
	MessageID uuid.UUID
	Attempt   int32
	Error     string
	Dead      bool
}

func (b *bundle) attempts(t *testing.T) []attemptRow {
	t.Helper()
	rows, err := b.Pool.Query(pgstoretest.Context(t), b.SQL(
		"SELECT seq, message_id, attempt, error, dead FROM {{schema}}.outbox_attempts ORDER BY seq, id"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attemptRow])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMarkFailed_RecordsEachCountedAttemptInHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	ms := []outbox.Message{pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"), pgstoretest.Msg("Order", "3")}
	s := b.Enqueue(t, ms...)

	c := b.claim(t, 10, time.Minute)
	n, err := b.Store.MarkFailed(ctx, c.Token, []store.Failure{
		{Seq: s[0], Error: "first", CountAttempt: true},
		{Seq: s[1], Error: "broker unreachable", CountAttempt: false}, // not an attempt: not recorded
		{Seq: s[2], Error: "too large", CountAttempt: true, Dead: true},
	})
	if err != nil || n != 3 {
		t.Fatalf("MarkFailed = %d, %v; want 3", n, err)
	}
	// The second failure of s[0] is attempt 2.
	c = b.claim(t, 10, time.Minute)
	if !slices.Contains(pgstoretest.Seqs(c.Records), s[0]) {
		t.Fatalf("second claim %v does not contain %d", pgstoretest.Seqs(c.Records), s[0])
	}
	if n, err := b.Store.MarkFailed(ctx, c.Token, []store.Failure{{Seq: s[0], Error: "second", CountAttempt: true, Dead: true}}); err != nil || n != 1 {
		t.Fatalf("second MarkFailed = %d, %v; want 1", n, err)
	}

	want := []attemptRow{
		{s[0], ms[0].ID, 1, "first", false},
		{s[0], ms[0].ID, 2, "second", true},
		{s[2], ms[2].ID, 1, "too large", true},
	}
	if got := b.attempts(t); !slices.Equal(got, want) {
		t.Errorf("attempt history = %+v, want %+v", got, want)
	}
}

func TestMarkFailed_FencedFailureRecordsNoAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "1"))
	stale := b.claim(t, 10, time.Minute)
	b.expireLeases(t)
	b.claim(t, 10, time.Minute) // takes the lease over

	n, err := b.Store.MarkFailed(ctx, stale.Token, []store.Failure{{Seq: s[0], Error: "late", CountAttempt: true}})
	if err != nil || n != 0 {
		t.Fatalf("MarkFailed with a stale token = %d, %v; want 0", n, err)
	}
	if got := b.attempts(t); len(got) != 0 {
		t.Errorf("a fenced MarkFailed recorded attempts %+v", got)
	}
}

func TestDiscarded_DoesNotBlockItsAggregate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "1"))
	b.Exec(t, "UPDATE {{schema}}.outbox_messages SET status = 'DISCARDED', discarded_at = now() WHERE seq = $1", s[0])
	assertSeqs(t, "claim behind a discarded message", b.claim(t, 10, time.Minute).Records, s[1])
}
