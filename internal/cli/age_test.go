package cli

import (
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute,
		"45s": 45 * time.Second, "0d": 0, " 2d ": 48 * time.Hour, "1d30m": 24*time.Hour + 30*time.Minute,
	} {
		got, err := parseAge(in)
		if err != nil || got != want {
			t.Errorf("parseAge(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "7", "d", "7x", "-1h", "1.5d", "7d7d", "h1"} {
		if got, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q) = %s, want an error", in, got)
		}
	}
}

func TestFormatAge(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		7 * 24 * time.Hour: "7d", 36 * time.Hour: "1d12h0m0s", time.Minute: "1m0s", 0: "0s",
	} {
		if got := formatAge(d); got != want {
			t.Errorf("formatAge(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		ago  bool
		want time.Time
	}{
		{"2026-03-01T08:30:00Z", false, time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC)},
		{"2026-03-01", false, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"24h", true, now.Add(-24 * time.Hour)},
		{"7d", true, now.Add(-7 * 24 * time.Hour)},
	} {
		got, err := parseTime(tc.in, now, tc.ago)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("parseTime(%q, %v) = %v, %v; want %v", tc.in, tc.ago, got, err, tc.want)
		}
	}
	if _, err := parseTime("24h", now, false); err == nil {
		t.Error("parseTime(24h) without ages allowed succeeded")
	}
}
