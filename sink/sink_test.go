package sink_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/outbox-dev/outbox/sink"
)

// A message whose topic cannot take records waits at least a second and
// at most ten, half the time the topic has been unusable.
func TestTopicRetryDelay_WithinItsBounds(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		unusableFor time.Duration
		lo, hi      time.Duration
	}{
		{0, sink.MinTopicRetryDelay, sink.MinTopicRetryDelay},
		{time.Second, sink.MinTopicRetryDelay, sink.MinTopicRetryDelay},
		{8 * time.Second, 3200 * time.Millisecond, 4 * time.Second},
		{time.Hour, 8 * time.Second, sink.MaxTopicRetryDelay},
	} {
		err := &sink.TopicError{Topic: "t", Err: kerr.UnknownTopicOrPartition, Since: now.Add(-tc.unusableFor)}
		for range 200 {
			if d := sink.TopicRetryDelay(err, now); d < tc.lo || d > tc.hi {
				t.Fatalf("unusable for %s: delay %s, want %s to %s", tc.unusableFor, d, tc.lo, tc.hi)
			}
		}
	}
	if d := sink.TopicRetryDelay(nil, now); d != sink.MinTopicRetryDelay {
		t.Errorf("delay without a TopicError = %s, want %s", d, sink.MinTopicRetryDelay)
	}
}
