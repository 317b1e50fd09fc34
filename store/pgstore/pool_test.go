package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A relay's pool pings a connection on acquire only after RelayPingIdle of
// idleness, not after pgxpool's default of one second: an idle relay polls
// once a second and would otherwise pay a second round trip for about every
// other poll.
func TestConfigureRelayPool_PingsOnlyLongIdleConnections(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	pgstore.ConfigureRelayPool(cfg)
	if cfg.ShouldPing == nil {
		t.Fatal("ShouldPing not set")
	}
	for _, c := range []struct {
		idle time.Duration
		want bool
	}{
		{0, false},
		{1500 * time.Millisecond, false},
		{pgstore.RelayPingIdle - time.Millisecond, false},
		{pgstore.RelayPingIdle, true},
		{time.Hour, true},
	} {
		if got := cfg.ShouldPing(context.Background(), pgxpool.ShouldPingParams{IdleDuration: c.idle}); got != c.want {
			t.Errorf("ShouldPing after %v idle = %v, want %v", c.idle, got, c.want)
		}
	}
}

// A relay's pool opens all its connections up front and keeps them, so that
// workers that become busy together after an idle spell do not each wait for
// a new connection: once the pool has warmed up, acquiring every connection
// at once creates none.
func TestConfigureRelayPool_KeepsEveryConnectionOpen(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 3
	pgstore.ConfigureRelayPool(cfg)
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	deadline := time.Now().Add(10 * time.Second)
	for pool.Stat().IdleConns() < cfg.MaxConns {
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d idle connections after 10s, want %d opened without any acquire", pool.Stat().IdleConns(), cfg.MaxConns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	created := pool.Stat().NewConnsCount()
	var conns []*pgxpool.Conn
	for range cfg.MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if n := pool.Stat().NewConnsCount() - created; n != 0 {
		t.Errorf("acquiring all %d connections of a warm pool opened %d new ones, want 0", cfg.MaxConns, n)
	}
}
