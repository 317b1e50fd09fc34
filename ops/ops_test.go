package ops_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/ops"
)

func TestNew_InvalidConfigNamesField(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, "public")
	for field, cfg := range map[string]ops.Config{
		"Schema": {Schema: "Bad-Schema"},
		"Top":    {Top: -1},
	} {
		if _, err := ops.New(pool, cfg); !errors.Is(err, ops.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error = %v, want ErrInvalidConfig naming it", field, err)
		}
	}
	if _, err := ops.New(nil, ops.Config{}); !errors.Is(err, ops.ErrInvalidConfig) {
		t.Errorf("nil pool: error = %v, want ErrInvalidConfig", err)
	}
}

func TestDefaultActor_IsUserAtHost(t *testing.T) {
	t.Setenv("USER", "alice")
	if a := ops.DefaultActor(); !strings.HasPrefix(a, "alice@") || len(a) <= len("alice@") {
		t.Errorf("DefaultActor() = %q, want alice@<host>", a)
	}
}
