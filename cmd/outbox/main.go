// Command outbox relays transactional-outbox events from PostgreSQL to
// Kafka, manages the outbox tables, and runs a development broker. Run
// 'outbox --help' for the commands; they live in internal/cli. It is the
// production binary: the demo, the example services, the bench and the
// fault-injection harness are in cmd/outbox-lab, and this command links
// none of them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/outbox-dev/outbox/internal/cli"
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
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
