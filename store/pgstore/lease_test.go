package pgstore_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// tableUpdates returns the updates and in-place (HOT) updates PostgreSQL's
// statistics count for the outbox table, once they reached at least want
// updates. A backend reports its counts when it goes idle, at most once a
// second (else within 10 s), so it polls.
func tableUpdates(t *testing.T, b *bundle, want int64) (updates, hot int64) {
	t.Helper()
	ctx := pgstoretest.Context(t)
	deadline := time.Now().Add(25 * time.Second)
	for {
		err := b.Pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE relid = $1::regclass`, b.Schema+".outbox_messages").Scan(&updates, &hot)
		if err != nil {
			t.Fatal(err)
		}
		if updates >= want || time.Now().After(deadline) {
			return updates, hot
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The claim leases a row without changing its status, so PostgreSQL updates
// it in place: no index entry is written for a claim. Before, every claim
// wrote a new entry into all four indexes of the row (status is in the
// partial indexes' predicates), writers at full speed lost more to the
// relay (a median of 15.9% against 13.3% in the bench), and every claim
// left dead entries for the next to skip.
func TestClaim_UpdatesRowsInPlace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// One connection, so that pg_stat_force_next_flush below reaches the
	// backend that claimed.
	cfg := b.Pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(pgstoretest.Context(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := pgstore.New(pool, pgstore.Config{Schema: b.Schema})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	for i := range 20 {
		msgs = append(msgs, pgstoretest.Msg("Order", string(rune('a'+i))))
	}
	b.Enqueue(t, msgs...)

	c, err := st.Claim(pgstoretest.Context(t), store.ClaimParams{Owner: "relay", Limit: 100, Lease: time.Minute})
	if err != nil || len(c.Records) != len(msgs) {
		t.Fatalf("claim: %d records, %v; want %d", len(c.Records), err, len(msgs))
	}
	if _, err := pool.Exec(pgstoretest.Context(t), "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	updates, hot := tableUpdates(t, b, int64(len(msgs)))
	if updates != int64(len(msgs)) || hot != updates {
		t.Errorf("claim of %d messages: %d updates, %d of them in place (HOT); want all %d in place",
			len(msgs), updates, hot, len(msgs))
	}
	// Leased but stored PENDING: every reader still sees IN_FLIGHT.
	for _, r := range c.Records {
		if r.Status != outbox.StatusInFlight {
			t.Errorf("claimed record %d: %s, want IN_FLIGHT", r.Seq, r.Status)
		}
	}
	if got := b.Get(t, msgs[0].ID); got.Status != outbox.StatusInFlight || got.LeaseOwner != "relay" {
		t.Errorf("Get of a claimed message: %s owned by %q; want IN_FLIGHT owned by relay", got.Status, got.LeaseOwner)
	}
	counts, err := b.Store.Counts(pgstoretest.Context(t))
	if err != nil || counts[outbox.StatusInFlight] != int64(len(msgs)) || counts[outbox.StatusPending] != 0 {
		t.Errorf("Counts after the claim: %v, %v; want %d IN_FLIGHT, 0 PENDING", counts, err, len(msgs))
	}
}

// Rows that an earlier version stored as IN_FLIGHT (messages in flight
// during an upgrade) keep working: a live lease holds its row and fences
// the mark, an expired one lets another relay claim it.
func TestClaim_RowsStoredInFlightByEarlierVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "live"), pgstoretest.Msg("Order", "expired"), pgstoretest.Msg("Order", "live"))
	b.Exec(t, `UPDATE {{schema}}.outbox_messages
		SET status = 'IN_FLIGHT', lease_owner = 'old', lease_token = gen_random_uuid(),
		    lease_expires_at = now() + CASE WHEN aggregate_id = 'live' THEN interval '1 hour' ELSE interval '-1 second' END
		WHERE seq IN ($1, $2)`, s[0], s[1])

	c := b.claim(t, 10, time.Minute)
	assertSeqs(t, "claim beside an old live lease", c.Records, s[1])
	if n, err := b.Store.MarkSent(pgstoretest.Context(t), c.Token, pgstoretest.Seqs(c.Records)); err != nil || n != 1 {
		t.Fatalf("MarkSent of the taken-over row: %d, %v; want 1", n, err)
	}

	var token uuid.UUID
	if err := b.Pool.QueryRow(pgstoretest.Context(t), b.SQL("SELECT lease_token FROM {{schema}}.outbox_messages WHERE seq = $1"), s[0]).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Store.MarkSent(pgstoretest.Context(t), c.Token, []int64{s[0]}); err != nil || n != 0 {
		t.Fatalf("MarkSent of the old live lease with another token: %d, %v; want 0", n, err)
	}
	if n, err := b.Store.MarkSent(pgstoretest.Context(t), token, []int64{s[0]}); err != nil || n != 1 {
		t.Fatalf("MarkSent of the old live lease with its token: %d, %v; want 1", n, err)
	}
	if got := b.Get(t, b.IDOf(t, s[0])); got.Status != outbox.StatusSent {
		t.Errorf("the old lease's message after its mark: %s, want SENT", got.Status)
	}
	c = b.claim(t, 10, time.Minute)
	assertSeqs(t, "claim after the old lease's message was sent", c.Records, s[2])
}
