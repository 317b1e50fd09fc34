package ops

import (
	"testing"
	"time"
)

// The throughput is measured against the newest sample at least a minute
// old, and only while it is at most five minutes old; samples closer than
// cursorSampleEvery are not kept, so that they stay few.
func TestCursorSamples_BaseIsTheNewestAtLeastAMinuteOld(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var cs cursorSamples
	for _, ago := range []time.Duration{7 * time.Minute, 90 * time.Second, 70 * time.Second, 68 * time.Second, 30 * time.Second} {
		cs.add(cursorSample{local: now.Add(-ago), position: int64(ago / time.Second)})
	}
	if len(cs.samples) != 3 {
		t.Errorf("%d samples kept, want 3 (the 7-minute one is too old, the 68-second one too close to the 70-second one)", len(cs.samples))
	}
	if s, ok := cs.base(now); !ok || s.position != 70 {
		t.Errorf("base = %+v, %v; want the 70-second-old sample", s, ok)
	}
	if _, ok := cs.base(now.Add(-45 * time.Second)); ok {
		t.Error("a base was found 45 s earlier, when no sample was a minute old")
	}
	if _, ok := cs.base(now.Add(5 * time.Minute)); ok {
		t.Error("a base was found when the newest old enough sample is over five minutes old")
	}
}

func TestPerMinute_ScalesToAMinute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int64
		d    time.Duration
		want int64
	}{{30, time.Minute, 30}, {30, 2 * time.Minute, 15}, {10, 65 * time.Second, 9}, {5, 0, 0}} {
		if got := perMinute(tc.n, tc.d); got != tc.want {
			t.Errorf("perMinute(%d, %s) = %d, want %d", tc.n, tc.d, got, tc.want)
		}
	}
}
