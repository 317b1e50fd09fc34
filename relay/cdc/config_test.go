package cdc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// New refuses a bad Config with an error that wraps ErrInvalidConfig and
// names the field.
func TestNew_RejectsBadConfigNamingTheField(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, "public")
	snk, err := kafka.New(kafka.Config{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	for _, tc := range []struct {
		field string
		cfg   cdc.Config
	}{
		{"Pool", cdc.Config{Sink: snk}},
		{"Sink", cdc.Config{Pool: pool}},
		{"Slot", cdc.Config{Pool: pool, Sink: snk, Slot: "Outbox-Slot"}},
		{"Publication", cdc.Config{Pool: pool, Sink: snk, Publication: "x;drop"}},
		{"Schema", cdc.Config{Pool: pool, Sink: snk, Schema: "Bad Schema"}},
		{"BatchSize", cdc.Config{Pool: pool, Sink: snk, BatchSize: -1}},
		{"Cleanup", cdc.Config{Pool: pool, Sink: snk, Cleanup: 7}},
		{"MaxInFlight", cdc.Config{Pool: pool, Sink: snk, MaxInFlight: -1}},
		{"MaxRun", cdc.Config{Pool: pool, Sink: plainSink{snk}, MaxRun: 2}}, // not a sink.RunSink
		{"MaxRun", cdc.Config{Pool: pool, Sink: testRunSink{snk}, BatchSize: 5, MaxRun: 6}},
		{"MaxRunBytes", cdc.Config{Pool: pool, Sink: testRunSink{snk}, MaxRun: 2, MaxRunBytes: -1}},
		{"MaxInFlightBytes", cdc.Config{Pool: pool, Sink: snk, MaxInFlightBytes: -1}},
		{"RetryBase/RetryMax", cdc.Config{Pool: pool, Sink: snk, RetryBase: 10, RetryMax: 5}},
		{"LeaderLease", cdc.Config{Pool: pool, Sink: snk, LeaderLease: 500 * time.Millisecond}},
	} {
		_, err := cdc.New(tc.cfg)
		if !errors.Is(err, cdc.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: New gave %v; want ErrInvalidConfig naming %s", tc.field, err, tc.field)
		}
	}
}

// The default slot and publication are named after the schema, within
// PostgreSQL's 63-byte limit and distinct for long schema names.
func TestDefaultSlot_NamedAfterSchemaWithinLimit(t *testing.T) {
	t.Parallel()
	if got := cdc.DefaultSlot("outbox"); got != "outbox_outbox" {
		t.Fatalf("DefaultSlot(outbox) = %q", got)
	}
	a := cdc.DefaultSlot(strings.Repeat("a", 60) + "1")
	b := cdc.DefaultSlot(strings.Repeat("a", 60) + "2")
	if len(a) > 63 || len(b) > 63 || a == b {
		t.Fatalf("long names %q, %q: want distinct and at most 63 bytes", a, b)
	}
}

// The in-flight bounds default to DefaultInFlightBatches batches and
// DefaultMaxInFlightBytes.
func TestConfig_InFlightDefaults(t *testing.T) {
	t.Parallel()
	c := cdc.Config{BatchSize: 50}.WithDefaults()
	if c.MaxInFlight != cdc.DefaultInFlightBatches*50 || c.MaxInFlightBytes != cdc.DefaultMaxInFlightBytes {
		t.Fatalf("MaxInFlight %d, MaxInFlightBytes %d; want %d and %d", c.MaxInFlight, c.MaxInFlightBytes,
			cdc.DefaultInFlightBatches*50, cdc.DefaultMaxInFlightBytes)
	}
}

// The active relay's lease defaults to DefaultLeaderLease.
func TestConfig_LeaderLeaseDefault(t *testing.T) {
	t.Parallel()
	if got := (cdc.Config{}).WithDefaults().LeaderLease; got != cdc.DefaultLeaderLease {
		t.Fatalf("LeaderLease defaults to %v; want %v", got, cdc.DefaultLeaderLease)
	}
}
