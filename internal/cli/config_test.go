package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.yaml.in/yaml/v3"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// writeConfig writes a config file with mode and returns its path.
func writeConfig(t *testing.T, mode os.FileMode, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.yaml")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

// shownKey is a key of 'outbox config' output: its value as YAML reads it
// and the source its comment names.
type shownKey struct {
	value  any
	source string
}

// parseShown parses the output of 'outbox config'.
func parseShown(t *testing.T, out string) map[string]shownKey {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil || len(doc.Content) != 1 {
		t.Fatalf("outbox config printed no YAML mapping (%v):\n%s", err, out)
	}
	m := doc.Content[0]
	keys := map[string]shownKey{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		var v any
		if err := m.Content[i+1].Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys[m.Content[i].Value] = shownKey{value: v, source: strings.TrimPrefix(m.Content[i+1].LineComment, "# ")}
	}
	_, defaults, _ := strings.Cut(out, "# "+defaultsHeading+"\n")
	for _, line := range strings.Split(strings.TrimSpace(defaults), "\n") {
		var kv map[string]any
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(line, "# ")), &kv); err != nil || len(kv) != 1 {
			t.Fatalf("outbox config printed %q among the defaults: %v", line, err)
		}
		for k, v := range kv {
			keys[k] = shownKey{value: v, source: "default"}
		}
	}
	return keys
}

// probeProgram is outbox with one more command, probe, which has the
// relay's Kafka flags and prints --schema, --kafka-brokers and
// --kafka-tls: what a command runs with.
func probeProgram(env map[string]string) Program {
	probe := func(x *App) *cobra.Command {
		var k kafkaFlags
		cmd := &cobra.Command{Use: "probe", GroupID: "test", RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(x.Stdout(), "%s|%s|%t", x.a.schema, strings.Join(k.brokers, ","), k.tls)
			return err
		}}
		addKafkaFlags(cmd.Flags(), &k)
		return cmd
	}
	return Program{LookupEnv: mapEnv(env), Groups: []*cobra.Group{{ID: "test", Title: "Test:"}}, Commands: []func(*App) *cobra.Command{probe}}
}

// runProgram runs p's command line in-process.
func runProgram(t *testing.T, p Program, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
	code := p.Main(ctx, args, &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// For a string, a list and a bool flag: the command line beats the
// environment, which beats the config file, which beats the default; both
// in what a command runs with and in what 'outbox config' shows.
func TestConfig_FlagBeatsEnvBeatsFileBeatsDefault(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, 0o600, "schema: s_file\nkafka-brokers: [f1:9092, f2:9092]\nkafka-tls: true\n")
	env := map[string]string{"OUTBOX_SCHEMA": "s_env", "OUTBOX_KAFKA_BROKERS": "e1:9092,e2:9092", "OUTBOX_KAFKA_TLS": "false"}
	flags := []string{"--schema", "s_flag", "--kafka-brokers", "x1:9092", "--kafka-tls=true"}
	tests := []struct {
		name  string
		env   map[string]string
		flags []string
		file  bool
		want  map[string]shownKey
		runs  string
	}{
		{"flag", env, flags, true, map[string]shownKey{
			"schema": {"s_flag", "flag"}, "kafka-brokers": {[]any{"x1:9092"}, "flag"}, "kafka-tls": {true, "flag"},
		}, "s_flag|x1:9092|true"},
		{"env", env, nil, true, map[string]shownKey{
			"schema":        {"s_env", "env OUTBOX_SCHEMA"},
			"kafka-brokers": {[]any{"e1:9092", "e2:9092"}, "env OUTBOX_KAFKA_BROKERS"},
			"kafka-tls":     {false, "env OUTBOX_KAFKA_TLS"},
		}, "s_env|e1:9092,e2:9092|false"},
		{"file", nil, nil, true, map[string]shownKey{
			"schema":        {"s_file", "file " + file + ":1"},
			"kafka-brokers": {[]any{"f1:9092", "f2:9092"}, "file " + file + ":2"},
			"kafka-tls":     {true, "file " + file + ":3"},
		}, "s_file|f1:9092,f2:9092|true"},
		{"default", nil, nil, false, map[string]shownKey{
			"schema": {"outbox", "default"}, "kafka-brokers": {[]any{"127.0.0.1:9092"}, "default"}, "kafka-tls": {false, "default"},
		}, "outbox|127.0.0.1:9092|false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := tt.flags
			if tt.file {
				args = append(args[:len(args):len(args)], "--config", file)
			}
			res := runProgram(t, probeProgram(tt.env), append([]string{"probe"}, args...)...)
			if res.code != exitOK || res.stdout != tt.runs {
				t.Errorf("probe ran with %q (exit %d, stderr %q), want %q", res.stdout, res.code, res.stderr, tt.runs)
			}
			res = runCLI(t, tt.env, append([]string{"config", "relay"}, args...)...)
			if res.code != exitOK {
				t.Fatalf("config relay: exit %d, stderr:\n%s", res.code, res.stderr)
			}
			shown := parseShown(t, res.stdout)
			for key, want := range tt.want {
				if got := shown[key]; !reflect.DeepEqual(got, want) {
					t.Errorf("config relay shows %s: %v # %s; want %v # %s", key, got.value, got.source, want.value, want.source)
				}
			}
		})
	}
}

