package lab

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

func TestExample_BadFlagsAreUsageErrorsNamingTheFlag(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OUTBOX_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"example", "orders", "--listen", "nope"}, "--listen"},
		{[]string{"example", "orders", "--order-placed-version", "3"}, "--order-placed-version"},
		{[]string{"example", "orders", "--max-body-bytes", "0"}, "--max-body-bytes"},
		{[]string{"example", "billing", "--handler-max-attempts", "0"}, "--handler-max-attempts"},
		{[]string{"example", "billing", "--handler-retry-base", "1s", "--handler-retry-max", "1ms"}, "--handler-retry-max"},
		{[]string{"example", "billing", "--stats-interval", "0s"}, "--stats-interval"},
		{[]string{"example", "inventory", "--stock", "BOOK-1=many"}, "--stock"},
		{[]string{"example", "inventory", "--stock", "a b=1"}, "--stock"},
		{[]string{"example", "teleport"}, "teleport"},
	} {
		r := runCLI(t, env, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.flag) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %s", c.args, r.code, r.stderr, exitUsage, c.flag)
		}
	}
}

func TestExampleOrders_WithoutOutboxTablesSaysToMigrate(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.Schema(t) // empty: no outbox table
	r := runCLI(t, map[string]string{"OUTBOX_DATABASE_URL": pgtest.URL()}, "example", "orders", "--schema", schema,
		"--orders-schema", schema, "--listen", "127.0.0.1:0")
	if r.code != exitError || !strings.Contains(r.stderr, "outbox migrate") {
		t.Fatalf("exit %d, stderr %q; want %d telling to run outbox migrate", r.code, r.stderr, exitError)
	}
}

var ordersAddrRe = regexp.MustCompile(`orders listening on (http://\S+)`)

func TestExampleOrders_ServesTheAPIAndStopsCleanly(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	env := map[string]string{"OUTBOX_DATABASE_URL": pgtest.URL(), "OUTBOX_SCHEMA": schema}
	if r := runCLI(t, env, "migrate"); r.code != exitOK {
		t.Fatalf("migrate: %d %s", r.code, r.stderr)
	}
	stdout, stderr, cancel, done := startCLI(env, "example", "orders", "--listen", "127.0.0.1:0", "--orders-schema", schema)
	defer cancel()
	stdout.WaitFor(t, "orders listening on", 30*time.Second, done)
	url := ordersAddrRe.FindStringSubmatch(stdout.String())[1]

	resp, err := http.Post(url+"/orders", "application/json", bytes.NewBufferString(`{"customerId":"C-1","amount":"150.00","currency":"EUR"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /orders: %d", resp.StatusCode)
	}
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, "outbox_messages"}.Sanitize()+
		" WHERE event_type = 'OrderPlaced' AND event_version = 2 AND topic = 'orders'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d OrderPlaced v2 events in the outbox (%v); want 1", n, err)
	}
	cancel()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("exit %d after stop; stderr:\n%s", code, stderr.String())
	}
}

// --instance-id is checked by the consumer's config, which the command
// reaches only after it set up its tables.
func TestExampleConsumers_BadInstanceIDIsAUsageErrorNamingTheFlag(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	env := exampleEnv(t, pool, schema, "127.0.0.1:1")
	if r := runCLI(t, env, "migrate"); r.code != exitOK {
		t.Fatalf("migrate: %d %s", r.code, r.stderr)
	}
	for _, name := range []string{"billing", "inventory"} {
		r := runCLI(t, env, "example", name, "--instance-id", "pod 1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--instance-id") {
			t.Errorf("example %s --instance-id 'pod 1': exit %d, stderr %q; want %d naming --instance-id", name, r.code, r.stderr, exitUsage)
		}
	}
}

// Each example process creates its tables at start; two starting at once
// must both come up.
func TestExampleConsumers_TwoStartingAtOnceBothCreateTheirTablesAndRun(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", SeedTopics: []string{"orders"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	env := exampleEnv(t, pool, schema, strings.Join(b.Addrs(), ","))
	if r := runCLI(t, env, "migrate"); r.code != exitOK {
		t.Fatalf("migrate: %d %s", r.code, r.stderr)
	}
	type running struct {
		stderr *syncBuffer
		cancel context.CancelFunc
		done   <-chan int
	}
	var all []running
	for _, name := range []string{"billing", "billing", "inventory", "inventory"} {
		_, stderr, cancel, done := startCLI(env, "example", name)
		defer cancel()
		all = append(all, running{stderr, cancel, done})
	}
	for _, r := range all {
		r.stderr.WaitFor(t, "consumer started", 30*time.Second, r.done)
	}
	for _, r := range all {
		r.cancel()
		if code := exitCode(t, r.done, r.stderr); code != exitOK {
			t.Errorf("exit %d after stop; stderr:\n%s", code, r.stderr.String())
		}
	}
}

// exampleEnv is the environment of the example consumers on schema (the
// outbox) with the inbox, billing and inventory schemas beside it, dropped
// at the test's end, and brokers as the Kafka seed brokers.
func exampleEnv(t *testing.T, pool *pgxpool.Pool, schema, brokers string) map[string]string {
	t.Helper()
	t.Cleanup(func() {
		for _, s := range []string{"_inbox", "_billing", "_inventory"} {
			_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema + s}.Sanitize()+" CASCADE")
		}
	})
	return map[string]string{
		"OUTBOX_DATABASE_URL": pgtest.URL(), "OUTBOX_SCHEMA": schema, "OUTBOX_KAFKA_BROKERS": brokers,
		"OUTBOX_INBOX_SCHEMA": schema + "_inbox", "OUTBOX_BILLING_SCHEMA": schema + "_billing",
		"OUTBOX_INVENTORY_SCHEMA": schema + "_inventory",
	}
}
