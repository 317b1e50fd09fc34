package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestEnvName_IsPrefixedUpperSnakeCase(t *testing.T) {
	t.Parallel()
	for flag, want := range map[string]string{
		"database-url":        "OUTBOX_DATABASE_URL",
		"kafka-brokers":       "OUTBOX_KAFKA_BROKERS",
		"kafka-sasl-password": "OUTBOX_KAFKA_SASL_PASSWORD",
		"schema":              "OUTBOX_SCHEMA",
	} {
		if got := EnvName(flag); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flag, got, want)
		}
	}
}

// testFlags is a flag set with one flag of each kind the commands use.
type testFlags struct {
	fs      *pflag.FlagSet
	name    string
	count   int
	wait    time.Duration
	on      bool
	brokers []string
	secret  string
}

func newTestFlags(t *testing.T, args ...string) *testFlags {
	t.Helper()
	f := &testFlags{fs: pflag.NewFlagSet("test", pflag.ContinueOnError)}
	f.fs.StringVar(&f.name, "name", "default-name", "")
	f.fs.IntVar(&f.count, "batch-size", 100, "")
	f.fs.DurationVar(&f.wait, "lease", 30*time.Second, "")
	f.fs.BoolVar(&f.on, "kafka-tls", false, "")
	f.fs.StringSliceVar(&f.brokers, "kafka-brokers", []string{"127.0.0.1:9092"}, "")
	f.fs.StringVar(&f.secret, "kafka-sasl-password", "", "")
	markSensitive(f.fs, "kafka-sasl-password")
	if err := f.fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return f
}

func TestBindEnv_SetsUnchangedFlagsFromEnv(t *testing.T) {
	t.Parallel()
	f := newTestFlags(t)
	err := bindEnv(f.fs, mapEnv(map[string]string{
		"OUTBOX_NAME":                "from-env",
		"OUTBOX_BATCH_SIZE":          "7",
		"OUTBOX_LEASE":               "2m",
		"OUTBOX_KAFKA_TLS":           "true",
		"OUTBOX_KAFKA_SASL_PASSWORD": "hunter2",
	}))
	if err != nil {
		t.Fatalf("bindEnv: %v", err)
	}
	if f.name != "from-env" || f.count != 7 || f.wait != 2*time.Minute || !f.on || f.secret != "hunter2" {
		t.Errorf("got name=%q batch-size=%d lease=%s kafka-tls=%t password set=%t; want the env values",
			f.name, f.count, f.wait, f.on, f.secret == "hunter2")
	}
	for _, name := range []string{"name", "batch-size", "lease", "kafka-tls"} {
		if !f.fs.Lookup(name).Changed {
			t.Errorf("--%s set from env is not marked changed", name)
		}
	}
	if f.fs.Lookup("kafka-brokers").Changed {
		t.Error("--kafka-brokers is marked changed though its variable is not set")
	}
	if !slices.Equal(f.brokers, []string{"127.0.0.1:9092"}) {
		t.Errorf("--kafka-brokers = %q, want its default", f.brokers)
	}
}

func TestBindEnv_FlagOnCommandLineBeatsEnv(t *testing.T) {
	t.Parallel()
	f := newTestFlags(t, "--name", "from-flag", "--batch-size=3", "--kafka-brokers", "a:1")
	err := bindEnv(f.fs, mapEnv(map[string]string{
		"OUTBOX_NAME":          "from-env",
		"OUTBOX_BATCH_SIZE":    "7",
		"OUTBOX_KAFKA_BROKERS": "b:2,c:3",
		"OUTBOX_LEASE":         "5s",
	}))
	if err != nil {
		t.Fatalf("bindEnv: %v", err)
	}
	if f.name != "from-flag" || f.count != 3 || !slices.Equal(f.brokers, []string{"a:1"}) {
		t.Errorf("got name=%q batch-size=%d kafka-brokers=%q; want the command line's values", f.name, f.count, f.brokers)
	}
	if f.wait != 5*time.Second {
		t.Errorf("lease = %s, want 5s from the env (it was not on the command line)", f.wait)
	}
}

