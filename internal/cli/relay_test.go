package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func TestRelayHelp_ShowsEnvironmentVariablesAndExamples(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "relay", "--help")
	if res.code != exitOK {
		t.Fatalf("relay --help: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	for _, want := range []string{
		"OUTBOX_DATABASE_URL", "OUTBOX_KAFKA_BROKERS", "OUTBOX_KAFKA_SASL_PASSWORD", "OUTBOX_BATCH_SIZE",
		"OUTBOX_MAX_RUN", "--max-run-bytes", "(default 1048576)", "--topic-route", "Examples:", "SIGTERM",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("relay --help does not mention %s", want)
		}
	}
}

func TestRelay_BadSettingFailsNamingTheFlag(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: every case must fail before connecting.
	db := "postgres://app@127.0.0.1:1/app"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--batch-size", "0"}, "--batch-size must be at least 1"},
		{[]string{"--batch-size", "many"}, "--batch-size"},
		{[]string{"--max-run", "0"}, "--max-run must be at least 1 and at most --batch-size (100), not 0"},
		{[]string{"--batch-size", "20", "--max-run", "21"}, "--max-run must be at least 1 and at most --batch-size (20), not 21"},
		{[]string{"--max-run-bytes", "0"}, "--max-run-bytes must be at least 1"},
		{[]string{"--workers", "-1"}, "--workers must be at least 1"},
		{[]string{"--lease", "100ms"}, "--lease must be at least 1s"},
		{[]string{"--lease", "10s", "--publish-timeout", "10s"}, "--publish-timeout must be positive and shorter than --lease"},
		{[]string{"--poll-interval", "0s"}, "--poll-interval must be at least 1ms"},
		{[]string{"--linger", "-1ms"}, "--linger must not be negative"},
		{[]string{"--linger-above", "-5"}, "--linger-above must not be negative"},
		{[]string{"--lease", "10s", "--linger", "5s"}, "--linger must not be negative and must be shorter than the publish timeout"},
		{[]string{"--max-attempts", "0"}, "--max-attempts must be at least 1"},
		{[]string{"--retry-base", "2s", "--retry-max", "1s"}, "--retry-max must be at least --retry-base"},
		{[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout must not be negative"},
		{[]string{"--topic-route", "Order"}, "--topic-route must be AggregateType=topic"},
		{[]string{"--topic-route", "Order=a,Order=b"}, "--topic-route routes aggregate type \"Order\" twice"},
		{[]string{"--topic-route", "Order=bad topic"}, "--topic-route"},
		{[]string{"--kafka-brokers", "kafka-without-port"}, "--kafka-brokers must be a list of host:port"},
		{[]string{"--kafka-sasl-mechanism", "GSSAPI", "--kafka-sasl-username", "u", "--kafka-sasl-password", "s3cret-pw"}, "--kafka-sasl-mechanism"},
		{[]string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "u"}, "--kafka-sasl-password"},
		{[]string{"--kafka-tls-ca", "/ca.pem"}, "--kafka-tls-ca"},
		{[]string{"--max-headers", "0"}, "--max-headers must be positive"},
		{[]string{"--max-header-value-bytes", "-1"}, "--max-header-value-bytes must be positive"},
		{[]string{"--schema", "Bad-Schema"}, "--schema"},
		{[]string{"--log-level", "loud"}, "--log-level must be debug, info, warn or error"},
		{[]string{"--log-format", "xml"}, "--log-format must be text or json"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"extra-arg"}, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			args := append([]string{"relay", "--database-url", db}, tt.args...)
			res := runCLI(t, nil, args...)
			if res.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, exitUsage, res.stderr)
			}
			if !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr does not contain %q:\n%s", tt.want, res.stderr)
			}
			if !strings.Contains(res.stderr, "outbox relay --help") {
				t.Errorf("stderr does not point to --help:\n%s", res.stderr)
			}
			if strings.Contains(res.stderr, "s3cret-pw") {
				t.Errorf("stderr shows the SASL password:\n%s", res.stderr)
			}
		})
	}
}

