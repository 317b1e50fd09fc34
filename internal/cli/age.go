package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ageRe splits an age into whole days and the rest: "7d", "1d12h", "36h".
var ageRe = regexp.MustCompile(`^(?:(\d+)d)?(.*)$`)

// parseAge parses a duration that may start with whole days: "7d", "1d12h",
// "36h", "90m", "45s" (the part after the days is a Go duration). It
// refuses negative values.
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	m := ageRe.FindStringSubmatch(s)
	if s == "" || m == nil || (m[1] == "" && m[2] == "") {
		return 0, fmt.Errorf("%q is not a duration like 7d, 36h, 90m or 1d12h", s)
	}
	var d time.Duration
	if m[1] != "" {
		days, err := strconv.Atoi(m[1])
		if err != nil || days > 100*365 {
			return 0, fmt.Errorf("%q: too many days", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	}
	if m[2] != "" {
		rest, err := time.ParseDuration(m[2])
		if err != nil || rest < 0 {
			return 0, fmt.Errorf("%q is not a duration like 7d, 36h, 90m or 1d12h", s)
		}
		d += rest
	}
	return d, nil
}

// ageValue is a pflag.Value for durations given as parseAge accepts.
type ageValue struct{ d *time.Duration }

func (v ageValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return formatAge(*v.d)
}

func (v ageValue) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (ageValue) Type() string { return "duration" }

// formatAge writes d with whole days first: 7d, 1d12h0m0s, 36m0s.
func formatAge(d time.Duration) string {
	const day = 24 * time.Hour
	days := d / day
	rest := d % day
	switch {
	case days == 0:
		return rest.String()
	case rest == 0:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%s", days, rest)
}

// parseTime parses a point in time: RFC 3339 ("2026-03-01T12:00:00Z"), a
// date ("2026-03-01", midnight UTC), or, when agoAllowed, an age before now
// ("24h", "7d").
func parseTime(s string, now time.Time, agoAllowed bool) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if agoAllowed {
		if d, err := parseAge(s); err == nil {
			return now.Add(-d), nil
		}
		return time.Time{}, fmt.Errorf("%q is not a time like 2026-03-01T12:00:00Z, a date like 2026-03-01, or an age like 24h or 7d", s)
	}
	return time.Time{}, fmt.Errorf("%q is not a time like 2026-03-01T12:00:00Z or a date like 2026-03-01", s)
}
