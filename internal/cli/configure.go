package cli

import (
	"cmp"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// sourceKind says where a flag's value came from: the command line, else
// the environment, else the config file, else the flag's default.
type sourceKind int

const (
	fromDefault sourceKind = iota
	fromFlag
	fromEnv
	fromFile
)

// source is where a flag's value came from.
type source struct {
	kind sourceKind
	name string // the environment variable, or the config file
	line int    // the line of the config file
}

// String describes s as 'outbox config' shows it: flag, env OUTBOX_X,
// file F:LINE or default.
func (s source) String() string {
	switch s.kind {
	case fromFlag:
		return "flag"
	case fromEnv:
		return "env " + s.name
	case fromFile:
		return fmt.Sprintf("file %s:%d", s.name, s.line)
	}
	return "default"
}

// configuration is the outcome of configure: where each flag's value came
// from, and the config file if one was read.
type configuration struct {
	sources map[string]source // by flag name; a flag not in it has its default
	file    *configFile
}

// configure sets every flag of fs that the command line did not set from
// its environment variable, else from the config file that --config or
// OUTBOX_CONFIG names, if any, and says where each value came from. Every
// error is a usage error.
func (a *app) configure(cmd *cobra.Command) (*configuration, error) {
	fs := cmd.Flags()
	c := &configuration{sources: map[string]source{}}
	c.record(fs, func(*pflag.Flag) source { return source{kind: fromFlag} })
	if err := bindEnv(fs, a.lookupEnv); err != nil {
		return nil, &usageError{err}
	}
	c.record(fs, func(f *pflag.Flag) source { return source{kind: fromEnv, name: EnvName(f.Name)} })
	f := fs.Lookup(configFlag)
	if f == nil || f.Value.String() == "" {
		return c, nil
	}
	file, err := readConfigFile(f.Value.String())
	if err != nil {
		return nil, &usageError{err}
	}
	if err := file.checkKeys(a.fileKeys); err != nil {
		return nil, &usageError{err}
	}
	if err := file.apply(fs, topCommand(cmd), c.sources); err != nil {
		return nil, &usageError{err}
	}
	c.file = file
	return c, nil
}

// record notes the source of every changed flag of fs that has none yet.
func (c *configuration) record(fs *pflag.FlagSet, src func(*pflag.Flag) source) {
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := c.sources[f.Name]; f.Changed && !ok {
			c.sources[f.Name] = src(f)
		}
	})
}

// topCommand returns the name of the command under the root that cmd is or
// belongs to: the section of the config file that applies to cmd.
func topCommand(cmd *cobra.Command) string {
	for cmd.HasParent() && cmd.Parent().HasParent() {
		cmd = cmd.Parent()
	}
	return cmd.Name()
}

// warn logs, once the logger exists, that the config file holds secrets
// that other users can read.
func (c *configuration) warn(logger *slog.Logger, keys map[string]string) {
	if c.file == nil {
		return
	}
	if secrets := c.file.exposedSecrets(keys); len(secrets) > 0 {
		logger.Warn("the config file holds secrets and other users can read it; chmod 600 it",
			slog.String("file", c.file.path), slog.String("mode", fmt.Sprintf("%#o", c.file.mode.Perm())), slog.Any("keys", secrets))
	}
}

// fileKeys are the keys a config file may hold, each with its sensitivity
// (the strictest of the flags of that name).
type fileKeys struct {
	// all are the shared keys: the name of every flag of every command,
	// except those of notInFile.
	all map[string]string
	// byCommand are the keys of each command's section: the flags of the
	// command under the root, of its subcommands and the root's persistent
	// flags.
	byCommand map[string]map[string]string
}

// keysOf returns the keys of a config file for the command tree of root.
func keysOf(root *cobra.Command) fileKeys {
	k := fileKeys{all: flagKeys(root), byCommand: map[string]map[string]string{}}
	for _, cmd := range root.Commands() {
		keys := flagKeys(cmd)
		root.PersistentFlags().VisitAll(func(f *pflag.Flag) { addKey(keys, f) })
		k.byCommand[cmd.Name()] = keys
	}
	return k
}

// flagKeys returns the name of every flag of every command under cmd, with
// its sensitivity.
func flagKeys(cmd *cobra.Command) map[string]string {
	keys := map[string]string{}
	walkFlags(cmd, func(f *pflag.Flag) { addKey(keys, f) })
	return keys
}

// addKey adds f's name to keys, unless a file cannot set it.
func addKey(keys map[string]string, f *pflag.Flag) {
	if !notInFile[f.Name] {
		keys[f.Name] = stricter(keys[f.Name], sensitivity(f))
	}
}

// stricter returns the stricter of two sensitivities: a secret over a URL
// over nothing.
func stricter(a, b string) string {
	if a == sensitiveSecret || b == sensitiveSecret {
		return sensitiveSecret
	}
	return cmp.Or(a, b)
}

// walkFlags calls fn once for every flag of every command under root.
func walkFlags(root *cobra.Command, fn func(*pflag.Flag)) {
	seen := map[*pflag.Flag]bool{}
	visit := func(f *pflag.Flag) {
		if !seen[f] {
			seen[f] = true
			fn(f)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.PersistentFlags().VisitAll(visit)
		c.Flags().VisitAll(visit)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
