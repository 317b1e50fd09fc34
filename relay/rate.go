package relay

import (
	"sync"
	"time"
)

// The claim rate that sets the linger (Config.LingerAbove) is measured over
// the last rateWindow, in buckets of rateBucket, and from the start of a
// busy spell while that is younger than the window (but over at least
// rateMinSpan). So a relay whose claims start finding messages at the
// writers' full rate lingers within tens of milliseconds, not after a whole
// window of claims at full speed.
const (
	rateWindow  = 250 * time.Millisecond
	rateBucket  = 10 * time.Millisecond
	rateMinSpan = 50 * time.Millisecond
)

// rateMeter measures messages claimed per second (see rateWindow). Its
// zero value is ready to use.
type rateMeter struct {
	mu     sync.Mutex
	counts [rateWindow / rateBucket]int
	sum    int
	bucket int64     // the bucket (time since since, in rateBucket) counts[bucket%len] holds
	since  time.Time // the first claim with messages after a rateWindow without
	last   time.Time // the last claim with messages
}

func (m *rateMeter) add(now time.Time, n int) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last.IsZero() || now.Sub(m.last) >= rateWindow {
		m.counts, m.sum, m.bucket, m.since = [len(m.counts)]int{}, 0, 0, now
	}
	m.roll(now)
	m.counts[m.bucket%int64(len(m.counts))] += n
	m.sum += n
	m.last = now
}

// roll moves the newest bucket up to now, emptying the buckets it passes.
func (m *rateMeter) roll(now time.Time) {
	b := int64(now.Sub(m.since) / rateBucket)
	for i := 0; m.bucket < b && i < len(m.counts); i++ {
		m.bucket++
		k := m.bucket % int64(len(m.counts))
		m.sum -= m.counts[k]
		m.counts[k] = 0
	}
	m.bucket = max(m.bucket, b)
}

func (m *rateMeter) perSecond(now time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last.IsZero() || now.Sub(m.last) >= rateWindow {
		return 0
	}
	m.roll(now)
	span := min(max(now.Sub(m.since), rateMinSpan), rateWindow)
	return float64(m.sum) / span.Seconds()
}