// The relay command publishes what is in the outbox, and on cancellation
// (SIGINT/SIGTERM in main) stops gracefully with exit status 0. Its logs
// name the relay and schema but never the passwords.
func TestRelay_PublishesThenStopsGracefullyWithExitZero(t *testing.T) {
	t.Parallel()
	// Trust authentication accepts any database password: use one to check
	// that it is never logged. The broker checks the SASL password.
	const dbPassword, saslPassword = "db-s3cret-pw", "sasl-s3cret-pw"
	pool, schema := pgtest.Schema(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "relay", saslPassword))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(cluster.Close)
	brokers := strings.Join(cluster.ListenAddrs(), ",")

	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatalf("parse test URL: %v", err)
	}
	u.User = url.UserPassword(u.User.Username(), dbPassword)

	env := map[string]string{
		"OUTBOX_DATABASE_URL":         u.String(),
		"OUTBOX_SCHEMA":               schema,
		"OUTBOX_KAFKA_BROKERS":        brokers,
		"OUTBOX_POLL_INTERVAL":        "50ms",
		"OUTBOX_LOG_LEVEL":            "debug",
		"OUTBOX_SHUTDOWN_TIMEOUT":     "5s",
		"OUTBOX_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
		"OUTBOX_KAFKA_SASL_USERNAME":  "relay",
		"OUTBOX_KAFKA_SASL_PASSWORD":  saslPassword,
		"OUTBOX_METRICS_ADDR":         "127.0.0.1:0",
		"OUTBOX_STATUS_TOKEN":         "status-secret",
	}
	if res := runCLI(t, env, "migrate"); res.code != exitOK {
		t.Fatalf("migrate: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatalf("pgstore.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg := outbox.Message{AggregateType: "Order", AggregateID: "order-42", EventType: "OrderPlaced", Payload: []byte(`{"total":42}`)}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msg) }); err != nil {
		t.Fatalf("enqueue: %v", err)
	}

	_, stderr, stop, done := startCLI(env, "relay", "--relay-id", "cli-test-relay",
		"--topic-route", "Order=orders", "--kafka-auto-create-topics")
	defer stop()

	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.AllowAutoTopicCreation(), kgo.SASL(scram.Auth{User: "relay", Pass: saslPassword}.AsSha256Mechanism()))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer consumer.Close()
	var got *kgo.Record
	for got == nil {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record on topic orders within 30s; relay stderr:\n%s", stderr.String())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if got == nil {
				got = r
			}
		})
	}
	if string(got.Key) != "order-42" || string(got.Value) != `{"total":42}` {
		t.Errorf("record key %q value %q, want order-42 and the payload", got.Key, got.Value)
	}
	checkAdminEndpoint(t, stderr)

	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d after cancel, want 0; stderr:\n%s", code, stderr.String())
	}
	logs := stderr.String()
	for _, want := range []string{"relay starting", "relay_id=cli-test-relay", "schema=" + schema, "relay exited", ":xxxxx@"} {
		if !strings.Contains(logs, want) {
			t.Errorf("relay logs do not contain %q:\n%s", want, logs)
		}
	}
	for _, secret := range []string{dbPassword, saslPassword, "status-secret"} {
		if strings.Contains(logs, secret) {
			t.Errorf("relay logs show the password %q:\n%s", secret, logs)
		}
	}
}

// checkAdminEndpoint finds the relay's admin address in its logs and checks
// the wiring: the metrics count the published message (SENT may be
// PostgreSQL's estimate, see ops.Stats, so the test reads PENDING), /readyz finds the
// database, the outbox tables and the broker, and the status page answers.
func checkAdminEndpoint(t *testing.T, stderr *syncBuffer) {
	t.Helper()
	re := regexp.MustCompile(`"admin endpoint listening" addr=(\S+)`)
	m := re.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no admin endpoint in the relay's logs:\n%s", stderr.String())
	}
	base := "http://" + m[1]
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := get("/metrics")
		if strings.Contains(body, "outbox_relay_published_total 1") && strings.Contains(body, `outbox_messages{status="PENDING"} 0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics does not count the published message:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get("/readyz"); code != http.StatusOK || !strings.Contains(body, `"kafka":"ok"`) {
		t.Errorf("/readyz = %d %s; want 200 with database and kafka ok", code, body)
	}
	if code, body := get("/"); code != http.StatusOK || !strings.Contains(body, "outbox status") {
		t.Errorf("status page = %d; want 200 with the page", code)
	}
}

// The relay lingers up to 20ms above 1,200 messages/s unless told otherwise;
// --linger 0 turns lingering off and --linger-above 0 lingers at any rate,
// which relay.Config spells as negative values (its zero is the default).
func TestRelayFlags_LingerDefaultsAndZeroes(t *testing.T) {
	for _, c := range []struct {
		args        []string
		linger      time.Duration
		lingerAbove float64
	}{
		{nil, 20 * time.Millisecond, 1200},
		{[]string{"--linger", "0"}, -1, 1200},
		{[]string{"--linger", "20ms", "--linger-above", "0"}, 20 * time.Millisecond, -1},
	} {
		fs := pflag.NewFlagSet("relay", pflag.ContinueOnError)
		var rf relayFlags
		addRelayFlags(fs, &rf)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := rf.check(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		cfg := rf.config(nil, nil, nil).WithDefaults()
		if cfg.Linger != c.linger || cfg.LingerAbove != c.lingerAbove {
			t.Errorf("%v: Linger %v, LingerAbove %v; want %v, %v", c.args, cfg.Linger, cfg.LingerAbove, c.linger, c.lingerAbove)
		}
	}
}

// The header limits the relay checks at publish are those of its flags, so
// that an operator can match the writers' outbox.Limits.
func TestKafkaFlags_HeaderLimitsReachTheSink(t *testing.T) {
	t.Parallel()
	var k kafkaFlags
	fs := pflag.NewFlagSet("relay", pflag.ContinueOnError)
	addKafkaFlags(fs, &k)
	if err := fs.Parse([]string{"--max-headers", "100", "--max-header-value-bytes", "20000"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := k.config(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits.MaxHeaders != 100 || cfg.Limits.MaxHeaderValueBytes != 20000 {
		t.Errorf("kafka.Config.Limits = %+v, want MaxHeaders 100 and MaxHeaderValueBytes 20000", cfg.Limits)
	}
}
