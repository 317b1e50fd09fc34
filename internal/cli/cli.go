// Package cli is the outbox command line: the command tree, the flags (each
// also settable by an OUTBOX_* environment variable and by a key of the
// config file), logging, and the commands. Each command is a thin layer
// over a library package, so that whatever the command line does, a Go
// program can do too.
//
// To add a command, write a func(*app) *cobra.Command in a file of its own,
// give it a Short, a Long, an Example and a GroupID, and list it in
// [commands]. It gets the global flags, the environment binding and a logger
// for free (the root's PersistentPreRunE sets them up, so a command must not
// set a PersistentPreRun of its own); it opens the database with
// [app.openStore] and reports a bad flag with [flagError].
//
// # Configuration
//
// A flag takes its value from the command line, else from its environment
// variable (env.go), else from the config file, else from its default
// (configure.go). The config file (configfile.go), named by --config or
// OUTBOX_CONFIG and read by every command, is a YAML mapping from flag
// names to values, a list flag's as a YAML list or a comma-separated
// string; each value goes through the flag's own parser. One file serves
// every command: a key that is a flag of the running command sets it, a
// key that is a flag of another command only is skipped, and a key that is
// no flag of any command of the tree is an error. 'outbox config'
// (config.go) prints what a command would run with and where each value
// comes from, secrets hidden (markSensitive, markSensitiveURL).
//
// These are the production commands, the 'outbox' binary. A [Program] adds
// commands defined outside this package to the same tree, through the seam
// of extend.go ([App], [FlagError], [KafkaFlags], [RelayFlags], ...): the
// lab's demo, example, bench and chaos commands (package lab, the
// 'outbox-lab' binary) register that way, so that nothing here imports them
// and the production binary links none of them.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/store/pgstore"
)

// Exit codes of Main.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // a bad command line: unknown command or flag, or a bad flag value
)

// Command groups, in the order --help lists them.
var groups = []*cobra.Group{
	{ID: "run", Title: "Run services:"},
	{ID: "database", Title: "Manage the outbox database:"},
	{ID: "operate", Title: "Operate the outbox:"},
}

// commands are the constructors of the top-level commands.
var commands = []func(*app) *cobra.Command{
	newRelayCommand,
	newBrokerCommand,
	newMigrateCommand,
	newModeCommand,
	newCursorCommand,
	newStatsCommand,
	newDLQCommand,
	newReplayCommand,
	newCleanupCommand,
	newConfigCommand,
	newVersionCommand,
}

// app is what every command shares: the output streams, the environment,
// the global flags and, once the flags are parsed, the logger.
type app struct {
	stdout, stderr io.Writer
	lookupEnv      LookupEnv

	configFile  string
	databaseURL string
	schema      string
	logLevel    string
	logFormat   string

	// fileKeys are the keys a config file may hold (see keysOf).
	fileKeys fileKeys

	// logger is set before any command's RunE runs.
	logger *slog.Logger

	// poolHook, when set (by tests), adjusts the configuration of every
	// pool newPool opens, after everything else; purpose names the pool.
	poolHook func(purpose string, cfg *pgxpool.Config)
}

// Main runs the outbox command line with args (without the program name),
// reading flags' defaults from the process environment. It returns the exit
// status: 0 on success, 1 when the command failed, 2 for a bad command line.
// Long-running commands stop gracefully when ctx is done.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Program{}.Main(ctx, args, stdout, stderr)
}

// Program is a command line built on the outbox command tree: every
// production command, the global flags and their environment variables,
// plus Commands. The zero Program is the 'outbox' command.
type Program struct {
	// Name is the root command's name, as help and errors show it.
	// Defaults to "outbox".
	Name string
	// Short replaces the root's one-line description when set.
	Short string
	// Intro is a paragraph put before the root's description in its help.
	Intro string
	// Groups are command groups listed after the production ones.
	Groups []*cobra.Group
	// Commands are added to the production commands; each sets a GroupID
	// from Groups.
	Commands []func(*App) *cobra.Command
	// LookupEnv reads the OUTBOX_* environment variables. Defaults to
	// os.LookupEnv.
	LookupEnv LookupEnv
}

