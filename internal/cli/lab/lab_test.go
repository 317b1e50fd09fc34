package lab

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/internal/cli"
)

// labCommands are the commands outbox-lab has and outbox has not.
var labCommands = []string{"bench", "chaos", "demo", "example"}

// commandNames are the names of root's subcommands, sorted.
func commandNames(root *cobra.Command) []string {
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	return names
}

// outbox-lab has every command of outbox, so that one binary runs every
// process of the chaos harness, plus the lab's; outbox has none of the
// lab's.
func TestLab_HasEveryOutboxCommandAndTheLabCommands(t *testing.T) {
	t.Parallel()
	outbox := commandNames(cli.Program{}.Command())
	lab := commandNames(program(nil).Command())
	want := slices.Sorted(slices.Values(append(slices.Clone(outbox), labCommands...)))
	if !slices.Equal(lab, want) {
		t.Errorf("outbox-lab commands %v; want outbox's %v and %v", lab, outbox, labCommands)
	}
	for _, name := range labCommands {
		if slices.Contains(outbox, name) {
			t.Errorf("outbox has the lab command %s", name)
		}
	}
}

// The lab commands' help is as complete as the production commands' (their
// tests in package cli check those): a Short, a Long and an Example, and
// each flag's environment variable.
func TestLabHelp_EveryCommandHasShortLongExampleAndShowsItsEnvironmentVariables(t *testing.T) {
	t.Parallel()
	root := program(nil).Command()
	if root.Name() != "outbox-lab" || root.Short == "" || !strings.Contains(root.Long, "outbox-lab is") {
		t.Errorf("root command %q, Short %q, Long %q; want outbox-lab with its own description", root.Name(), root.Short, root.Long)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("command %q lacks a Short, Long or Example", c.CommandPath())
		}
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.Flags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if f.Name == "help" || f.Name == "version" {
					return
				}
				if want := "[$" + cli.EnvName(f.Name) + "]"; strings.Count(f.Usage, "[$") != 1 || !strings.Contains(f.Usage, want) {
					t.Errorf("%s --%s: help %q does not show %s once", c.CommandPath(), f.Name, f.Usage, want)
				}
			})
		}
		for _, sub := range c.Commands() {
			if sub.Name() != "help" {
				walk(sub)
			}
		}
	}
	for _, c := range root.Commands() {
		if slices.Contains(labCommands, c.Name()) {
			walk(c)
		}
	}
}

// The usage errors and the version name the command that runs.
func TestLab_NamesItselfInVersionAndUsageErrors(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "version")
	if res.code != exitOK || !strings.HasPrefix(res.stdout, "outbox-lab ") {
		t.Errorf("version: exit %d, stdout %q; want 0 and outbox-lab <version>", res.code, res.stdout)
	}
	res = runCLI(t, nil, "demo", "--rate", "0")
	if res.code != exitUsage || !strings.Contains(res.stderr, "Run 'outbox-lab demo --help' for usage.") {
		t.Errorf("demo --rate 0: exit %d, stderr %q; want %d pointing at 'outbox-lab demo --help'", res.code, res.stderr, exitUsage)
	}
}
