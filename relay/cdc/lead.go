package cdc

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox/internal/lifecycle"
)

// errLostLead ends a session whose relay lost the lead of its slot: its
// lease (sql/lease_setup.sql) carries another relay's token, or could not
// be renewed in time. Its records are refused from then on.
var errLostLead = errors.New("cdc: lost the lead of the slot")

// leadership is the lease the active relay holds for one session: its
// token, and until when it holds it by this relay's clock.
type leadership struct {
	token  uuid.UUID
	lease  time.Duration
	ctx    context.Context // done once the lead is lost or the session ends
	cancel context.CancelFunc
	kept   chan struct{} // closed when keepLead returned

	mu    sync.Mutex
	until time.Time
	lost  error // why the lead was lost; nil while held
}

// valid reports whether the lead is held at now: not lost, and renewed
// recently enough that no standby can have taken it yet (a tenth of the
// lease before it ends, since the database counts from a later moment).
func (l *leadership) valid(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost == nil && now.Before(l.until.Add(-l.lease/10))
}

// lostErr returns why the lead was lost, or nil.
func (l *leadership) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// slotLockKey is the key of the session-level advisory lock that makes a
// relay the active one for its slot (tryLock).
func (r *Relay) slotLockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("outbox.cdc.slot:" + r.cfg.Slot))
	return int64(h.Sum64())
}

// leaseToken is the token of the current session's lease, or uuid.Nil on
// a standby, which matches no lease.
func (r *Relay) leaseToken() uuid.UUID {
	if l := r.lead.Load(); l != nil {
		return l.token
	}
	return uuid.Nil
}

// leadContext is done once the current session's lead is lost: the
// session's feeder and its drain stop waiting then.
func (r *Relay) leadContext() context.Context {
	if l := r.lead.Load(); l != nil {
		return l.ctx
	}
	return context.Background()
}

// waitLead waits until this relay is the active one for the slot: it holds
// the slot's advisory lock on conn and the slot's lease. Meanwhile, as a
// standby, it takes over from an active relay whose lease expired
// (seize). It returns nil without an error when the relay stops first.
func (r *Relay) waitLead(conn *pgconn.PgConn) (*leadership, error) {
	poll := min(r.cfg.StandbyInterval, r.cfg.LeaderLease/5)
	standing := false
	for {
		ok, err := r.tryLock(r.runCtx, conn)
		if err != nil {
			return nil, fmt.Errorf("cdc: take the slot's advisory lock: %w", err)
		}
		if ok {
			self, err := r.backendOf(r.runCtx, conn)
			if err != nil {
				return nil, err
			}
			return r.takeLease(r.runCtx, self)
		}
		took, err := r.seize(r.runCtx)
		if err != nil {
			return nil, err
		}
		if !standing {
			standing = true
			r.log.Info("standing by: another relay is active on this slot")
		}
		wait := poll
		if took {
			// The terminated backend frees the lock within moments.
			wait = min(poll, seizedPoll)
		}
		if !r.stopping.Sleep(wait) {
			return nil, nil
		}
	}
}

// seizedPoll is how often a standby that took an expired lease tries the
// advisory lock while the terminated backend ends.
const seizedPoll = 50 * time.Millisecond

// backend names a PostgreSQL backend: its pid, and when it started (in
// microseconds since the epoch), since a pid is reused.
type backend struct {
	pid   int32
	start int64
}

