package demo

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The checks must be able to fail: with the orders relay killed and never
// replaced, the orders' events stay in the outbox, so no invoice or
// reservation appears and the checks say so.
func TestChecks_FailWhenEventsAreNotDelivered(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Rate: 20, Logger: slog.New(slog.DiscardHandler)}.withDefaults()
	s, err := start(ctx, cfg, t.TempDir(), 1, cfg.Logger, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.shutdown()
	s.relays[0].crash(crashAfterClaim, 0)

	loadCtx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	s.load.run(loadCtx)
	if s.load.placed.Load() == 0 {
		t.Fatal("no order placed")
	}
	c := &checker{b: s.b, load: s.load, audit: s.audit, stockStart: s.stockStart, billing: s.billing, inventory: s.inventory}
	checks, err := c.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Join(failed(checks), "\n")
	for _, want := range []string{"has no invoice", "has no reservation", "distinct events on the topic", "still unsent"} {
		if !strings.Contains(bad, want) {
			t.Errorf("failed checks lack %q:\n%s", want, bad)
		}
	}
	if !checks[2].OK || !checks[4].OK {
		t.Errorf("dead letters or the service's contract failed, though nothing broke them: %+v", checks)
	}
}