func TestBindEnv_SliceFlagTakesCommaSeparatedList(t *testing.T) {
	t.Parallel()
	f := newTestFlags(t)
	if err := bindEnv(f.fs, mapEnv(map[string]string{"OUTBOX_KAFKA_BROKERS": "k1:9092, k2:9092,,k3:9093 "})); err != nil {
		t.Fatalf("bindEnv: %v", err)
	}
	want := []string{"k1:9092", "k2:9092", "k3:9093"}
	if !slices.Equal(f.brokers, want) {
		t.Errorf("kafka-brokers = %q, want %q (replacing the default)", f.brokers, want)
	}
}

func TestBindEnv_EmptyVariableCountsAsUnset(t *testing.T) {
	t.Parallel()
	f := newTestFlags(t)
	if err := bindEnv(f.fs, mapEnv(map[string]string{"OUTBOX_BATCH_SIZE": "", "OUTBOX_NAME": ""})); err != nil {
		t.Fatalf("bindEnv: %v", err)
	}
	if f.count != 100 || f.name != "default-name" || f.fs.Lookup("batch-size").Changed {
		t.Errorf("empty variables changed the flags: batch-size=%d name=%q", f.count, f.name)
	}
}

func TestBindEnv_BadValueNamesVariableAndFlag(t *testing.T) {
	t.Parallel()
	f := newTestFlags(t)
	err := bindEnv(f.fs, mapEnv(map[string]string{"OUTBOX_BATCH_SIZE": "lots", "OUTBOX_LEASE": "soon"}))
	if err == nil {
		t.Fatal("bindEnv accepted OUTBOX_BATCH_SIZE=lots")
	}
	for _, want := range []string{"OUTBOX_BATCH_SIZE", "--batch-size", `"lots"`, "OUTBOX_LEASE", "--lease"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestBindEnv_BadValueOfSensitiveFlagIsNotRepeated(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.Int("secret-pin", 0, "")
	markSensitive(fs, "secret-pin")
	err := bindEnv(fs, mapEnv(map[string]string{"OUTBOX_SECRET_PIN": "12x34"}))
	if err == nil {
		t.Fatal("bindEnv accepted a non-integer")
	}
	if !strings.Contains(err.Error(), "OUTBOX_SECRET_PIN") || strings.Contains(err.Error(), "12x34") {
		t.Errorf("error %q: want the variable named and the value hidden", err)
	}
}

// Through the whole command tree: a persistent flag of the root and a local
// flag of a subcommand are both bound, and the command line still wins.
func TestCommandTree_BindsEnvToEveryCommandsFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OUTBOX_BATCH_SIZE": "0", "OUTBOX_DATABASE_URL": "postgres://u@127.0.0.1:1/x"}
	// --batch-size on the command line beats OUTBOX_BATCH_SIZE=0, so the
	// first rule broken is --workers', which comes from the environment.
	env["OUTBOX_WORKERS"] = "0"
	res := runCLI(t, env, "relay", "--batch-size", "10")
	if res.code != exitUsage || !strings.Contains(res.stderr, "--workers must be at least 1") {
		t.Fatalf("exit %d, stderr %q; want exit %d naming --workers", res.code, res.stderr, exitUsage)
	}

	res = runCLI(t, map[string]string{"OUTBOX_LOG_LEVEL": "chatty"}, "migrate", "--list")
	if res.code != exitUsage || !strings.Contains(res.stderr, "--log-level") || !strings.Contains(res.stderr, `"chatty"`) {
		t.Fatalf("exit %d, stderr %q; want exit %d naming --log-level", res.code, res.stderr, exitUsage)
	}
}

func TestHelp_EveryFlagShowsItsEnvironmentVariable(t *testing.T) {
	t.Parallel()
	root := newRootCommand(&app{lookupEnv: mapEnv(nil)}, Program{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.Flags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if noEnv[f.Name] {
					return
				}
				if want := "[$" + EnvName(f.Name) + "]"; !strings.Contains(f.Usage, want) {
					t.Errorf("%s --%s: help %q does not show %s", c.CommandPath(), f.Name, f.Usage, want)
				}
				if strings.Count(f.Usage, "[$") != 1 {
					t.Errorf("%s --%s: help %q names its variable more than once", c.CommandPath(), f.Name, f.Usage)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func TestHelp_EveryCommandHasShortLongAndExample(t *testing.T) {
	t.Parallel()
	root := newRootCommand(&app{lookupEnv: mapEnv(nil)}, Program{})
	for _, c := range append(root.Commands(), root) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("command %q lacks a Short, Long or Example", c.CommandPath())
		}
	}
}
