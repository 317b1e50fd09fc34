package bench_test

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"time"

	"github.com/outbox-dev/outbox/internal/bench"
)

// Run measures the relay; WriteText prints the figures and the goals, and
// the Report marshals to JSON as is.
func ExampleRun() {
	ctx := context.Background()
	rep, err := bench.Run(ctx, bench.Config{
		DatabaseURL: "postgres://postgres@127.0.0.1:5432/test",
		Phases:      []bench.Phase{bench.PhaseDrain, bench.PhaseIdle},
		Backlog:     20_000,
		IdleWindow:  5 * time.Second,
		Progress:    os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := bench.WriteText(os.Stdout, rep); err != nil {
		log.Fatal(err)
	}
	for _, g := range rep.Goals {
		if !g.Pass {
			log.Printf("missed: %s (%s, target %s)", g.Name, g.Measured, g.Target)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
}
