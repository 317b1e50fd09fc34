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
