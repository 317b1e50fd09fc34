package demo_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/internal/demo"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// run runs the demo for a short while and fails the test unless every
// check passed. The demo tests run one after another (not in parallel):
// each is a whole system, and the race detector slows SQLite a lot. The checks are the point: they read the databases and the
// topic after the run, independently of the progress counters.
func run(t *testing.T, cfg demo.Config) (demo.Summary, string) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if cfg.Duration == 0 {
		cfg.Duration = 5 * time.Second
	}
	cfg.Rate = 10 // light: the tests of other packages run meanwhile
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	sum, err := demo.Run(ctx, cfg, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if !sum.OK() || len(sum.Checks) != 5 {
		t.Fatalf("summary not OK: %+v\n%s", sum.Checks, out.String())
	}
	if sum.Orders == 0 || sum.Rejected == 0 || sum.Invoices < sum.Orders || sum.Reservations < sum.Orders || sum.Sent == 0 {
		t.Errorf("the load did too little: %+v", sum)
	}
	for _, want := range []string{"orders API  http://127.0.0.1:", "Summary:", "PASS  nothing lost"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	return sum, out.String()
}

func TestDemo_SQLiteAndEmbeddedBrokerKeepEveryInvariant(t *testing.T) {
	sum, out := run(t, demo.Config{})
	if sum.Dead != 0 || sum.Unsent != 0 || sum.Parked != 0 {
		t.Errorf("dead %d, unsent %d, parked %d; want none\n%s", sum.Dead, sum.Unsent, sum.Parked, out)
	}
}

// With chaos the relays are killed for real (their leases are left behind)
// and the broker is stopped and started again: the checks must still pass,
// and whatever was delivered twice must have been absorbed.
func TestDemo_ChaosKillsRelaysAndStopsTheBrokerAndTheInvariantsHold(t *testing.T) {
	sum, out := run(t, demo.Config{Chaos: true, Duration: 10 * time.Second, Seed: 7})
	if sum.RelayKills+sum.BrokerRestarts == 0 {
		t.Fatalf("no chaos was injected:\n%s", out)
	}
	t.Logf("relay kills %d, broker restarts %d, duplicates on the topic %d, absorbed %d",
		sum.RelayKills, sum.BrokerRestarts, sum.TopicDuplicates, sum.Duplicates)
	if sum.TopicDuplicates > 0 && sum.Duplicates == 0 {
		t.Errorf("%d duplicate records on the topic, none seen by the consumers", sum.TopicDuplicates)
	}
}

func TestDemo_PostgreSQL(t *testing.T) {
	prefix := pgtest.NewSchemaName(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, pgtest.URL())
		if err != nil {
			t.Logf("drop schemas: %v", err)
			return
		}
		defer c.Close(ctx)
		for _, s := range []string{"_orders", "_billing", "_inventory"} {
			if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{prefix + s}.Sanitize()+" CASCADE"); err != nil {
				t.Logf("drop schema: %v", err)
			}
		}
	})
	sum, out := run(t, demo.Config{DatabaseURL: pgtest.URL(), SchemaPrefix: prefix, Chaos: true, Duration: 6 * time.Second})
	if !strings.Contains(out, "PostgreSQL (schemas "+prefix+"_orders") {
		t.Errorf("not on PostgreSQL:\n%s", out)
	}
	_ = sum
}

func TestRun_BadConfigNamesTheField(t *testing.T) {
	t.Parallel()
	for field, cfg := range map[string]demo.Config{
		"Rate":         {Rate: -1},
		"Listen":       {Listen: "nowhere"},
		"SchemaPrefix": {SchemaPrefix: "Bad-Prefix"},
		"KafkaBrokers": {KafkaBrokers: []string{"x"}},
		"DatabaseURL":  {DatabaseURL: "postgres://u:secret@[::1"},
		// The embedded broker speaks plaintext only.
		"KafkaSecurity": {KafkaSecurity: kafka.Security{SASLMechanism: kafka.SASLPlain, Username: "u", Password: "secret"}},
		"Security.Password": {KafkaBrokers: []string{"127.0.0.1:1"},
			KafkaSecurity: kafka.Security{SASLMechanism: kafka.SASLPlain, Username: "u"}},
		"Security.SASLMechanism": {KafkaBrokers: []string{"127.0.0.1:1"},
			KafkaSecurity: kafka.Security{Username: "u", Password: "secret"}},
		"Security.CAFile": {KafkaBrokers: []string{"127.0.0.1:1"},
			KafkaSecurity: kafka.Security{TLS: true, CAFile: "/nonexistent/ca.pem"}},
	} {
		_, err := demo.Run(context.Background(), cfg, &bytes.Buffer{})
		if !errors.Is(err, demo.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err %v; want ErrInvalidConfig naming it", field, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error repeats the password: %v", field, err)
		}
	}
}
