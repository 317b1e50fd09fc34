package ops

import (
	"context"
	"time"

	"github.com/outbox-dev/outbox/internal/memo"
)

// DefaultStatsInterval is NewStatsCache's interval when none is given.
const DefaultStatsInterval = 5 * time.Second

// statsReadTimeout bounds one read of a StatsCache.
const statsReadTimeout = 10 * time.Second

// StatsCache shares one [Stats] snapshot among any number of readers:
// metrics scrapes, status page views, probes. It reads the outbox at most
// once per interval, so that the readers cost the database one Stats
// round trip per interval however many and however frequent they are;
// readers that ask while a read runs wait for that read. A failed read is
// reused for the interval too, so a database that does not answer is not
// asked again by every reader. Safe for concurrent use.
type StatsCache struct {
	v *memo.Value[Stats]
}

// NewStatsCache returns a cache of o.Stats, read at most once per every.
// every defaults to DefaultStatsInterval (5s) when zero. Each read is
// bounded by 10s and is not cancelled when the reader that started it
// gives up.
func NewStatsCache(o *Ops, every time.Duration) *StatsCache {
	if every == 0 {
		every = DefaultStatsInterval
	}
	return &StatsCache{v: memo.New(o.Stats, every, statsReadTimeout)}
}

// Stats returns the snapshot of the last read if it is younger than the
// interval, else reads a new one (or waits for the read that runs) until
// ctx is done.
func (c *StatsCache) Stats(ctx context.Context) (Stats, error) { return c.v.Get(ctx) }
