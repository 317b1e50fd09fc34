// Package statuscount holds what the stores' Counts share: the statuses a
// count reports, each present with 0 until a row says otherwise.
package statuscount

import "github.com/outbox-dev/outbox"

// Zero returns a count of 0 for each status of the relay's table path:
// PENDING, IN_FLIGHT, SENT, FAILED and DEAD_LETTER. A store's Counts
// starts from it and sets the statuses its rows hold.
func Zero() map[outbox.Status]int64 {
	return map[outbox.Status]int64{
		outbox.StatusPending:    0,
		outbox.StatusInFlight:   0,
		outbox.StatusSent:       0,
		outbox.StatusFailed:     0,
		outbox.StatusDeadLetter: 0,
	}
}
