package cli

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A relay started before 'outbox migrate' is not ready and says why, with
// the fix, in /readyz and once in its log; after the migration it becomes
// ready and publishes, without a restart. In both modes.
func TestRelay_BeforeMigrate_NotReadyWithTheFixThenGoesOn(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{modePolling, modeCDC} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testRelayBeforeMigrate(t, mode)
		})
	}
}

func testRelayBeforeMigrate(t *testing.T, mode string) {
	pool, schema := pgtest.Schema(t)
	if mode == modeCDC {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cdc.Remove(ctx, pool, schema, "", ""); err != nil {
				t.Logf("remove the CDC slot of %s: %v", schema, err)
			}
		})
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	env := map[string]string{
		"OUTBOX_DATABASE_URL":  pgtest.URL(),
		"OUTBOX_SCHEMA":        schema,
		"OUTBOX_KAFKA_BROKERS": strings.Join(cluster.ListenAddrs(), ","),
		"OUTBOX_POLL_INTERVAL": "50ms",
		"OUTBOX_METRICS_ADDR":  "127.0.0.1:0",
	}
	_, stderr, stop, done := startCLI(env, "relay", "--mode", mode, "--topic-route", "Order=orders", "--kafka-auto-create-topics")
	defer stop()
	fix := "run 'outbox migrate --schema " + schema + "'"
	stderr.WaitFor(t, "outbox tables missing", 30*time.Second, done)
	stderr.WaitFor(t, `"admin endpoint listening"`, 30*time.Second, done)
	base := "http://" + regexp.MustCompile(`"admin endpoint listening" addr=(\S+)`).FindStringSubmatch(stderr.String())[1]

	code, checks := readyz(t, base)
	if code != http.StatusServiceUnavailable || !strings.Contains(checks["outbox"], `no outbox tables in schema "`+schema+`": `+fix) {
		t.Fatalf("/readyz before migrate = %d %v; want 503 with the outbox check naming the fix", code, checks)
	}
	if !strings.Contains(stderr.String(), fix) {
		t.Errorf("the relay's log does not say %s:\n%s", fix, stderr)
	}

	release := func() {}
	if mode == modeCDC {
		// The CDC relay checks the mode once it found the tables: migrate
		// and switch while its setup waits.
		release = holdCDCSetup(t, pool, schema)
	}
	if res := runCLI(t, env, "migrate"); res.code != exitOK {
		t.Fatalf("migrate: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	if mode == modeCDC {
		if res := runCLI(t, env, "mode", "set", "cdc"); res.code != exitOK {
			t.Fatalf("mode set cdc: exit %d, stderr:\n%s", res.code, res.stderr)
		}
	}
	release()
	deadline := time.Now().Add(30 * time.Second)
	for code, checks = readyz(t, base); code != http.StatusOK; code, checks = readyz(t, base) {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after migrate = %d %v; want 200", code, checks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return st.Enqueue(ctx, tx, outbox.Message{AggregateType: "Order", AggregateID: "1", EventType: "OrderPlaced", Payload: []byte(`{}`)})
	}); err != nil {
		t.Fatal(err)
	}
	consumeOne(ctx, t, cluster.ListenAddrs(), "orders", stderr)
	stderr.WaitFor(t, "outbox tables found; the relay goes on", 10*time.Second, done)
	if n := strings.Count(stderr.String(), "outbox tables missing"); n != 1 {
		t.Errorf("the missing tables are logged %d times, want once:\n%s", n, stderr)
	}
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d, want 0; stderr:\n%s", code, stderr)
	}
}

// holdCDCSetup holds the advisory lock that serialises the setup of the CDC
// relays of schema (cdc's setupLockKey: FNV-1a of "outbox.cdc.setup:" and
// the schema), so that none sets up, or checks the mode, until the
// returned func releases it.
func holdCDCSetup(t *testing.T, pool *pgxpool.Pool, schema string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	h.Write([]byte("outbox.cdc.setup:" + schema))
	key := int64(h.Sum64())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		conn.Release()
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			t.Error(err)
		}
		conn.Release()
	}
}

// readyz returns /readyz's status code and checks.
func readyz(t *testing.T, base string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("/readyz is not JSON: %v\n%s", err, body)
	}
	return resp.StatusCode, r.Checks
}

// consumeOne waits for a record on topic.
func consumeOne(ctx context.Context, t *testing.T, brokers []string, topic string, logs *syncBuffer) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		n := 0
		cl.PollFetches(ctx).EachRecord(func(*kgo.Record) { n++ })
		if n > 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no record on %s; relay log:\n%s", topic, logs)
		}
	}
}

// The operations commands name missing tables with the fix, not with
// PostgreSQL's error.
func TestOpsCommands_BeforeMigrate_NameTheFix(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.Schema(t)
	env := map[string]string{"OUTBOX_DATABASE_URL": pgtest.URL(), "OUTBOX_SCHEMA": schema}
	want := `schema "` + schema + `"`
	fix := `: run 'outbox migrate --schema ` + schema + `'`
	for _, args := range [][]string{
		{"stats"},
		{"dlq", "list"},
		{"dlq", "list", "--group"},
		{"dlq", "show", "12"},
		{"dlq", "replay", "--group", "3f9a2c1b07d4e5a6"},
		{"dlq", "show", "0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f60"},
		{"dlq", "replay", "--all"},
		{"dlq", "discard", "0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f60", "--reason", "x"},
		{"replay", "--since", "2026-01-01"},
		{"cleanup", "--older-than", "7d"},
		{"cursor", "status"},
		{"cursor", "enable"},
	} {
		res := runCLI(t, env, args...)
		if res.code != exitError || !strings.Contains(res.stderr, want) || !strings.Contains(res.stderr, fix) ||
			strings.Contains(res.stderr, "SQLSTATE") {
			t.Errorf("outbox %s: exit %d, stderr:\n%s\nwant exit %d naming the schema and the fix%s", strings.Join(args, " "), res.code, res.stderr, exitError, fix)
		}
	}
}