// backendOf names the backend of conn, a replication connection
// (sql/backend_self.sql).
func (r *Relay) backendOf(ctx context.Context, conn *pgconn.PgConn) (backend, error) {
	res, err := conn.Exec(ctx, r.q.backendSelf).ReadAll()
	if err != nil {
		return backend{}, fmt.Errorf("cdc: read the replication connection's backend: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 2 {
		return backend{}, errors.New("cdc: read the replication connection's backend: unexpected result")
	}
	row := res[0].Rows[0]
	pid, err := strconv.ParseInt(string(row[0]), 10, 32)
	if err != nil {
		return backend{}, fmt.Errorf("cdc: the replication connection's pid %q: %w", row[0], err)
	}
	start, err := strconv.ParseInt(string(row[1]), 10, 64)
	if err != nil {
		return backend{}, fmt.Errorf("cdc: the replication connection's start %q: %w", row[1], err)
	}
	return backend{pid: int32(pid), start: start}, nil
}

// takeLease takes the slot's lease under a new token, once this relay
// holds the advisory lock on the replication connection whose backend is
// self (sql/lease_take.sql), and starts renewing it.
func (r *Relay) takeLease(ctx context.Context, self backend) (*leadership, error) {
	l := &leadership{token: uuid.New(), lease: r.cfg.LeaderLease, kept: make(chan struct{})}
	sent := time.Now()
	if _, err := r.cfg.Pool.Exec(ctx, r.q.leaseTake, r.cfg.Slot, r.cfg.ID, l.token, l.lease.Milliseconds(),
		self.pid, self.start); err != nil {
		return nil, fmt.Errorf("cdc: take the slot's lease: %w", err)
	}
	l.until = sent.Add(l.lease)
	l.ctx, l.cancel = context.WithCancel(context.Background())
	r.lead.Store(l)
	go r.keepLead(l)
	return l, nil
}

// seize takes the lease from an active relay that stopped renewing it
// while its replication connection still holds the advisory lock or the
// slot (sql/lease_seize.sql), and then terminates that connection, so that
// the lock and the slot are freed for waitLead's next try. It reports
// whether it took the lease.
func (r *Relay) seize(ctx context.Context) (bool, error) {
	owner, ago, holder, err := r.seizeLease(ctx)
	if err != nil || holder == (backend{}) {
		return false, err
	}
	r.log.Warn("the active relay stopped renewing its lease; taking over the slot",
		slog.String("active_relay", owner), slog.Duration("expired_ago", ago.Round(time.Millisecond)))
	n, err := r.terminate(ctx, holder)
	if err != nil {
		r.log.Error("could not terminate the replication connection of the relay that stopped renewing its lease "+
			"(the relays' role needs pg_signal_backend, or the same role as that relay's); waiting for that connection to end",
			slog.String("active_relay", owner), slog.Any("error", err))
		return true, nil
	}
	r.log.Info("terminated the replication connection of the relay that stopped renewing its lease",
		slog.String("active_relay", owner), slog.Int64("backends", n))
	return true, nil
}

// seizeLease takes the expired lease (sql/lease_seize.sql) and returns its
// former owner, how long ago it ended, and the backend it records as its
// holder; the zero backend when there was nothing to take.
func (r *Relay) seizeLease(ctx context.Context) (string, time.Duration, backend, error) {
	var (
		owner  string
		ago    float64
		holder backend
	)
	err := r.cfg.Pool.QueryRow(ctx, r.q.leaseSeize, r.cfg.Slot, r.slotLockKey(), r.cfg.ID, uuid.New(),
		r.cfg.LeaderLease.Milliseconds()).Scan(&owner, &ago, &holder.pid, &holder.start)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", 0, backend{}, nil // the active relay renews its lease, or none hangs
	case err != nil:
		return "", 0, backend{}, fmt.Errorf("cdc: check the active relay's lease: %w", err)
	}
	return owner, time.Duration(ago * float64(time.Second)), holder, nil
}

// terminate ends holder, the replication connection of the relay whose
// lease was seized, if it is still the lease's holder and still holds the
// lock or the slot (sql/lease_terminate.sql): never a relay that took the
// lock meanwhile. It returns how many backends it signalled.
func (r *Relay) terminate(ctx context.Context, holder backend) (int64, error) {
	var n int64
	err := r.cfg.Pool.QueryRow(ctx, r.q.leaseTerminate, r.cfg.Slot, r.slotLockKey(), holder.pid, holder.start).Scan(&n)
	return n, err
}

