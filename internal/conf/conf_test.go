package conf_test

import (
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/conf"
)

var errInvalid = errors.New("pkg: invalid config")

// Each check is nil when its rule holds, and otherwise names the field and
// the rule, with the value it got; First wraps the first failing one in
// the package's sentinel.
func TestChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for nil
	}{
		{"required, set", conf.Required("Store", true), ""},
		{"required, missing", conf.Required("Store", false), "Store is required"},
		{"not empty", conf.NotEmpty("Group", "g"), ""},
		{"empty", conf.NotEmpty("Group", ""), "Group must not be empty"},
		{"at least, equal", conf.AtLeast("BatchSize", 1, 1), ""},
		{"at least, below", conf.AtLeast("BatchSize", 0, 1), "BatchSize must be at least 1, not 0"},
		{"at least, duration", conf.AtLeast("Lease", 500*time.Millisecond, time.Second), "Lease must be at least 1s, not 500ms"},
		{"positive", conf.Positive("RetryBase", time.Nanosecond), ""},
		{"positive, zero", conf.Positive("RetryBase", time.Duration(0)), "RetryBase must be positive, not 0s"},
		{"positive, negative float", conf.Positive("Rate", -1.5), "Rate must be positive, not -1.5"},
		{"not negative, zero", conf.NotNegative("Linger", time.Duration(0)), ""},
		{"not negative, negative", conf.NotNegative("Linger", -time.Second), "Linger must not be negative, not -1s"},
		{"rule holds", conf.Rule("Slot", true, "%q must match %s", "x", "re"), ""},
		{"rule broken", conf.Rule("Slot", false, "%q must match %s", "A-B", "^[a-z]+$"), `Slot "A-B" must match ^[a-z]+$`},
		{"bad", conf.Bad("Applier", "is required (or Inbox and Handler)"), "Applier is required (or Inbox and Handler)"},
		{"each, all good", conf.Each("Brokers", []string{"a:1", "b:2"}, conf.NotEmpty), ""},
		{"each, names the item", conf.Each("Brokers", []string{"a:1", "", ""}, conf.NotEmpty), "Brokers[1] must not be empty"},
		{"each, none", conf.Each("Brokers", nil, conf.NotEmpty), ""},
	} {
		got := ""
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		err := conf.First(errInvalid, nil, tc.err, conf.Bad("Later", "is not reached"))
		switch {
		case tc.want == "" && (!errors.Is(err, errInvalid) || !strings.HasSuffix(err.Error(), ": Later is not reached")):
			t.Errorf("%s: First passed over a nil check to %v, want the next one", tc.name, err)
		case tc.want != "" && (!errors.Is(err, errInvalid) || err.Error() != "pkg: invalid config: "+tc.want):
			t.Errorf("%s: First = %v, want %q wrapping the sentinel", tc.name, err, "pkg: invalid config: "+tc.want)
		}
	}
	if err := conf.First(errInvalid, nil, nil); err != nil {
		t.Errorf("First of passing checks = %v, want nil", err)
	}
	nested := errors.New("Limits.MaxHeaders -1 must not be negative")
	if err := conf.First(errInvalid, nested); !errors.Is(err, errInvalid) || !errors.Is(err, nested) {
		t.Errorf("First(%v) = %v, want both the sentinel and the nested error wrapped", nested, err)
	}
}

// Default sets a zero field and keeps a set one, of any comparable type.
func TestDefault(t *testing.T) {
	t.Parallel()
	var (
		n      int
		d      = -time.Second // negative is set: it means something
		s      string
		logger *slog.Logger
	)
	conf.Default(&n, 100)
	conf.Default(&d, 30*time.Second)
	conf.Default(&s, "outbox")
	conf.Default(&logger, slog.Default())
	if n != 100 || d != -time.Second || s != "outbox" || logger != slog.Default() {
		t.Errorf("after Default: %d, %v, %q, %p; want 100, -1s, outbox, slog.Default()", n, d, s, logger)
	}
}

// InstanceID is the host name, the process id and 8 random hex digits,
// new each time.
func TestInstanceID(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	re := regexp.MustCompile("^" + regexp.QuoteMeta(host+"-"+strconv.Itoa(os.Getpid())) + "-[0-9a-f]{8}$")
	a, b := conf.InstanceID(), conf.InstanceID()
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Errorf("InstanceID = %q, %q; want two distinct matches of %s", a, b, re)
	}
}
