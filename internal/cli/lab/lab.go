// Package lab is the outbox-lab command line: every command of outbox
// (package cli) plus the commands that try, measure and test the toolkit
// rather than run it in production:
//
//   - demo: the reference order system in one process, with its checks
//   - example: one piece of the reference order system as a process
//   - bench: the relay measured against PostgreSQL and Kafka
//   - chaos: the whole system as processes under injected faults
//
// They link the reference order system (examples/orders), the demo, the
// bench and the fault-injection harness, which the production binary must
// not carry; so they live here, and package cli does not import this one.
// The chaos harness runs relays, brokers and example services as child
// processes of one outbox-lab binary built with -tags failpoints.
package lab

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/internal/cli"
)

// program is the outbox-lab command line, reading the OUTBOX_* variables
// with lookupEnv (nil: the process environment): the production tree with
// the lab commands in a group of their own.
func program(lookupEnv cli.LookupEnv) cli.Program {
	return cli.Program{
		Name:  "outbox-lab",
		Short: "The outbox command and its lab: demo, example services, benchmarks, fault injection",
		Intro: `outbox-lab is the outbox command with the commands that try, measure and
test it: 'demo' runs the reference order system in one process, 'example'
runs its services one per process, 'bench' measures the relay, and 'chaos'
runs everything under injected faults and checks the invariants. Production
deployments run 'outbox': the same commands without these four.`,
		Groups:    []*cobra.Group{{ID: groupLab, Title: "Try, measure and test it:"}},
		Commands:  []func(*cli.App) *cobra.Command{newExampleCommand, newDemoCommand, newBenchCommand, newChaosCommand},
		LookupEnv: lookupEnv,
	}
}

// groupLab is the help group of the lab commands.
const groupLab = "lab"

// Main runs the outbox-lab command line with args (without the program
// name), reading flags' defaults from the process environment, and returns
// the exit status: 0 on success, 1 when the command failed, 2 for a bad
// command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return program(nil).Main(ctx, args, stdout, stderr)
}
