package backoff_test

import (
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/backoff"
)

// The wait doubles from base up to the limit, never exceeds it, and is
// never less than half of the un-jittered wait.
func TestDelay_DoublesUpToTheLimitWithJitter(t *testing.T) {
	const base, limit = time.Second, 30 * time.Second
	for n, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		want *= time.Second
		for range 100 {
			d := backoff.Delay(base, limit, n)
			if d > want || d < want/2 {
				t.Fatalf("Delay(%s, %s, %d) = %s; want within [%s, %s]", base, limit, n, d, want/2, want)
			}
		}
	}
	if d := backoff.Delay(base, limit, 1000); d > limit || d < limit/2 {
		t.Fatalf("Delay after 1000 retries = %s; want within [%s, %s]", d, limit/2, limit)
	}
}
