package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The demo runs below are not parallel: each is a whole system.

// 'outbox-lab demo' runs the system, prints the summary with every check
// passed, and exits 0.
func TestDemo_RunsAndExitsZeroWhenEveryCheckPasses(t *testing.T) {
	r := runCLI(t, nil, "demo", "--duration", "4s", "--rate", "10", "--data-dir", t.TempDir())
	if r.code != exitOK {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stdout, "  PASS  "); n != 5 || strings.Contains(r.stdout, "FAIL") {
		t.Errorf("want 5 passed checks and no failure:\n%s", r.stdout)
	}
}

// Ctrl-C ends the load early; the backlog still drains and the checks run.
func TestDemo_InterruptStopsTheLoadAndStillChecks(t *testing.T) {
	stdout, stderr, stop, done := startCLI(nil, "demo", "--duration", "10m", "--rate", "10", "--data-dir", t.TempDir())
	defer stop()
	stdout.WaitFor(t, "invoices", 60*time.Second, done) // the first progress line
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("exit %d after interrupt; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "PASS  nothing lost") {
		t.Errorf("no summary after interrupt:\n%s", stdout.String())
	}
}

// When the events cannot be delivered (here: no broker at the address
// given), the checks fail and the exit status is 1.
func TestDemo_ExitsOneWhenAnInvariantFails(t *testing.T) {
	r := runCLI(t, nil, "demo", "--duration", "1s", "--rate", "10", "--drain-timeout", "2s", "--kafka-brokers", "127.0.0.1:1",
		"--data-dir", t.TempDir())
	if r.code != exitError {
		t.Fatalf("exit %d; want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "FAIL  nothing lost") || !strings.Contains(r.stderr, "invariant violated") {
		t.Errorf("want the failed check in the summary and the error:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

func TestDemo_BadFlagIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--rate", "0"}, {"--duration", "0s"}, {"--schema-prefix", "Bad"}, {"--db", "postgres://u:secret@[::1"}} {
		r := runCLI(t, nil, append([]string{"demo"}, args...)...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d; want 2\n%s", args, r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "secret") {
			t.Errorf("%v: the error repeats the password: %s", args, r.stderr)
		}
	}
}

// The TLS and SASL flags are checked before anything starts (the data
// directory stays empty), each error names the flag, and the SASL password
// is never repeated.
func TestDemo_BadKafkaSecurityFlagFailsBeforeStartingNamingTheFlag(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-pw"
	brokers := []string{"--kafka-brokers", "127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		flag string
	}{
		{"PLAIN without a password", nil, append([]string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "u"}, brokers...), "--kafka-sasl-password"},
		{"a password without a mechanism", nil, append([]string{"--kafka-sasl-username", "u", "--kafka-sasl-password", pw}, brokers...), "--kafka-sasl-mechanism"},
		{"an unknown mechanism", map[string]string{"OUTBOX_KAFKA_SASL_PASSWORD": pw}, append([]string{"--kafka-sasl-mechanism", "GSSAPI", "--kafka-sasl-username", "u"}, brokers...), "--kafka-sasl-mechanism"},
		{"a CA without TLS", nil, append([]string{"--kafka-tls-ca", "ca.pem"}, brokers...), "--kafka-tls-ca"},
		{"a missing CA file", nil, append([]string{"--kafka-tls", "--kafka-tls-ca", "/nonexistent/ca.pem"}, brokers...), "--kafka-tls-ca"},
		{"a certificate without its key", nil, append([]string{"--kafka-tls", "--kafka-tls-cert", "c.pem"}, brokers...), "--kafka-tls-key"},
		{"TLS on the embedded broker", nil, []string{"--kafka-tls"}, "--kafka-tls"},
		{"SASL on the embedded broker", nil, []string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "u", "--kafka-sasl-password", pw}, "--kafka-sasl-mechanism"},
		{"a password on the embedded broker, by environment", map[string]string{"OUTBOX_KAFKA_SASL_PASSWORD": pw}, nil, "--kafka-sasl-password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := runCLI(t, tc.env, append([]string{"demo", "--duration", "1s", "--data-dir", dir}, tc.args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d; want 2\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.flag) {
				t.Errorf("the error does not name %s:\n%s", tc.flag, r.stderr)
			}
			if strings.Contains(tc.name, "embedded") && !strings.Contains(r.stderr, "--kafka-brokers") {
				t.Errorf("the error does not point to --kafka-brokers:\n%s", r.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, pw) {
				t.Errorf("the output repeats the password:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			}
			if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
				t.Errorf("the demo started before the flags were checked: data dir holds %v (err %v)", entries, err)
			}
		})
	}
}

// With --kafka-brokers and the SASL flags, every Kafka client of the demo
// authenticates: the cluster refuses any request before authentication,
// so a relay, consumer or topic reader without the credentials would fail a
// check. The password, given by its environment variable, appears neither
// in the output nor in demo.log.
func TestDemo_KafkaWithSASLAuthenticatesEveryClient(t *testing.T) {
	const pw = "demo-sasl-s3cret"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "demo", pw))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	r := runCLI(t, map[string]string{"OUTBOX_KAFKA_SASL_PASSWORD": pw}, "demo", "--duration", "3s", "--rate", "10",
		"--drain-timeout", "30s", "--data-dir", dir, "--kafka-brokers", strings.Join(cluster.ListenAddrs(), ","),
		"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "demo")
	if r.code != exitOK {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stdout, "  PASS  "); n != 5 || strings.Contains(r.stdout, "FAIL") {
		t.Errorf("want 5 passed checks and no failure:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "with SASL PLAIN as demo") {
		t.Errorf("the banner does not show the SASL mechanism and user:\n%s", r.stdout)
	}
	logs, err := os.ReadFile(filepath.Join(dir, "demo.log"))
	if err != nil {
		t.Fatalf("read demo.log: %v", err)
	}
	if strings.Contains(r.stdout+r.stderr+string(logs), pw) {
		t.Errorf("the password appears in the output or demo.log")
	}
}