// A list flag takes a YAML list or a comma-separated string; a key without
// a value sets nothing, as an empty environment variable.
func TestConfigFile_ListFlagTakesAListOrACommaSeparatedString(t *testing.T) {
	t.Parallel()
	for content, want := range map[string]string{
		"kafka-brokers: [a:1, b:2]\n":        "outbox|a:1,b:2|false",
		"kafka-brokers:\n  - a:1\n  - b:2\n": "outbox|a:1,b:2|false",
		"kafka-brokers: a:1, b:2\n":          "outbox|a:1,b:2|false",
		"kafka-brokers:\nschema:\n":          "outbox|127.0.0.1:9092|false",
		"# only a comment\n":                 "outbox|127.0.0.1:9092|false",
		"schema: s1\nkafka-tls: true\n":      "s1|127.0.0.1:9092|true",
	} {
		file := writeConfig(t, 0o600, content)
		res := runProgram(t, probeProgram(nil), "probe", "--config", file)
		if res.code != exitOK || res.stdout != want {
			t.Errorf("file %q: probe ran with %q (exit %d, stderr %q), want %q", content, res.stdout, res.code, res.stderr, want)
		}
	}
}

// A key that is no flag of any command is an error naming the key, the
// file and the line, and the command does not run: a typo is never
// ignored.
func TestConfigFile_UnknownKeyIsAnErrorNamingKeyFileAndLine(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, 0o600, "schema: shop\nkafka-broker: kafka-1:9092\n")
	for _, args := range [][]string{{"version"}, {"config", "relay"}} {
		res := runCLI(t, nil, append(args, "--config", file)...)
		want := "config file " + file + `:2: unknown key "kafka-broker"`
		if res.code != exitUsage || !strings.Contains(res.stderr, want) || res.stdout != "" {
			t.Errorf("outbox %s: exit %d, stdout %q, stderr %q; want exit %d and %q", args, res.code, res.stdout, res.stderr, exitUsage, want)
		}
	}
}

// A key that is a flag of another command is skipped, value unchecked, by a
// command without that flag, and applies to a command with it.
func TestConfigFile_KeyOfAnotherCommandIsIgnored(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, 0o600, "workers: many\n")
	if res := runCLI(t, nil, "version", "--config", file); res.code != exitOK {
		t.Errorf("version with workers: many in the file: exit %d, stderr %q; want %d", res.code, res.stderr, exitOK)
	}
	if res := runCLI(t, nil, "relay", "--config", file); res.code != exitUsage || !strings.Contains(res.stderr, "key workers") {
		t.Errorf("relay with workers: many in the file: exit %d, stderr %q; want %d naming the key", res.code, res.stderr, exitUsage)
	}
}

