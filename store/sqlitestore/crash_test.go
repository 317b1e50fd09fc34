package sqlitestore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// The crash helper is this test binary run again with helperEnv set to the
// database path: a relay that claims, starts marking, and is killed.
const helperEnv = "SQLITESTORE_CRASH_HELPER_DB"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		if err := crashHelper(path); err != nil {
			fmt.Fprintln(os.Stderr, "crash helper:", err)
			os.Exit(2)
		}
		os.Exit(0) // not reached: the test kills the helper
	}
	os.Exit(m.Run())
}

// helperClaim is what the helper reports after its claim.
type helperClaim struct {
	Token uuid.UUID `json:"token"`
	Seqs  []int64   `json:"seqs"`
}

// crashLease is the lease of the crashed relays' claims.
const crashLease = time.Second

// crashHelper claims every due message, prints the claim, then marks the
// messages SENT in a transaction that it never commits, says "marking", and
// waits to be killed.
func crashHelper(path string) error {
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, path)
	if err != nil {
		return err
	}
	s, err := sqlitestore.New(db, sqlitestore.Config{Logger: quiet})
	if err != nil {
		return err
	}
	c, err := s.Claim(ctx, store.ClaimParams{Owner: "crashed-relay", Limit: 100, Lease: crashLease})
	if err != nil {
		return err
	}
	seqs := make([]int64, len(c.Records))
	for i, r := range c.Records {
		seqs[i] = r.Seq
	}
	if err := json.NewEncoder(os.Stdout).Encode(helperClaim{Token: c.Token, Seqs: seqs}); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE outbox_messages SET status = 'SENT', lease_token = NULL WHERE lease_token = ?`, c.Token.String()); err != nil {
		return err
	}
	fmt.Println("marking")
	select {} // until SIGKILL
}

// claimWhenDue claims until the claim returns something; it fails the test
// after twice the crash lease and more.
func claimWhenDue(t *testing.T, s *sqlitestore.Store, owner string) store.Claim {
	t.Helper()
	deadline := time.Now().Add(2*crashLease + 10*time.Second)
	for {
		c, err := s.Claim(testCtx(t), store.ClaimParams{Owner: owner, Limit: 100, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if len(c.Records) > 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing claimable %v after the crash", time.Until(deadline))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A relay process killed with SIGKILL inside its mark transaction: SQLite
// rolls the uncommitted mark back, the write lock is free at once, and the
// messages are claimed again, under a new token, when the lease expires.
func TestCrash_RelayKilledDuringMark_RollsBackAndReclaimsAfterLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := []outbox.Message{msg("Order", "a"), msg("Order", "b")}
	b.enqueue(t, ms...)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+b.path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	var claimed helperClaim
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &claimed) != nil || len(claimed.Seqs) != 2 {
		t.Fatalf("helper's claim: %q, %+v", lines.Text(), claimed)
	}
	if !lines.Scan() || lines.Text() != "marking" {
		t.Fatalf("helper said %q, want marking", lines.Text())
	}

	// The helper holds the write lock: a write here waits.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := enqueue(short, b.db, b.store, msg("Order", "a")); err == nil {
		t.Fatal("a write succeeded while the helper held the write lock")
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// The lock died with the process, and the mark with it. (The new
	// message waits behind the crashed relay's head of its aggregate.)
	if err := enqueue(testCtx(t), b.db, b.store, msg("Order", "a")); err != nil {
		t.Fatalf("write after the helper was killed: %v", err)
	}
	for _, m := range ms {
		if got := b.get(t, m.ID); got.Status != outbox.StatusInFlight || got.LeaseOwner != "crashed-relay" {
			t.Errorf("after the kill: status %s, owner %q; want IN_FLIGHT under crashed-relay (the mark rolled back)", got.Status, got.LeaseOwner)
		}
	}

	c := claimWhenDue(t, b.store, "relay-B")
	if c.Token == claimed.Token {
		t.Error("the takeover reused the crashed relay's token")
	}
	got := make([]int64, len(c.Records))
	for i, r := range c.Records {
		got[i] = r.Seq
	}
	if !slices.Equal(got, claimed.Seqs) {
		t.Errorf("reclaimed seqs %v, want the crashed relay's %v", got, claimed.Seqs)
	}
	if n, err := b.store.MarkSent(testCtx(t), claimed.Token, claimed.Seqs); err != nil || n != 0 {
		t.Errorf("MarkSent with the crashed relay's token = %d, %v; want 0", n, err)
	}
	if n, err := b.store.MarkSent(testCtx(t), c.Token, claimed.Seqs); err != nil || n != 2 {
		t.Errorf("MarkSent with the new token = %d, %v; want 2", n, err)
	}
}

// The database is closed after a claim and before any mark (the process
// stopped). Reopened, the message stays leased until the lease expires,
// and is claimable then.
func TestCrash_ClosedAfterClaim_ReclaimableAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.New(db, sqlitestore.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	m := msg("Order", "a")
	if err := enqueue(ctx, db, s, m); err != nil {
		t.Fatal(err)
	}
	first, err := s.Claim(ctx, store.ClaimParams{Owner: "crashed-relay", Limit: 10, Lease: 2 * crashLease})
	claimedAt := time.Now()
	if err != nil || len(first.Records) != 1 {
		t.Fatalf("Claim = %+v, %v", first, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2 := open(t, path)
	s2, err := sqlitestore.New(db2, sqlitestore.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	early, err := s2.Claim(ctx, store.ClaimParams{Owner: "relay-B", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(early.Records) != 0 && time.Since(claimedAt) < 2*crashLease {
		t.Errorf("claimed %d messages under an unexpired lease", len(early.Records))
	}
	c := early
	if len(c.Records) == 0 {
		c = claimWhenDue(t, s2, "relay-B")
	}
	if len(c.Records) != 1 || c.Records[0].ID != m.ID || c.Records[0].Attempts != 0 || c.Token == first.Token {
		t.Fatalf("reclaim = %+v; want the message, no attempt counted, a new token", c)
	}
	if n, err := s2.MarkSent(ctx, first.Token, []int64{c.Records[0].Seq}); err != nil || n != 0 {
		t.Errorf("MarkSent with the old token = %d, %v; want 0", n, err)
	}
	if n, err := s2.MarkSent(ctx, c.Token, []int64{c.Records[0].Seq}); err != nil || n != 1 {
		t.Errorf("MarkSent with the new token = %d, %v; want 1", n, err)
	}
}
