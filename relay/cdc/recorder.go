package cdc

import (
	"sync"
)

// maxRecords is how many records (one statement each) may run at once.
// They touch different rows and may commit in any order, except that a
// record that hands aggregates to the table path starts only after every
// record started before it has returned.
const maxRecords = 2

// recorder is one session's bookkeeping in the database: it takes what
// the session's ledger leaves to record (toRecord: from the stream's
// check, and from the acks and failures the relay core's workers mark),
// groups everything that waits into one record.sql statement, and runs up
// to maxRecords statements at once. A group that hands aggregates over to
// the table path (failures, deferred messages) starts only once every
// statement started before it has returned: the table path must never take
// over an aggregate whose earlier failure is not recorded yet (it would
// send the next message without counting that attempt).
//
// When a statement commits, complete passes its messages in the ledger
// (which may confirm a new position). The first statement that fails or is
// refused by the fence ends the session: it and every group waiting get
// its error, and so does everything handed in later.
type recorder struct {
	// run records a group: Relay.record, or a test's.
	run func(toRecord) error
	// complete takes a group whose record committed (session.complete).
	complete func(toRecord)

	mu      sync.Mutex
	pending toRecord     // handed in and not started, one group
	waiters []chan error // of pending
	running int          // statements started and not returned
	err     error        // the first statement's failure
	// failed is closed with err set.
	failed chan struct{}
	// progress gets a token whenever a statement returned.
	progress chan struct{}
}

func newRecorder(run func(toRecord) error, complete func(toRecord)) *recorder {
	return &recorder{run: run, complete: complete, failed: make(chan struct{}), progress: make(chan struct{}, 1)}
}

// hand takes out into the group that waits to be recorded and returns a
// channel (buffered: nobody need read it) that gets the outcome of its
// record: nil once it committed, or the error that ends the session. An
// empty out is completed at once, on the caller's goroutine (complete
// takes the strategy's mutex: hand it in without holding that mutex);
// a non-empty one takes only rc.mu, so that the strategy hands it in under
// its mutex, in the order of the ledger's changes. After a failure it
// returns that failure at once.
func (rc *recorder) hand(out toRecord) <-chan error {
	ch := make(chan error, 1)
	rc.mu.Lock()
	if rc.err != nil {
		ch <- rc.err
		rc.mu.Unlock()
		return ch
	}
	if out.empty() {
		rc.mu.Unlock()
		rc.complete(out)
		ch <- nil
		return ch
	}
	rc.pending.merge(out)
	rc.waiters = append(rc.waiters, ch)
	rc.startReady()
	rc.mu.Unlock()
	return ch
}

// startReady starts the pending group if it may start now. rc.mu is held.
func (rc *recorder) startReady() {
	if rc.err != nil || rc.pending.empty() || rc.running >= maxRecords {
		return
	}
	if rc.pending.handsOver() && rc.running > 0 {
		return // after every earlier statement returned
	}
	out, ws := rc.pending, rc.waiters
	rc.pending, rc.waiters = toRecord{}, nil
	rc.running++
	go rc.statement(out, ws)
}

// statement records out, completes it once committed, and tells its
// waiters.
func (rc *recorder) statement(out toRecord, ws []chan error) {
	err := rc.run(out)
	if err == nil {
		rc.complete(out)
	}
	rc.mu.Lock()
	rc.running--
	if err != nil && rc.err == nil {
		rc.err = err
		close(rc.failed)
		ws = append(ws, rc.waiters...)
		rc.pending, rc.waiters = toRecord{}, nil
	}
	rc.startReady()
	rc.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
	select {
	case rc.progress <- struct{}{}:
	default:
	}
}

// failure returns the error that ended the recorder, or nil.
func (rc *recorder) failure() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.err
}

// idle reports whether nothing waits or runs.
func (rc *recorder) idle() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.running == 0 && rc.pending.empty()
}
