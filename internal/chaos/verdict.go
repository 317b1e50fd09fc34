package chaos

import "time"

// Verdict is what [Check] decides.
type Verdict struct {
	Pass bool
	// Violations maps each violated invariant to examples of the violation.
	Violations map[string][]string
	counts     map[string]int

	Requests    RequestCounts
	Events      EventCounts
	Duplicates  DupCounts
	Effects     EffectCounts
	DeadLetters DeadLetterCounts
	// LatencyCalm and LatencyFaults are the enqueue-to-first-copy latencies
	// of the events no fault window touched, and of the others.
	LatencyCalm, LatencyFaults Latency
	// Drain is the time from the heal to the drain.
	Drain time.Duration
	// Stalls are the publishing stalls after the relay-zombie faults, in
	// time order.
	Stalls []PauseStall
}

// ViolationCount is how many times inv was violated (Violations keeps at
// most 20 examples).
func (v Verdict) ViolationCount(inv string) int { return v.counts[inv] }

// RequestCounts count the workload's writes by outcome.
type RequestCounts struct {
	OK            int `json:"ok"`
	Rejected      int `json:"rejected"`
	Indeterminate int `json:"indeterminate"`
}

func (c *RequestCounts) count(outcome string) {
	switch outcome {
	case OutcomeOK:
		c.OK++
	case OutcomeRejected:
		c.Rejected++
	default:
		c.Indeterminate++
	}
}

// EventCounts count events.
type EventCounts struct {
	Committed         int `json:"committed"`
	Delivered         int `json:"delivered"`
	Lost              int `json:"lost"`
	Phantom           int `json:"phantom"`
	OutOfOrder        int `json:"outOfOrder"`
	StaleRedeliveries int `json:"staleRedeliveries"`
}

// DupCounts count duplicate copies on the topics.
type DupCounts struct {
	Total         int `json:"total"`
	MaxCopies     int `json:"maxCopies"`
	OutsideFaults int `json:"outsideFaultWindows"`
}

// EffectCounts count business effects per event: once, missing, twice,
// in a wrong final state, and SKUs whose stock is not conserved.
type EffectCounts struct {
	Once        int `json:"once"`
	Missing     int `json:"missing"`
	Twice       int `json:"twice"`
	WrongState  int `json:"wrongState"`
	StockErrors int `json:"stockErrors"`
}

// DeadLetterCounts are the dead letters expected (the poison) and found.
type DeadLetterCounts struct {
	Expected int `json:"expected"`
	Actual   int `json:"actual"`
}

// Latency is a distribution's p50, p99 and max, and its size. Its JSON
// form is in milliseconds.
type Latency struct {
	N             int
	P50, P99, Max time.Duration
}
