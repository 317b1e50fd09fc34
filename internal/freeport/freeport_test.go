package freeport

import "testing"

// The ports lie below the ephemeral range, so that no listener on port 0
// and no outgoing connection takes one between the choice and the
// process's (re)start; and no port is handed out twice.
func TestPort_BelowTheEphemeralRangeAndNeverTwice(t *testing.T) {
	low := ephemeralLow()
	if low-lowestPort < 1000 {
		t.Skipf("the ephemeral range starts at %d: Port falls back to port 0", low)
	}
	seen := map[int]bool{}
	for range 50 {
		port, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if port < lowestPort || port >= low {
			t.Errorf("port %d, want one in [%d, %d)", port, lowestPort, low)
		}
		if seen[port] {
			t.Errorf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