// A value the flag's parser refuses is an error naming the key, the file and
// the line of the value, with the parser's reason; a secret's value is not
// repeated.
func TestConfigFile_BadValueNamesKeyAndFile(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, 0o600, "schema: shop\nbatch-size: lots\nkafka-tls: maybe\nworkers: [1, 2]\nkafka-sasl-password: [hunter2]\n")
	res := runCLI(t, nil, "relay", "--config", file)
	if res.code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, exitUsage, res.stderr)
	}
	for _, want := range []string{
		file + `:2: invalid value "lots" for key batch-size: strconv.ParseInt`,
		file + `:3: invalid value "maybe" for key kafka-tls`,
		file + `:4: invalid value for key workers: takes one value, not a list`,
		file + `:5: invalid value for key kafka-sasl-password`,
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, "hunter2") {
		t.Errorf("stderr repeats the value of a secret:\n%s", res.stderr)
	}
}

// A file that is no single mapping of unique keys is refused, naming the
// file and the line.
func TestConfigFile_RefusesWhatIsNoMappingOfUniqueKeys(t *testing.T) {
	t.Parallel()
	for content, want := range map[string]string{
		"schema: a\nschema: b\n":          `:2: key "schema" again (first on line 1)`,
		"schema: a\n---\nschema: b\n":     ":2: more than one YAML document",
		"- schema\n":                      ":1: want a mapping of flag names to values",
		"schema: [a\n":                    ": yaml: line 1",
		"schema: a\n---\nschema: [b\n":    ": yaml: line ",
		"schema: a\nconfig: other.yaml\n": `:2: key "config" cannot be set in a config file`,
	} {
		file := writeConfig(t, 0o600, content)
		res := runCLI(t, nil, "version", "--config", file)
		if res.code != exitUsage || !strings.Contains(res.stderr, "config file "+file+want) {
			t.Errorf("file %q: exit %d, stderr %q; want exit %d and %q", content, res.code, res.stderr, exitUsage, want)
		}
	}
	res := runCLI(t, map[string]string{"OUTBOX_CONFIG": "/nonexistent/outbox.yaml"}, "version")
	if res.code != exitUsage || !strings.Contains(res.stderr, "/nonexistent/outbox.yaml") {
		t.Errorf("missing file: exit %d, stderr %q; want exit %d naming the file", res.code, res.stderr, exitUsage)
	}
}

// 'outbox config relay' shows the database URL without its password and
// the SASL password and the status token as "(set)", each with its source;
// the secrets appear nowhere in its output.
func TestConfigCommand_RedactsSecretsAndShowsSources(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, 0o600, "database-url: postgres://relay:hunter2@db:5432/shop\nkafka-sasl-username: relay\nkafka-sasl-password: s3cret-pass\n")
	env := map[string]string{"OUTBOX_CONFIG": file, "OUTBOX_STATUS_TOKEN": "tok-en-secret"}
	res := runCLI(t, env, "config", "relay", "--workers", "4")
	if res.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	for _, secret := range []string{"hunter2", "s3cret-pass", "tok-en-secret"} {
		if strings.Contains(res.stdout+res.stderr, secret) {
			t.Errorf("the output shows the secret %q:\n%s%s", secret, res.stdout, res.stderr)
		}
	}
	shown := parseShown(t, res.stdout)
	for key, want := range map[string]shownKey{
		"database-url":        {"postgres://relay:xxxxx@db:5432/shop", "file " + file + ":1, redacted"},
		"kafka-sasl-username": {"relay", "file " + file + ":2"},
		"kafka-sasl-password": {"(set)", "file " + file + ":3, redacted"},
		"status-token":        {"(set)", "env OUTBOX_STATUS_TOKEN, redacted"},
		"workers":             {4, "flag"},
		"batch-size":          {100, "default"},
		"max-run":             {1, "default"},
		"max-run-bytes":       {1 << 20, "default"},
	} {
		if got := shown[key]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v # %s; want %v # %s", key, got.value, got.source, want.value, want.source)
		}
	}
	if want := "# Config file: " + file + ", from OUTBOX_CONFIG."; !strings.Contains(res.stdout, want) {
		t.Errorf("the output does not say %q:\n%s", want, res.stdout)
	}
}

