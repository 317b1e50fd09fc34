package cursor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A MarkSentAndClaim whose round trip fails changes nothing the caller can
// see: the relay then marks alone (relay.runBatch), and that mark must
// still count the messages, or the relay reports them as taken over by
// another relay (the Fenced hook, outbox_relay_fenced_total) while it
// still leads.
func TestCursor_FailedMarkAndClaimLeavesTheMarkToTheRetry(t *testing.T) {
	// FullClaimInterval -1: every claim has a round trip (the table path's
	// claim), so that the cancelled one fails.
	b := pgstoretest.SetupCursor(t, pgstore.Config{FullClaimInterval: -1})
	seq := b.Enqueue(t, pgstoretest.Msg("Order", "a"))
	c := pgstoretest.Claim(t, b.Cursor, "A")
	if len(c.Records) != 1 {
		t.Fatalf("claimed %v, want %v", pgstoretest.Seqs(c.Records), seq)
	}
	ctx, cancel := context.WithCancel(pgstoretest.Context(t))
	cancel()
	if _, _, err := b.Cursor.MarkSentAndClaim(ctx, c.Token, seq, store.ClaimParams{Owner: "A", Limit: 100, Lease: pgstoretest.CursorLease}); err == nil {
		t.Fatal("MarkSentAndClaim with a cancelled context succeeded; the test needs a failed round trip")
	}
	n, err := b.Cursor.MarkSent(pgstoretest.Context(t), c.Token, seq)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("MarkSent after the failed MarkSentAndClaim = %d, want 1: the relay would report the message as fenced", n)
	}
	if leading, _ := b.Cursor.Leading(); !leading {
		t.Error("the store lost the lead")
	}
}

// The position never passes the seq of a transaction still open, even when
// that transaction's id is newer than every one that had ended when the
// leader found the gap: PostgreSQL's snapshot xmax is the newest ended id
// plus one, so such a transaction is neither below that xmax nor counted in
// a later snapshot's xmin; the gap's bound must be an id given out after
// the snapshot (queries/cursor_read.sql). Found by outbox-lab chaos --cursor
// --seed 12, which lost a late commit with the snapshot's xmax as the
// bound. (The leader's read must come before any newer transaction ends:
// on a busy server other sessions' commits hide the case, so the test tries
// a few times.)
func TestCursor_AnOpenWriterWithTheNewestIDHoldsThePosition(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	pgstoretest.Claim(t, b.Cursor, "A") // A leads
	for attempt := range 10 {
		// older gets its id first; late gets a newer one and takes its
		// seq; older then takes a higher seq and commits, and the leader
		// reads at once.
		older, err := b.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := older.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
			t.Fatal(err)
		}
		late := pgstoretest.Msg("Order", "late")
		lateTx := openEnqueue(t, b, late)
		if err := b.Store.Enqueue(ctx, older, pgstoretest.Msg("Order", "other")); err != nil {
			t.Fatal(err)
		}
		if err := older.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
		lateSeq := seqOf(t, b, lateTx, late.ID)
		// However long late stays open (past the gap grace of 1 s), the
		// position stays below its seq.
		deadline := time.Now().Add(1500 * time.Millisecond)
		for time.Now().Before(deadline) {
			pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
			if leading, pos := b.Cursor.Leading(); leading && pos >= lateSeq {
				t.Fatalf("attempt %d: position %d passed seq %d of a transaction still open (the message is lost when it commits)", attempt, pos, lateSeq)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := lateTx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := claimUntil(t, b.Cursor, "A", lateSeq); !slices.Contains(got, lateSeq) {
			t.Fatalf("the late message %d was never claimed: %v", lateSeq, got)
		}
	}
}

// A read's gap bound must be an id taken after the read's snapshot. In a
// round trip that first saves (an UPDATE, which gives the transaction its
// id), an id taken by the read itself would be the save's, older than a
// writer that got its id while the save waited: the gap of that writer's
// seq would close while it is still open, and its message would be lost.
// The save waits here on a row lock the test holds.
func TestCursor_AWriterThatGotItsIDDuringTheSaveHoldsThePosition(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{CursorSaveInterval: time.Millisecond})
	ctx := pgstoretest.Context(t)
	claimUntil(t, b.Cursor, "A", b.Enqueue(t, pgstoretest.Msg("Order", "first"))...) // A leads, and has a save due

	lock, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, b.SQL("SELECT 1 FROM {{schema}}.outbox_cursor FOR UPDATE")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	claimed := make(chan store.Claim, 1)
	go func() {
		c, err := b.Cursor.Claim(ctx, store.ClaimParams{Owner: "A", Limit: 100, Lease: pgstoretest.CursorLease})
		if err != nil {
			t.Errorf("Claim: %v", err)
		}
		claimed <- c
	}()
	// Wait until the save waits for the lock.
	pgtest.AwaitBackend(t, b.Pool, 5*time.Second, "the leader's round trip never waited for the cursor row",
		`wait_event_type = 'Lock' AND query LIKE '%' || $1 || '.outbox_cursor%'`, pgx.Identifier{b.Schema}.Sanitize())
	late := pgstoretest.Msg("Order", "late")
	lateTx := openEnqueue(t, b, late)
	lateSeq := seqOf(t, b, lateTx, late.ID)
	b.Enqueue(t, pgstoretest.Msg("Order", "after"))
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-claimed
	pgstoretest.MarkSent(t, b.Cursor, c)
	// However long late stays open (past the gap grace of 1 s), the
	// position stays below its seq.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
		if pos := position(t, b.Cursor); pos >= lateSeq {
			t.Fatalf("position %d passed seq %d of a transaction still open (the message is lost when it commits)", pos, lateSeq)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := lateTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := claimUntil(t, b.Cursor, "A", lateSeq); !slices.Contains(got, lateSeq) {
		t.Fatalf("the late message %d was never claimed: %v", lateSeq, got)
	}
}

// A writer that inserts into outbox_messages with its own SQL (another
// service, a script, a database trigger) has no Enqueue to take its
// transaction id before its seq. When that INSERT is the transaction's
// first write, PostgreSQL draws the seq (the identity) before it gives the
// transaction an id (at the row's heap insert; nextval gives one itself
// only when it WAL-logs, for one value in 32), so between the two the
// transaction is in no snapshot: a leader that found the seq missing could
// close its gap then, and the message, committed later below the position,
// would never be published. Migration 012's statement trigger gives the
// transaction its id before any row of the statement takes a seq. Here a
// row trigger of the test's own holds the INSERT for 1.5 s between the
// seq and the heap insert, longer than a gap's grace of 1 s. A partitioned
// outbox gets the statement trigger when Migrate converts the table.
func TestCursor_AnInsertWithItsOwnSQLHoldsThePosition(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		ownSQLInsertHoldsThePosition(t, pgstoretest.SetupCursor(t, pgstore.Config{}))
	})
	t.Run("partitioned", func(t *testing.T) {
		t.Parallel()
		b := pgstoretest.SetupPartitioned(t, time.Hour)
		if err := b.Store.EnableCursor(pgstoretest.Context(t)); err != nil {
			t.Fatalf("EnableCursor: %v", err)
		}
		b.Cursor = cursor.New(b.Store).Queue()
		ownSQLInsertHoldsThePosition(t, b)
	})
}

