package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-dev/outbox/admin"
	"github.com/outbox-dev/outbox/internal/freeport"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// relayEnv is the environment of a relay on f's outbox that publishes to a
// new in-memory broker, with its admin endpoint on a free port.
func relayEnv(t testing.TB, f *opsFixture) map[string]string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	env := map[string]string{
		"OUTBOX_KAFKA_BROKERS":            strings.Join(cluster.ListenAddrs(), ","),
		"OUTBOX_KAFKA_AUTO_CREATE_TOPICS": "true",
		"OUTBOX_DEFAULT_TOPIC":            "events",
		"OUTBOX_POLL_INTERVAL":            "50ms",
		"OUTBOX_METRICS_ADDR":             "127.0.0.1:0",
		"OUTBOX_SHUTDOWN_TIMEOUT":         "5s",
	}
	for k, v := range f.env {
		env[k] = v
	}
	env["OUTBOX_LOG_LEVEL"] = "info"
	return env
}

// enqueue writes n PENDING messages over 100 aggregates.
func (f *opsFixture) enqueue(t testing.TB, n int) {
	t.Helper()
	f.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers, status, attempts, last_error, created_at)
		SELECT gen_random_uuid(), 'Order', (g % 100)::text, 'OrderPlaced', 1, '{}', 'application/json', '{}', 'PENDING', 0, '', now()
		FROM generate_series(1, $1) g`, n)
}

// waitSent waits until no message is left unsent. Its query is one step
// into the index of unsent messages, so that it costs the relay nothing.
func (f *opsFixture) waitSent(t testing.TB, within time.Duration, stderr *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(within)
	const unsent = "SELECT count(*) FROM (SELECT 1 FROM {{schema}}.outbox_messages WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT') LIMIT 1) u"
	for f.queryInt(t, unsent) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("messages still unsent after %s; relay output:\n%s", within, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adminAddr is the admin endpoint's address from the relay's logs.
func adminAddr(t testing.TB, stderr *syncBuffer, done <-chan int) string {
	t.Helper()
	stderr.WaitFor(t, `"admin endpoint listening"`, 30*time.Second, done)
	m := regexp.MustCompile(`"admin endpoint listening" addr=(\S+)`).FindStringSubmatch(stderr.String())
	return "http://" + m[1]
}

// A relay started while its database is away waits for it, in either
// mode, not ready and saying why, with its admin endpoint up; once the
// database answers, it publishes. A restart during a database outage must
// not leave the relay down after the database is back.
func TestRelay_DatabaseAwayAtStart_WaitsThenPublishes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{modePolling, modeCDC} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testDatabaseAwayAtStart(t, mode)
		})
	}
}

func testDatabaseAwayAtStart(t *testing.T, mode string) {
	f := newOpsFixture(t)
	if mode == modeCDC {
		t.Cleanup(func() { dropSlot(t, f) })
		f.mustRun(t, exitOK, "mode", "set", "cdc")
	}
	f.enqueue(t, 20)
	proxy := pgtest.NewProxy(t)
	env := relayEnv(t, f)
	env["OUTBOX_DATABASE_URL"] = proxy.URL(t)

	_, stderr, stop, done := startCLI(env, "relay", "--mode", mode)
	defer stop()
	base := adminAddr(t, stderr, done)
	stderr.WaitFor(t, "database not reachable; waiting for it", 30*time.Second, done)

	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Ready  bool
		Checks map[string]string
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || ready.Ready || !strings.Contains(ready.Checks["database"], "refused") {
		t.Fatalf("/readyz while the database is away: %d %+v (%v); want 503 with the database's reason", resp.StatusCode, ready, err)
	}
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages WHERE status = 'SENT'"); n != 0 {
		t.Fatalf("%d messages sent through a closed proxy", n)
	}

	proxy.Open(t)
	f.waitSent(t, 60*time.Second, stderr)
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d after cancel, want 0; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "database reachable") {
		t.Errorf("relay logs do not say the database is reachable:\n%s", stderr.String())
	}
}

// dropSlot drops the replication slot and publication of a CDC relay on
// f's schema (their default names), which would otherwise hold WAL on the
// shared server.
func dropSlot(t *testing.T, f *opsFixture) {
	name := "outbox_" + f.schema
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.pool.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", name); err != nil {
		t.Logf("drop slot %s: %v", name, err)
	}
	if _, err := f.pool.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Logf("drop publication %s: %v", name, err)
	}
}

// A refusal that waiting cannot mend ends the relay at once, with the
// reason and what to fix; a malformed URL is a usage error.
func TestRelay_DatabaseRefusesOrURLIsMalformed_ExitsWithTheReason(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	unknownRole, unknownDB := *u, *u
	unknownRole.User = url.User("no_such_role_i34")
	unknownDB.Path = "/no_such_database_i34"
	for _, c := range []struct {
		name, url, mode string
		code            int
		want            []string
	}{
		{"unknown role", unknownRole.String(), modePolling, exitError, []string{"28000", "fix the user in --database-url", "the relay does not wait for it"}},
		{"unknown role in cdc mode", unknownRole.String(), modeCDC, exitError, []string{"28000", "fix the user in --database-url"}},
		{"unknown database", unknownDB.String(), modePolling, exitError, []string{"3D000", "the database does not exist", "no_such_database_i34"}},
		{"malformed URL", "postgres://app@127.0.0.1:notaport/app", modePolling, exitUsage, []string{"--database-url must be a PostgreSQL URL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"OUTBOX_DATABASE_URL": c.url, "OUTBOX_METRICS_ADDR": "127.0.0.1:0", "OUTBOX_KAFKA_BROKERS": "127.0.0.1:1"}
			res := runCLI(t, env, "relay", "--mode", c.mode)
			if res.code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, c.code, res.stderr)
			}
			for _, want := range c.want {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
				}
			}
			if strings.Contains(res.stderr, "database not reachable; waiting") {
				t.Errorf("the relay waited for a refusal that waiting does not mend:\n%s", res.stderr)
			}
		})
	}
}

// With the default admin address taken (a second relay on one host), the
// relay warns how to choose another address and runs, and publishes,
// without the endpoint.
func TestRelay_DefaultAdminAddressTaken_RunsWithoutTheEndpoint(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", admin.DefaultAddr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE): // taken by someone else: as good
	case err != nil:
		t.Fatal(err)
	default:
		defer ln.Close()
	}
	f := newOpsFixture(t)
	f.enqueue(t, 20)
	env := relayEnv(t, f)
	delete(env, "OUTBOX_METRICS_ADDR")

	_, stderr, stop, done := startCLI(env, "relay")
	defer stop()
	stderr.WaitFor(t, "admin endpoint off: its default address is in use", 30*time.Second, done)
	if !strings.Contains(stderr.String(), "127.0.0.1:0") {
		t.Errorf("the warning does not say how to choose another address:\n%s", stderr.String())
	}
	f.waitSent(t, 60*time.Second, stderr)
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d, want 0; stderr:\n%s", code, stderr.String())
	}
}

// An admin address given explicitly, by flag or variable, that cannot be
// bound fails the start, naming the flag and what to do.
func TestRelay_GivenAdminAddressTaken_Fails(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() }) // after the parallel subtests
	taken := ln.Addr().String()
	base := map[string]string{"OUTBOX_DATABASE_URL": "postgres://app@127.0.0.1:1/app", "OUTBOX_KAFKA_BROKERS": "127.0.0.1:1"}
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"flag":     {base, []string{"relay", "--metrics-addr", taken}},
		"variable": {merge(base, map[string]string{"OUTBOX_METRICS_ADDR": taken}), []string{"relay"}},
		"cdc mode": {base, []string{"relay", "--mode", "cdc", "--metrics-addr", taken}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := runCLI(t, c.env, c.args...)
			if res.code != exitUsage || !strings.Contains(res.stderr, "--metrics-addr "+taken+" is in use") ||
				!strings.Contains(res.stderr, "127.0.0.1:0") {
				t.Fatalf("exit %d, want %d naming --metrics-addr and what to do; stderr:\n%s", res.code, exitUsage, res.stderr)
			}
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// drain reads and closes resp's body.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// A relay started while its broker is away runs, not ready and saying
// why, and publishes once the broker answers.
func TestRelay_BrokerAwayAtStart_WaitsThenPublishes(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.enqueue(t, 20)
	port, err := freeport.Port() // the broker listens there later
	if err != nil {
		t.Fatal(err)
	}
	env := relayEnv(t, f)
	env["OUTBOX_KAFKA_BROKERS"] = fmt.Sprintf("127.0.0.1:%d", port)

	_, stderr, stop, done := startCLI(env, "relay")
	defer stop()
	base := adminAddr(t, stderr, done)
	stderr.WaitFor(t, "Kafka brokers not reachable yet", 30*time.Second, done)
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"database":"ok"`) || strings.Contains(string(body), `"kafka":"ok"`) {
		t.Fatalf("/readyz while the broker is away: %d %s; want 503 naming kafka", resp.StatusCode, body)
	}

	cluster, err := kfake.NewCluster(kfake.Ports(port), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	f.waitSent(t, 2*time.Minute, stderr)
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d, want 0; stderr:\n%s", code, stderr.String())
	}
}
