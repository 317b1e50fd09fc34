package demo_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/outbox-dev/outbox/internal/demo"
)

func ExampleRun() {
	// Ten seconds of orders on SQLite and the embedded broker, with relays
	// killed and the broker stopped at random; then the checks.
	sum, err := demo.Run(context.Background(), demo.Config{Duration: 10 * time.Second, Chaos: true}, os.Stdout)
	if errors.Is(err, demo.ErrInvariant) {
		log.Fatalf("a check failed; the data is in %s", sum.DataDir)
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d orders, %d duplicate deliveries absorbed", sum.Orders, sum.Duplicates)
}