// Without secrets, what 'outbox config relay' prints is a config file that
// gives the relay the same configuration.
func TestConfigCommand_OutputIsAConfigFileOfTheSameConfiguration(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OUTBOX_DATABASE_URL": "postgres://relay@db:5432/shop", "OUTBOX_TOPIC_ROUTE": "Order=orders,Payment=payments"}
	first := runCLI(t, env, "config", "relay", "--kafka-tls", "--lease", "45s", "--linger-above", "2.5", "--relay-id", "true", "--default-topic", "null")
	if first.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", first.code, first.stderr)
	}
	file := writeConfig(t, 0o600, first.stdout)
	second := runCLI(t, nil, "config", "relay", "--config", file)
	if second.code != exitOK {
		t.Fatalf("outbox config's output as a config file: exit %d, stderr:\n%s", second.code, second.stderr)
	}
	was, now := parseShown(t, first.stdout), parseShown(t, second.stdout)
	if len(was) != len(now) {
		t.Errorf("%d keys, then %d", len(was), len(now))
	}
	for key, w := range was {
		if n := now[key]; !reflect.DeepEqual(n.value, w.value) {
			t.Errorf("%s: %v, then %v from the printed file", key, w.value, n.value)
		}
	}
	if got := now["relay-id"].value; got != "true" {
		t.Errorf("relay-id = %v, want the string true", got)
	}
}

// A config file that other users can read and that holds a secret is
// named in a warning, the secret not shown; a private one, or one without
// a secret, is not.
func TestConfigFile_WarnsWhenOtherUsersCanReadASecret(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode    os.FileMode
		content string
		warn    bool
	}{
		{0o644, "kafka-sasl-password: s3cret-pass\n", true},
		{0o640, "database-url: postgres://relay:s3cret-pass@db/shop\n", true},
		{0o600, "kafka-sasl-password: s3cret-pass\n", false},
		{0o644, "database-url: postgres://relay@db/shop\nschema: shop\n", false},
	} {
		file := writeConfig(t, tt.mode, tt.content)
		res := runCLI(t, nil, "version", "--config", file)
		warned := strings.Contains(res.stderr, "chmod 600") && strings.Contains(res.stderr, file)
		if res.code != exitOK || warned != tt.warn || strings.Contains(res.stderr, "s3cret-pass") {
			t.Errorf("mode %#o, file %q: exit %d, stderr %q; want a warning: %t, and no secret", tt.mode, tt.content, res.code, res.stderr, tt.warn)
		}
	}
}

// A relay given only --config takes its database, schema, brokers and
// routes from the file: an event of the routed aggregate type reaches its
// topic. 'outbox migrate' reads the same file.
func TestRelay_WithOnlyConfig_UsesTheFilesDatabaseBrokersAndRoutes(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	content, err := yaml.Marshal(map[string]any{
		"database-url":             pgtest.URL(),
		"schema":                   schema,
		"kafka-brokers":            cluster.ListenAddrs(),
		"topic-route":              []string{"Order=orders", "Payment=payments"},
		"kafka-auto-create-topics": true,
		"poll-interval":            "50ms",
		"metrics-addr":             "off",
	})
	if err != nil {
		t.Fatal(err)
	}
	file := writeConfig(t, 0o600, string(content))
	if res := runCLI(t, nil, "migrate", "--config", file); res.code != exitOK {
		t.Fatalf("migrate --config: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	_, stderr, stop, done := startCLI(nil, "relay", "--config", file)
	defer stop()
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
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d, want 0; stderr:\n%s", code, stderr)
	}
}

// Help works whatever the config file holds: it reads no file.
func TestHelp_WorksWithABrokenConfigFile(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, 0o600, "kafka-broker: kafka-1:9092\n")
	for _, args := range [][]string{{"help", "relay"}, {"relay", "--help"}, {"config", "--help"}} {
		res := runCLI(t, map[string]string{"OUTBOX_CONFIG": file}, args...)
		if res.code != exitOK || !strings.Contains(res.stdout, "Usage:") {
			t.Errorf("outbox %s: exit %d, stderr %q; want the help", args, res.code, res.stderr)
		}
	}
}

