package pgstoretest

import (
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// CursorLease is the leader's lease of [SetupCursor]'s stores (unless its
// Config sets one), and the lease of [Claim]'s claims.
const CursorLease = time.Second

// SetupCursor is [Setup] with cfg (its Schema set to the Bundle's), in
// cursor mode, with a cursor strategy of the store, as a Queue
// (Bundle.Cursor). A zero cfg.LeaderLease is CursorLease.
func SetupCursor(t testing.TB, cfg pgstore.Config) *Bundle {
	t.Helper()
	b := Setup(t)
	cfg.Schema = b.Schema
	if cfg.LeaderLease == 0 {
		// The tests of takeovers wait for the leader's lease: keep it short.
		cfg.LeaderLease = CursorLease
	}
	s, err := pgstore.New(b.Pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.EnableCursor(Context(t)); err != nil {
		t.Fatalf("EnableCursor: %v", err)
	}
	b.Store, b.Cursor = s, cursor.New(s).Queue()
	return b
}

// NewCursor returns a cursor strategy (as a Queue) of a new Store on b's
// pool and outbox, with cfg (its Schema set to b's): another relay.
func (b *Bundle) NewCursor(t testing.TB, cfg pgstore.Config) *cursor.Queue {
	t.Helper()
	cfg.Schema = b.Schema
	s, err := pgstore.New(b.Pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return cursor.New(s).Queue()
}

// CursorLeaseHolder returns the cursor row's lease holder and token (""
// for none).
func (b *Bundle) CursorLeaseHolder(t testing.TB) (owner, token string) {
	t.Helper()
	var o, tok *string
	if err := b.Pool.QueryRow(Context(t), b.SQL("SELECT lease_owner, lease_token::text FROM {{schema}}.outbox_cursor")).Scan(&o, &tok); err != nil {
		t.Fatal(err)
	}
	if o != nil {
		owner = *o
	}
	if tok != nil {
		token = *tok
	}
	return owner, token
}

// Claim claims up to 100 messages of q for owner, with a lease of
// CursorLease, and fails the test on an error.
func Claim(t testing.TB, q store.Queue, owner string) store.Claim {
	t.Helper()
	c, err := q.Claim(Context(t), store.ClaimParams{Owner: owner, Limit: 100, Lease: CursorLease})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

// MarkSent marks every record of c sent, and fails the test unless it
// succeeds for each of them.
func MarkSent(t testing.TB, q store.Queue, c store.Claim) {
	t.Helper()
	if n, err := q.MarkSent(Context(t), c.Token, Seqs(c.Records)); err != nil || n != int64(len(c.Records)) {
		t.Fatalf("MarkSent = %d, %v; want %d", n, err, len(c.Records))
	}
}

// CheckLeaseRejected checks that a claim with a lease below 1ms failed with
// an error that names the field and the rule.
func CheckLeaseRejected(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		t.Error("Claim with zero lease succeeded")
	} else if !strings.Contains(err.Error(), "ClaimParams.Lease") || !strings.Contains(err.Error(), "at least 1ms") {
		t.Errorf("Claim with zero lease: error %q does not name the field and the rule", err)
	}
}
