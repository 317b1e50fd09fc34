// Package modes runs the relay strategy that a PostgreSQL outbox records
// (pgstore.Store.Mode; "outbox mode"): package relay/claim in claim mode,
// package relay/cursor in cursor mode. It is a strategy made of those two,
// and "outbox relay" runs on it.
//
// It follows the switches that "outbox mode set" makes while relays run:
// from claim to cursor mode, the relays go on in cursor mode within a few
// seconds. The way back is refused while a relay leads the cursor, so the
// relays are stopped for it and start in claim mode. A switch is noticed
// by the strategy that runs: a Store in claim mode, or the cursor strategy
// in cursor mode, refuses its claim once it sees the outbox in another mode
// (pgstore.ErrNotClaimMode, pgstore.ErrNotCursorMode; each checks every
// few seconds). The strategy then reads the recorded mode, closes the old
// strategy (a cursor leader resigns) and claims with the new one. Marks go
// to the strategy that made the claim, so a batch claimed before the
// switch is recorded as it would have been without it.
//
// An outbox in CDC mode is published by package cdc. When the strategy
// reads the mode (at its first claim, or after a switch it noticed) and
// finds cdc, it claims nothing and fails its claims with an error wrapping
// [ErrCDCMode], reading the mode again at each claim. A claim strategy that
// runs when the outbox switches to CDC mode goes on claiming, which that
// switch allows (the CDC relay leaves every aggregate with an unsent
// message to the table path); the relay's readiness check says to restart
// it.
package modes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/relay/claim"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// ErrCDCMode is wrapped by the claims of a Strategy whose outbox is in CDC
// mode: package cdc publishes it ("outbox relay --mode cdc").
var ErrCDCMode = errors.New("modes: the outbox is in CDC mode; run the CDC relay ('outbox relay --mode cdc', package cdc), " +
	"or switch the outbox with 'outbox mode set claim|cursor'")

// ErrClosed is returned by the claims of a Strategy after Close.
var ErrClosed = errors.New("modes: the strategy is closed")

// closeTimeout bounds the close of a strategy left behind by a switch.
const closeTimeout = 5 * time.Second

// Strategy runs claim or cursor, as the outbox records. Create it with
// [New]. It is safe for the relay's workers to use at once.
type Strategy struct {
	st  *pgstore.Store
	log *slog.Logger

	// switching serializes the reads of the mode and the switches; mu,
	// held only briefly, guards the fields below.
	switching sync.Mutex
	mu        sync.Mutex
	mode      pgstore.Mode      // the mode current runs
	current   strategy.Strategy // nil before the first claim, in CDC mode and once closed
	closed    bool
	claims    claimBook // which strategy made each claim
}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the strategy for st's outbox. It reads the mode at its first
// claim. log receives a line for each switch (nil: slog.Default()).
func New(st *pgstore.Store, log *slog.Logger) *Strategy {
	if log == nil {
		log = slog.Default()
	}
	return &Strategy{st: st, log: log}
}

// Mode returns the mode of the strategy that runs: claim or cursor, or ""
// when none runs (before the first claim, in CDC mode, after Close).
func (s *Strategy) Mode() pgstore.Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

// Claim claims with the strategy of the outbox's mode. When that strategy
// finds that the outbox switched, it switches too and claims again.
func (s *Strategy) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	cur, err := s.running(ctx)
	if err != nil {
		return store.Claim{}, err
	}
	c, err := cur.Claim(ctx, p)
	if switched(err) {
		if cur, err = s.follow(ctx, cur); err != nil {
			return store.Claim{}, err
		}
		c, err = cur.Claim(ctx, p)
	}
	if err != nil {
		return store.Claim{}, err
	}
	s.claims.add(c, cur, p.Lease)
	return c, nil
}

// MarkSent marks with the strategy that made the claim. Only the running
// strategy claims the next batch with the mark; when it refuses that claim
// because the outbox switched, the batch is marked alone at once.
func (s *Strategy) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64, next *strategy.Next) (int64, *store.Claim, error) {
	by, running := s.madeBy(token)
	if !running {
		next = nil
	}
	n, c, err := by.MarkSent(ctx, token, seqs, next)
	if next != nil && switched(err) {
		n, c, err = by.MarkSent(ctx, token, seqs, nil)
	}
	if err == nil && c != nil {
		s.claims.add(*c, by, next.Params.Lease)
	}
	return n, c, err
}

// MarkFailed records failures with the strategy that made the claim.
func (s *Strategy) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	by, _ := s.madeBy(token)
	return by.MarkFailed(ctx, token, failures)
}

