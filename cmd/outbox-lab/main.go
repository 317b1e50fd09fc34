// Command outbox-lab is the outbox command with its lab: every production
// command plus demo, example, bench and chaos, which try, measure and test
// the toolkit. Run 'outbox-lab --help' for the commands; they live in
// internal/cli and internal/cli/lab. Production deployments run cmd/outbox,
// which links none of the lab.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/outbox-dev/outbox/internal/cli/lab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, restore the default handling: a second
	// Ctrl-C ends the process at once instead of waiting for the graceful
	// stop.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := lab.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
