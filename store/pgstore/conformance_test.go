package pgstore_test

import (
	"testing"
	"time"

	"github.com/outbox-dev/outbox/store/storetest"
)

// TestConformance runs the suite every store must pass, each subtest in a
// PostgreSQL schema of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness { return setup(t).Harness() })
}

// TestConformancePartitioned runs the same suite on a time-partitioned
// outbox table (Config.Partitioning): hourly partitions, the current one
// and three ahead, and the default partition.
func TestConformancePartitioned(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness { return setupPartitioned(t, time.Hour).Harness() })
}