// Main runs p's command line with args (without the program name) and
// returns the exit status, as the package-level Main does; the flags'
// defaults come from p.LookupEnv.
func (p Program) Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runApp(ctx, p, &app{stdout: stdout, stderr: stderr, lookupEnv: p.lookupEnv()}, args)
}

// Command builds p's command tree without running it, writing nowhere:
// for tests and documentation generators that walk the commands and flags.
func (p Program) Command() *cobra.Command {
	return newRootCommand(&app{stdout: io.Discard, stderr: io.Discard, lookupEnv: p.lookupEnv()}, p)
}

func (p Program) lookupEnv() LookupEnv {
	if p.LookupEnv != nil {
		return p.LookupEnv
	}
	return os.LookupEnv
}

// run is Main with the environment given, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv LookupEnv) int {
	return Program{LookupEnv: lookupEnv}.Main(ctx, args, stdout, stderr)
}

// runApp runs p's command line on a, which has its output streams and
// environment set.
func runApp(ctx context.Context, p Program, a *app, args []string) int {
	stderr := a.stderr
	root := newRootCommand(a, p)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	// Missing outbox tables, from any command, are named with the fix; a
	// command that ran behind PgBouncer in transaction mode without a
	// fitting default_query_exec_mode fails with PostgreSQL's words about a
	// prepared statement: say what to change.
	err = pgstore.ExplainPoolerError(pgstore.NotMigrated(a.schema, err))
	fmt.Fprintf(stderr, "Error: %s\n", termLines(err.Error())) // errors may quote stored data
	if isUsageError(err) {
		if cmd == nil {
			cmd = root
		}
		if name, ok := labCommand(err); ok {
			fmt.Fprintf(stderr, "'%s' is a command of outbox-lab, the outbox command with its lab (in the outbox repository: go run ./cmd/outbox-lab %s)\n", name, name)
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	return exitError
}

// labCommands are the commands of outbox-lab (cmd/outbox-lab) that outbox
// has not.
var labCommands = []string{"demo", "example", "bench", "chaos"}

// labCommand reports whether err is cobra's unknown-command error for one
// of labCommands, and which. In outbox-lab, which has them, it never is.
func labCommand(err error) (string, bool) {
	for _, name := range labCommands {
		if strings.HasPrefix(err.Error(), fmt.Sprintf("unknown command %q", name)) {
			return name, true
		}
	}
	return "", false
}

// newRootCommand builds p's whole command tree around a.
func newRootCommand(a *app, p Program) *cobra.Command {
	root := &cobra.Command{
		Use:   "outbox",
		Short: "Transactional outbox toolkit: relay events from PostgreSQL to Kafka",
		Long: `outbox publishes the events that applications write to an outbox table, in
the same transaction as their business data, to Kafka: at least once, in
order per aggregate, with retries and a dead-letter state for events that
cannot be published.

Start with 'outbox migrate' to create the outbox tables, then run
'outbox relay' next to your application. For local development,
'outbox broker' runs a small Kafka-compatible broker.

Every flag can also be set by an environment variable: OUTBOX_ followed by
the flag name in upper case with '_' for '-' (--database-url is
OUTBOX_DATABASE_URL), and by a key of the config file that --config (or
OUTBOX_CONFIG) names: a YAML mapping from flag names to values, read by
every command, each taking the keys that are its flags. A flag on the
command line wins over the environment, which wins over the file. 'outbox
config relay' prints the configuration 'outbox relay' would run with and
where each value comes from.`,
		Example: `  export OUTBOX_DATABASE_URL=postgres://app@localhost:5432/app
  outbox migrate
  outbox relay --kafka-brokers kafka-1:9092,kafka-2:9092

  # Every command configured by one file:
  export OUTBOX_CONFIG=/etc/outbox/outbox.yaml
  outbox config relay
  outbox relay`,
		Version:           buildVersion(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
		PersistentPreRunE: a.setup,
	}
	if p.Name != "" {
		root.Use = p.Name
	}
	if p.Short != "" {
		root.Short = p.Short
	}
	if p.Intro != "" {
		root.Long = p.Intro + "\n\n" + root.Long
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })

	pf := root.PersistentFlags()
	pf.StringVar(&a.configFile, configFlag, "",
		"YAML `file` of flag values that every command reads: keys are flag names (default: none)")
	pf.StringVar(&a.databaseURL, "database-url", "",
		"PostgreSQL connection `URL` or key=value DSN (required by commands that use the database; keep a password in the environment or the config file rather than on the command line)")
	pf.StringVar(&a.schema, "schema", pgstore.DefaultSchema, "PostgreSQL `schema` that holds the outbox tables")
	pf.StringVar(&a.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	pf.StringVar(&a.logFormat, "log-format", "text", "log `format` on stderr: text or json")
	markSensitiveURL(pf, "database-url")

	used := map[string]bool{}
	for _, newCmd := range commands {
		c := newCmd(a)
		used[c.GroupID] = true
		root.AddCommand(c)
	}
	for _, newCmd := range p.Commands {
		c := newCmd(&App{a: a})
		used[c.GroupID] = true
		root.AddCommand(c)
	}
	for _, g := range append(groups[:len(groups):len(groups)], p.Groups...) {
		if used[g.ID] {
			root.AddGroup(g)
		}
	}
	annotateEnv(root)
	a.fileKeys = keysOf(root)
	return root
}

// selfConfigured is the annotation of a command that configures flags by
// itself (see configure): setup only gives it a logger.
const selfConfigured = "outbox_self_configured"

// setup runs before every command: it fills unchanged flags from the
// environment and the config file, and builds the logger. The help command
// and a self-configured one only get the logger, so that help works
// whatever the environment and the file hold.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	if _, ok := cmd.Annotations[selfConfigured]; ok || isHelpCommand(cmd) {
		return a.setLogger()
	}
	c, err := a.configure(cmd)
	if err != nil {
		return err
	}
	if err := a.setLogger(); err != nil {
		return err
	}
	c.warn(a.logger, a.fileKeys.all)
	return nil
}

// isHelpCommand reports whether cmd is cobra's help command.
func isHelpCommand(cmd *cobra.Command) bool {
	return cmd.Name() == "help" && cmd.Parent() == cmd.Root()
}

// setLogger builds the logger of --log-level and --log-format.
func (a *app) setLogger() error {
	logger, err := newLogger(a.stderr, a.logLevel, a.logFormat)
	if err != nil {
		return err
	}
	a.logger = logger
	return nil
}

// newLogger returns a logger writing to w at level in format (text or json).
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, flagError("log-level", "must be debug, info, warn or error, not %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, flagError("log-format", "must be text or json, not %q", format)
}

// usageError is an error in the command line rather than in what the command
// did: Main reports it with a pointer to --help and exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// flagError returns a usage error that names the flag and the rule its value
// breaks: "--batch-size must be at least 1, not 0".
func flagError(flag, rule string, args ...any) error {
	return &usageError{fmt.Errorf("--%s %s", flag, fmt.Sprintf(rule, args...))}
}

// isUsageError reports whether err is about the command line. Cobra's own
// errors for unknown commands and bad arguments are plain errors, so they
// are recognised by their text.
func isUsageError(err error) bool {
	var ue *usageError
	if errors.As(err, &ue) {
		return true
	}
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires ", "invalid argument"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args)}
	}
	return nil
}

// changed reports whether the flag was given on the command line, by its
// environment variable or by the config file.
func changed(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Changed
}