func ownSQLInsertHoldsThePosition(t *testing.T, b *pgstoretest.Bundle) {
	ctx := pgstoretest.Context(t)
	if _, err := b.Pool.Exec(ctx, b.SQL(`
		CREATE FUNCTION {{schema}}.test_hold_insert() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pg_sleep(1.5);
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_hold_insert BEFORE INSERT ON {{schema}}.outbox_messages
			FOR EACH ROW WHEN (NEW.event_type = 'Held') EXECUTE FUNCTION {{schema}}.test_hold_insert()`)); err != nil {
		t.Fatal(err)
	}
	// A leads. The sequence's first value is WAL-logged, and a nextval
	// that logs gives its transaction an id; the next 32 do not.
	claimUntil(t, b.Cursor, "A", b.Enqueue(t, pgstoretest.Msg("Order", "first"))...)

	own, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Rollback(ctx) })
	id := uuid.New()
	inserted := make(chan error, 1)
	go func() {
		_, err := own.Exec(ctx, b.SQL(`INSERT INTO {{schema}}.outbox_messages
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type)
			VALUES ($1, 'Order', 'own-sql', 'Held', 1, '{}', 'application/json')`), id)
		inserted <- err
	}()
	// Wait until the INSERT holds its seq in the test's trigger.
	pgtest.AwaitBackend(t, b.Pool, 5*time.Second, "the INSERT never reached the test's trigger",
		`wait_event = 'PgSleep' AND query LIKE 'INSERT INTO ' || $1 || '%'`, pgx.Identifier{b.Schema}.Sanitize())
	after := b.Enqueue(t, pgstoretest.Msg("Order", "after"))
	// The leader reads past the held seq, over the INSERT and for a while
	// after it; the position must stay below the seq.
	ownSeq := after[0] - 1
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
		select {
		case err := <-inserted:
			if err != nil {
				t.Fatalf("INSERT: %v", err)
			}
			inserted = nil
		default:
		}
		if pos := position(t, b.Cursor); pos >= ownSeq {
			t.Fatalf("position %d passed seq %d of a transaction still open (the message is lost when it commits)", pos, ownSeq)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if inserted != nil {
		t.Fatal("the INSERT did not return within 2.5 s")
	}
	if got := seqOf(t, b, own, id); got != ownSeq {
		t.Fatalf("the INSERT took seq %d, the test assumed %d", got, ownSeq)
	}
	if err := own.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := claimUntil(t, b.Cursor, "A", ownSeq); !slices.Contains(got, ownSeq) {
		t.Fatalf("the message of the INSERT, %d, was never claimed: %v", ownSeq, got)
	}
}
