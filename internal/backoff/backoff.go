// Package backoff computes the waits between the attempts of a retry loop:
// exponential, capped, with jitter.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay is the wait before retry n (0 for the first retry): min(limit,
// base·2^n), minus a random jitter of up to half of it, so that processes
// that failed together do not all retry at the same moment.
func Delay(base, limit time.Duration, n int) time.Duration {
	d := limit
	if n >= 0 && n < 40 {
		if e := base << n; e > 0 && e < d {
			d = e
		}
	}
	return d - rand.N(d/2+1)
}
