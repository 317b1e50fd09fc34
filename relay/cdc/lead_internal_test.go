package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/pgtest"
)

// relayConn is a connection standing for a relay's replication
// connection: the backend that holds the slot's advisory lock.
type relayConn struct {
	conn *pgx.Conn
	be   backend
}

// connect opens a connection of r's database and names its backend; it
// is closed when the test ends.
func connect(t *testing.T, r *Relay) *relayConn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	be, err := r.backendOf(ctx, conn.PgConn())
	if err != nil {
		t.Fatal(err)
	}
	return &relayConn{conn: conn, be: be}
}

// lock takes the slot's advisory lock on c, as the active relay does.
func (c *relayConn) lock(t *testing.T, r *Relay) {
	t.Helper()
	var ok bool
	if err := c.conn.QueryRow(context.Background(), "SELECT pg_try_advisory_lock($1)", r.slotLockKey()).Scan(&ok); err != nil || !ok {
		t.Fatalf("take the slot's advisory lock: %v, %v", ok, err)
	}
}

// end closes c and waits until its backend is gone.
func (c *relayConn) end(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if err := c.conn.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pool, c.be.pid, 10*time.Second)
}

// leaseOf records be as the holder of the slot's lease, taken by owner,
// and lets the lease expire: the relay of be stopped renewing it.
func leaseOf(t *testing.T, pool *pgxpool.Pool, r *Relay, owner string, be backend) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, r.q.leaseTake, r.cfg.Slot, owner, uuid.New(), time.Minute.Milliseconds(), be.pid, be.start); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE outbox_cdc_leases SET expires_at = now() - interval '1 second' WHERE slot_name = $1", r.cfg.Slot); err != nil {
		t.Fatal(err)
	}
}

// alive reports whether the backend pid exists.
func alive(t *testing.T, pool *pgxpool.Pool, pid int32) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func waitGone(t *testing.T, pool *pgxpool.Pool, pid int32, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for alive(t, pool, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("backend %d still runs after %s", pid, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaseToken returns the slot's lease token ("" when released).
func leaseToken(t *testing.T, pool *pgxpool.Pool, r *Relay) string {
	t.Helper()
	var tok *string
	if err := pool.QueryRow(context.Background(), "SELECT token::text FROM outbox_cdc_leases WHERE slot_name = $1", r.cfg.Slot).Scan(&tok); err != nil {
		t.Fatal(err)
	}
	if tok == nil {
		return ""
	}
	return *tok
}

// The active relay hangs: its lease expired while its replication
// connection still holds the lock. A standby takes the lease and
// terminates that connection, and no other backend.
func TestSeize_TerminatesTheHungHolder(t *testing.T) {
	t.Parallel()
	pool, r := newRelay(t, Config{})
	hung := connect(t, r)
	hung.lock(t, r)
	leaseOf(t, pool, r, "hung", hung.be)
	bystander := connect(t, r)

	took, err := r.seize(context.Background())
	if err != nil || !took {
		t.Fatalf("seize = %v, %v; want the expired lease taken", took, err)
	}
	waitGone(t, pool, hung.be.pid, 10*time.Second)
	if !alive(t, pool, bystander.be.pid) {
		t.Fatal("the takeover terminated a backend that held neither the lock nor the lease")
	}
}

// The hung relay's connection ends between the seize and the terminate,
// and another standby takes the lock, then the lease: the terminate ends
// none of it, at either moment.
func TestTerminate_SparesARelayThatTookTheLockMeanwhile(t *testing.T) {
	t.Parallel()
	pool, r := newRelay(t, Config{})
	ctx := context.Background()
	hung := connect(t, r)
	hung.lock(t, r)
	leaseOf(t, pool, r, "hung", hung.be)
	_, _, holder, err := r.seizeLease(ctx)
	if err != nil || holder != hung.be {
		t.Fatalf("seizeLease = holder %+v, %v; want the hung relay's backend %+v", holder, err, hung.be)
	}
	hung.end(t, pool)
	next := connect(t, r)
	next.lock(t, r)
	if n, err := r.terminate(ctx, holder); err != nil || n != 0 {
		t.Fatalf("terminate once another relay holds the lock = %d, %v; want nothing terminated", n, err)
	}
	if _, err := pool.Exec(ctx, r.q.leaseTake, r.cfg.Slot, "next", uuid.New(), time.Minute.Milliseconds(), next.be.pid, next.be.start); err != nil {
		t.Fatal(err)
	}
	if n, err := r.terminate(ctx, holder); err != nil || n != 0 {
		t.Fatalf("terminate once another relay holds the lease = %d, %v; want nothing terminated", n, err)
	}
	time.Sleep(100 * time.Millisecond) // a signalled backend would be gone by now
	if !alive(t, pool, next.be.pid) {
		t.Fatal("the takeover terminated the relay that took the lock after the seize")
	}
}

// The lock is held by a backend the expired lease does not record: a
// relay of an older version, which holds no lease (during a rolling
// upgrade), or one that just took the lock; or a backend with the
// recorded pid that started at another time (a reused pid). A standby
// takes nothing and terminates nothing.
func TestSeize_LeavesALockHolderTheLeaseDoesNotRecord(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		holder func(t *testing.T, pool *pgxpool.Pool, r *Relay, locker *relayConn) backend
	}{
		{"holder_ended", func(t *testing.T, pool *pgxpool.Pool, r *Relay, _ *relayConn) backend {
			gone := connect(t, r)
			gone.end(t, pool)
			return gone.be
		}},
		{"pid_reused", func(t *testing.T, _ *pgxpool.Pool, _ *Relay, locker *relayConn) backend {
			return backend{pid: locker.be.pid, start: locker.be.start - 1}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool, r := newRelay(t, Config{})
			locker := connect(t, r)
			locker.lock(t, r)
			leaseOf(t, pool, r, "gone", c.holder(t, pool, r, locker))
			token := leaseToken(t, pool, r)

			took, err := r.seize(context.Background())
			if err != nil || took {
				t.Fatalf("seize = %v, %v; want nothing taken", took, err)
			}
			time.Sleep(100 * time.Millisecond) // a signalled backend would be gone by now
			if !alive(t, pool, locker.be.pid) {
				t.Fatal("the takeover terminated a lock holder that the lease does not record")
			}
			if got := leaseToken(t, pool, r); got != token {
				t.Fatalf("the lease's token changed from %s to %s; want it untouched", token, got)
			}
		})
	}
}