// keepLead renews l every third of its lease until the session ends or the
// lead is lost, whatever the stream does meanwhile; after each renewal it
// checks that the outbox is still in CDC mode (watchMode).
func (r *Relay) keepLead(l *leadership) {
	defer close(l.kept)
	lifecycle.Every(l.ctx, l.lease/3, func() bool { return r.renewLead(l) })
}

// renewLead renews l once, and then checks that the outbox is still in
// CDC mode (watchMode); it reports false when the lead is lost or the
// session ends.
func (r *Relay) renewLead(l *leadership) bool {
	if !l.valid(time.Now()) {
		r.loseLead(l, errLapsed)
		return false
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.lease/3)
	r.leaseRow.Lock()
	sent := time.Now()
	tag, err := r.cfg.Pool.Exec(ctx, r.q.leaseRenew, r.cfg.Slot, l.token, l.lease.Milliseconds())
	r.leaseRow.Unlock()
	cancel()
	switch {
	case l.ctx.Err() != nil:
		return false
	case err != nil:
		r.log.Warn("could not renew the slot's lease; still active until it ends", slog.Any("error", err))
	case tag.RowsAffected() == 0:
		r.loseLead(l, errors.New("another relay took over the slot's lease"))
		return false
	default:
		l.mu.Lock()
		l.until = sent.Add(l.lease)
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(l.ctx, l.lease/3)
		r.watchMode(ctx)
		cancel()
	}
	return true
}

// loseLead records that l is lost, once: the session's publishers stop
// waiting, and its replication connection is closed, so that the stream
// ends. The relay's records are refused by then (its token is not the
// lease's), or the lease may have ended; it stands by in its next session.
func (r *Relay) loseLead(l *leadership, why error) {
	l.mu.Lock()
	first := l.lost == nil
	if first {
		l.lost = fmt.Errorf("%w: %w", errLostLead, why)
	}
	l.mu.Unlock()
	if !first {
		return
	}
	r.log.Error("lost the lead of the slot; this relay records and confirms nothing more, ends its stream and stands by",
		slog.Any("reason", why))
	l.cancel()
	if r.lead.Load() == l {
		r.mu.Lock()
		if r.conn != nil {
			_ = r.conn.Close()
		}
		r.mu.Unlock()
	}
}

// Why a session's lead is lost (loseLead).
var (
	errRefused = errors.New("its statements were refused: another relay holds the slot's lease")
	errLapsed  = errors.New("its lease was not renewed in time")
)

// fenced is called when the stream finds the lead gone (why): the
// session's lead is lost.
func (r *Relay) fenced(why error) error {
	if l := r.lead.Load(); l != nil {
		r.loseLead(l, why)
		return l.lostErr()
	}
	return fmt.Errorf("%w: %w", errLostLead, why)
}

// endLead ends the session's lead: it stops renewing, and gives the lease
// up (sql/lease_release.sql) unless it was lost or the relay was aborted,
// so that a standby takes over as soon as the advisory lock is free.
func (r *Relay) endLead(l *leadership) {
	l.cancel()
	<-l.kept
	r.lead.CompareAndSwap(l, nil)
	if l.lostErr() != nil || r.aborted.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.cfg.Pool.Exec(ctx, r.q.leaseRelease, r.cfg.Slot, l.token); err != nil {
		r.log.Warn("could not give up the slot's lease; a standby takes over when it ends", slog.Any("error", err))
	}
}

// waitSlotFree waits, for up to LeaderLease, until no walsender streams
// from the slot: the backend of a relay that ended (or was terminated)
// frees the advisory lock a moment before the slot.
func (r *Relay) waitSlotFree(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.LeaderLease)
	for {
		s, err := r.slotState(ctx)
		if err != nil || !s.active || time.Now().After(deadline) {
			return err
		}
		if !r.stopping.Sleep(20 * time.Millisecond) {
			return nil
		}
	}
}
