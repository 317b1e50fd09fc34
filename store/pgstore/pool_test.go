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