// A command's section sets its flags before the shared keys do, and no
// other command's: the same key can mean one thing for the relay and
// another for cleanup.
func TestConfigFile_SectionAppliesToItsCommandBeforeTheSharedKeys(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, 0o600, "batch-size: 50\nrelay:\n  batch-size: 200\n  workers: 3\n  max-run: 50\ncleanup:\n  batch-size: 1000\n")
	for _, tc := range []struct {
		command string
		want    map[string]shownKey
	}{
		{"relay", map[string]shownKey{
			"batch-size": {200, "file " + file + ":3"},
			"workers":    {3, "file " + file + ":4"},
			"max-run":    {50, "file " + file + ":5"},
		}},
		{"cleanup", map[string]shownKey{"batch-size": {1000, "file " + file + ":7"}}},
		{"replay", map[string]shownKey{"batch-size": {50, "file " + file + ":1"}}},
	} {
		res := runCLI(t, nil, "config", tc.command, "--config", file)
		if res.code != exitOK {
			t.Fatalf("outbox config %s: exit %d, stderr %q", tc.command, res.code, res.stderr)
		}
		shown := parseShown(t, res.stdout)
		for key, want := range tc.want {
			if got := shown[key]; got != want {
				t.Errorf("outbox config %s: %s = %v (%s), want %v (%s)", tc.command, key, got.value, got.source, want.value, want.source)
			}
		}
	}
}

// A section that names no command, and a key of a section that is no flag
// of its command, are errors naming them, the file and the line.
func TestConfigFile_UnknownSectionOrSectionKeyIsAnError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ content, want string }{
		{"relays:\n  workers: 2\n", `:1: unknown section "relays"`},
		{"stats:\n  workers: 2\n", `:2: unknown key "workers": command stats has no flag --workers`},
	} {
		file := writeConfig(t, 0o600, tc.content)
		res := runCLI(t, nil, "version", "--config", file)
		if res.code != exitUsage || !strings.Contains(res.stderr, "config file "+file+tc.want) {
			t.Errorf("file %q: exit %d, stderr %q; want exit %d and %q", tc.content, res.code, res.stderr, exitUsage, tc.want)
		}
	}
}

// What 'outbox config' prints for a command is a config file that the
// command itself runs with: the keys at their defaults are not set by it,
// so that no flag counts as given that was not.
func TestConfigCommand_OutputRunsTheCommand(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.Schema(t)
	env := map[string]string{"OUTBOX_DATABASE_URL": pgtest.URL(), "OUTBOX_SCHEMA": schema}
	for _, args := range [][]string{{"migrate"}, {"cleanup", "--older-than", "720h"}} {
		printed := runCLI(t, env, append([]string{"config"}, args...)...)
		if printed.code != exitOK {
			t.Fatalf("outbox config %s: exit %d, stderr:\n%s", args, printed.code, printed.stderr)
		}
		file := writeConfig(t, 0o600, printed.stdout)
		res := runCLI(t, nil, args[0], "--config", file)
		if res.code != exitOK {
			t.Errorf("outbox %s --config <its printed configuration>: exit %d, stderr:\n%s\nfile:\n%s", args[0], res.code, res.stderr, printed.stdout)
		}
	}
}

// A mapping as the value of a key that is a flag (and no command) is that
// key's bad value, not an unknown section; an empty secret is no secret to
// warn about.
func TestConfigFile_MappingForAFlagAndEmptySecret(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, 0o600, "topic-route:\n  Order: orders\n")
	res := runCLI(t, nil, "version", "--config", file)
	want := "config file " + file + ":1: invalid value for key topic-route: takes a value or a list, not a mapping"
	if res.code != exitUsage || !strings.Contains(res.stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit %d and %q", res.code, res.stderr, exitUsage, want)
	}
	open := writeConfig(t, 0o644, "kafka-sasl-password: \"\"\nstatus-token: \"\"\n")
	if res := runCLI(t, nil, "config", "relay", "--config", open); res.code != exitOK || strings.Contains(res.stderr, "chmod 600") {
		t.Errorf("empty secrets in a readable file: exit %d, stderr %q; want %d and no warning", res.code, res.stderr, exitOK)
	}
}