// Release gives messages back through the strategy that made the claim.
func (s *Strategy) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	by, _ := s.madeBy(token)
	return by.Release(ctx, token, seqs)
}

// Wakeups returns the Store's notifications; the idle registration is the
// running strategy's (a cursor standby does not make writers notify).
func (s *Strategy) Wakeups() store.Notifier { return wakeups{s} }

// Close closes the running strategy (a cursor leader resigns). Claims
// fail with ErrClosed from then on.
func (s *Strategy) Close(ctx context.Context) error {
	s.switching.Lock()
	defer s.switching.Unlock()
	s.mu.Lock()
	cur := s.current
	s.current, s.mode, s.closed = nil, "", true
	s.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.Close(ctx)
}

// switched reports whether err says that the outbox is not in the mode of
// the strategy that returned it.
func switched(err error) bool {
	return errors.Is(err, pgstore.ErrNotClaimMode) || errors.Is(err, pgstore.ErrNotCursorMode)
}

// running returns the running strategy, reading the mode first if none
// runs.
func (s *Strategy) running(ctx context.Context) (strategy.Strategy, error) {
	s.mu.Lock()
	cur, closed := s.current, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case cur != nil:
		return cur, nil
	}
	return s.follow(ctx, nil)
}

// follow reads the outbox's mode and makes its strategy the running one,
// unless another worker did so since old refused (or, old nil, since none
// ran). It closes the strategy it replaces. It never returns a nil
// strategy without an error.
func (s *Strategy) follow(ctx context.Context, old strategy.Strategy) (strategy.Strategy, error) {
	s.switching.Lock()
	defer s.switching.Unlock()
	s.mu.Lock()
	cur, from, closed := s.current, s.mode, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case cur != nil && cur != old:
		return cur, nil
	}
	st, err := s.st.Mode(ctx)
	if err != nil {
		return nil, fmt.Errorf("modes: %w", err)
	}
	if cur != nil && st.Mode == from {
		return cur, nil // the record does not show a switch: claim again later
	}
	next, err := s.strategyFor(st.Mode)
	s.mu.Lock()
	s.current, s.mode = next, st.Mode
	if next == nil {
		s.mode = ""
	}
	s.mu.Unlock()
	if cur != nil {
		s.retire(cur, from, st.Mode)
	}
	return next, err
}

// strategyFor returns a new strategy for mode m, or nil and an error.
func (s *Strategy) strategyFor(m pgstore.Mode) (strategy.Strategy, error) {
	switch m {
	case pgstore.ModeClaim:
		return claim.New(s.st), nil
	case pgstore.ModeCursor:
		return cursor.New(s.st), nil
	case pgstore.ModeCDC:
		return nil, ErrCDCMode
	}
	return nil, fmt.Errorf("modes: the outbox records the unknown mode %q", m)
}

// retire closes old, which ran mode from and which the switch to mode to
// leaves behind; the marks of its claims still go through it.
func (s *Strategy) retire(old strategy.Strategy, from, to pgstore.Mode) {
	s.log.Info("the outbox switched its relay mode", slog.String("from", string(from)), slog.String("to", string(to)))
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := old.Close(ctx); err != nil {
		s.log.Warn("closing the strategy of the old mode failed; its lead ends with its lease", slog.Any("error", err))
	}
}

// madeBy returns the strategy that made claim token, and whether it is
// the running one. A token it does not know (its lease ended long ago, or
// the claim held nothing) goes to the running strategy, or to a claim
// strategy when none runs: each only changes rows still held under token.
func (s *Strategy) madeBy(token uuid.UUID) (strategy.Strategy, bool) {
	s.mu.Lock()
	cur := s.current
	s.mu.Unlock()
	by := s.claims.madeBy(token)
	switch {
	case by == nil && cur != nil:
		return cur, true
	case by == nil:
		return claim.New(s.st), false
	}
	return by, by == cur
}

// wakeups is the Strategy's store.Notifier.
type wakeups struct{ s *Strategy }

func (w wakeups) Notifications(ctx context.Context) (<-chan struct{}, error) {
	return w.s.st.Notifications(ctx)
}

// Idle registers through the running strategy's notifier, the Store's
// when none runs.
func (w wakeups) Idle(ctx context.Context, owner string, d time.Duration) error {
	w.s.mu.Lock()
	cur := w.s.current
	w.s.mu.Unlock()
	if cur != nil {
		if n := cur.Wakeups(); n != nil {
			return n.Idle(ctx, owner, d)
		}
	}
	return w.s.st.Idle(ctx, owner, d)
}

func (w wakeups) Busy(ctx context.Context, owner string) error { return w.s.st.Busy(ctx, owner) }
