package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lag is how far the slot is behind, for metrics and alerts.
type Lag struct {
	// Bytes is the WAL between the server's current position and the
	// slot's confirmed position: what PostgreSQL keeps for the slot. It
	// grows while no relay confirms, even with an idle outbox, since other
	// tables write WAL too.
	Bytes int64
	// Age is how long this relay has had messages received from the stream
	// but not yet confirmed (published and marked): zero when it is caught
	// up, growing while the broker is unreachable. Zero on a standby.
	Age time.Duration
	// Active reports whether a relay streams from the slot now.
	Active bool
	// Leader reports whether this relay is the one streaming.
	Leader bool
	// WALStatus is pg_replication_slots.wal_status: "reserved" or
	// "extended" are healthy, "unreserved" means the slot is about to be
	// lost, "lost" that it was.
	WALStatus string
	// SafeWALBytes is how much more WAL may be written before PostgreSQL
	// invalidates the slot, or -1 when max_slot_wal_keep_size is unlimited.
	SafeWALBytes int64
	// ConfirmedLSN is the slot's confirmed position.
	ConfirmedLSN string
}

// Lag reads the slot's lag. It works on the active relay and on standbys
// alike (Age is known only on the active one). It returns an error wrapping
// pgx.ErrNoRows when the slot does not exist.
func (r *Relay) Lag(ctx context.Context) (Lag, error) {
	var l Lag
	var safe *int64
	err := r.cfg.Pool.QueryRow(ctx, r.q.lag, r.cfg.Slot).Scan(&l.Bytes, &l.Active, &l.WALStatus, &safe, &l.ConfirmedLSN)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Lag{}, fmt.Errorf("cdc: lag: no slot %s: %w", r.cfg.Slot, err)
		}
		return Lag{}, fmt.Errorf("cdc: lag: %w", err)
	}
	l.SafeWALBytes = -1
	if safe != nil {
		l.SafeWALBytes = *safe
	}
	l.Leader = r.leader.Load()
	if since := r.behindNano.Load(); since != 0 && l.Leader {
		l.Age = time.Since(time.Unix(0, since))
	}
	return l, nil
}

// logLag logs the slot's lag; the active relay does so every
// LagLogInterval.
func (r *Relay) logLag() {
	ctx, cancel := context.WithTimeout(r.runCtx, 10*time.Second)
	defer cancel()
	l, err := r.Lag(ctx)
	if err != nil {
		r.log.Warn("could not read the slot's lag", slog.Any("error", err))
		return
	}
	level := slog.LevelInfo
	if l.WALStatus == "unreserved" || l.WALStatus == "lost" {
		level = slog.LevelError
	}
	r.log.Log(ctx, level, "slot lag", slog.Int64("lag_bytes", l.Bytes), slog.Duration("lag_age", l.Age),
		slog.String("wal_status", l.WALStatus), slog.Int64("safe_wal_bytes", l.SafeWALBytes),
		slog.String("confirmed_lsn", l.ConfirmedLSN))
}
