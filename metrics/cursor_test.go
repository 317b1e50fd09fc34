package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-dev/outbox/metrics"
)

// The cursor_* gauges export the snapshot's cursor as it is on each scrape.
func TestMetrics_CursorGaugesExportTheSnapshotsCursor(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	snap := func(context.Context) (metrics.Snapshot, error) {
		return metrics.Snapshot{Cursor: metrics.CursorSnapshot{Active: true, Position: 4242, Leading: true,
			SavedAge: 250 * time.Millisecond, LagMessages: 17, LagAge: 3 * time.Second}}, nil
	}
	if err := metrics.NewTable(reg, snap, time.Second); err != nil {
		t.Fatal(err)
	}
	got := gauges(t, reg)
	for name, want := range map[string]float64{
		"outbox_cursor_active": 1, "outbox_cursor_position": 4242, "outbox_cursor_leading": 1,
		"outbox_cursor_saved_age_seconds": 0.25, "outbox_cursor_lag_messages": 17, "outbox_cursor_lag_seconds": 3,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (exported %v), want %v", name, v, ok, want)
		}
	}
}

// In claim mode the cursor gauges are 0, not absent, so that alerts on them
// see a value.
func TestMetrics_CursorGaugesAreZeroInClaimMode(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if err := metrics.NewTable(reg, snapshotOf(), time.Second); err != nil {
		t.Fatal(err)
	}
	got := gauges(t, reg)
	for _, name := range []string{"outbox_cursor_active", "outbox_cursor_position", "outbox_cursor_leading",
		"outbox_cursor_saved_age_seconds", "outbox_cursor_lag_messages", "outbox_cursor_lag_seconds"} {
		if v, ok := got[name]; !ok || v != 0 {
			t.Errorf("%s = %v (exported %v), want 0", name, v, ok)
		}
	}
}

// gauges gathers reg's unlabelled gauges by name.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if g := m.GetGauge(); g != nil && len(m.GetLabel()) == 0 {
				out[mf.GetName()] = g.GetValue()
			}
		}
	}
	return out
}

// The relay_mode gauge is 1 for the snapshot's mode and 0 for the others,
// and absent when the mode is unknown.
func TestMetrics_RelayModeGaugeExportsTheRecordedMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"claim", "cursor", "cdc", ""} {
		reg := prometheus.NewRegistry()
		snap := func(context.Context) (metrics.Snapshot, error) { return metrics.Snapshot{Mode: mode}, nil }
		if err := metrics.NewTable(reg, snap, time.Second); err != nil {
			t.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "outbox_relay_mode" {
				continue
			}
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		want := map[string]float64{"claim": 0, "cursor": 0, "cdc": 0}
		if mode == "" {
			want = map[string]float64{}
		} else {
			want[mode] = 1
		}
		if len(got) != len(want) {
			t.Errorf("mode %q: outbox_relay_mode = %v, want %v", mode, got, want)
		}
		for m, v := range want {
			if got[m] != v {
				t.Errorf("mode %q: outbox_relay_mode{mode=%q} = %v, want %v", mode, m, got[m], v)
			}
		}
	}
}
