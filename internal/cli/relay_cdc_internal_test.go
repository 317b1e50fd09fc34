package cli

import (
	"testing"

	"github.com/outbox-dev/outbox/relay"
)

// The CDC relay takes --max-run and --max-run-bytes like the polling relay.
func TestCDCConfig_TakesTheRunFlags(t *testing.T) {
	a := &app{}
	cfg := a.cdcConfig(&relayFlags{maxRun: 7, maxRunBytes: 4096}, &cdcFlags{}, 0, nil, nil, &relay.Hooks{})
	if cfg.MaxRun != 7 || cfg.MaxRunBytes != 4096 {
		t.Errorf("cdc.Config MaxRun %d, MaxRunBytes %d; want 7 and 4096 from the flags", cfg.MaxRun, cfg.MaxRunBytes)
	}
}

// The CDC relay's sink may keep a run client per batch its core publishes
// at once.
func TestCDCCalls_AreTheCoresWorkers(t *testing.T) {
	for _, c := range []struct{ batch, inFlight, want int }{{100, 0, 4}, {100, 100, 1}, {100, 1250, 13}} {
		if got := cdcCalls(&relayFlags{batchSize: c.batch}, &cdcFlags{maxInFlight: c.inFlight}); got != c.want {
			t.Errorf("batch %d, max in flight %d: %d calls, want %d", c.batch, c.inFlight, got, c.want)
		}
	}
}
