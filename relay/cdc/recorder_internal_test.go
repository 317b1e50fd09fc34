package cdc

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
)

// stmts is a recorder's run whose statements block until the test lets
// each return: started gets the seqs of each statement as it starts.
type stmts struct {
	started chan []int64
	results map[int64]chan error // by the statement's first seq
}

func newStmts(firsts ...int64) *stmts {
	s := &stmts{started: make(chan []int64, 16), results: map[int64]chan error{}}
	for _, f := range firsts {
		s.results[f] = make(chan error, 1)
	}
	return s
}

func (s *stmts) run(out toRecord) error {
	seqs := seqsOfRecord(out)
	s.started <- seqs
	return <-s.results[seqs[0]]
}

func seqsOfRecord(out toRecord) []int64 {
	var seqs []int64
	for _, list := range [][]*entry{out.sent, out.failed, out.deferred} {
		for _, e := range list {
			seqs = append(seqs, e.rec.Seq)
		}
	}
	slices.Sort(seqs)
	return seqs
}

func sentOf(seqs ...int64) toRecord {
	var out toRecord
	for _, s := range seqs {
		out.sent = append(out.sent, &entry{rec: outbox.Record{Seq: s}})
	}
	return out
}

func failedOf(seq int64) toRecord {
	return toRecord{failed: []*entry{{rec: outbox.Record{Seq: seq}}}}
}

// waitStarted returns the seqs of the next statement that starts.
func (s *stmts) waitStarted(t *testing.T) []int64 {
	t.Helper()
	select {
	case seqs := <-s.started:
		return seqs
	case <-time.After(10 * time.Second):
		t.Fatal("no statement started")
		return nil
	}
}

// outcomeOfWait waits for the outcome of a record handed in.
func outcomeOfWait(t *testing.T, w <-chan error) error {
	t.Helper()
	select {
	case err := <-w:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the record's outcome did not come")
		return nil
	}
}

// state returns how many statements run and the seqs that wait. The
// recorder starts a statement (running + 1) under its mutex, in hand or in
// the goroutine of the statement that returned, before that one's waiters
// hear of it.
func state(rc *recorder) (int, []int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.running, seqsOfRecord(rc.pending)
}

// Two records run at once and a third waits; a record that hands
// aggregates to the table path (a failure) starts only once every record
// started before it has returned, and takes what was handed in meanwhile.
func TestRecorder_HandOverWaitsForEarlierStatements(t *testing.T) {
	s := newStmts(1, 2, 3)
	var completed [][]int64
	done := make(chan struct{}, 8)
	rc := newRecorder(s.run, func(out toRecord) {
		completed = append(completed, seqsOfRecord(out))
		done <- struct{}{}
	})
	w1 := rc.hand(sentOf(1))
	if got := s.waitStarted(t); !slices.Equal(got, []int64{1}) {
		t.Fatalf("first statement %v; want [1]", got)
	}
	w2 := rc.hand(sentOf(2))
	if got := s.waitStarted(t); !slices.Equal(got, []int64{2}) {
		t.Fatalf("second statement %v; want [2], beside the first", got)
	}
	// Two run: the failure waits, and so do the acks handed in after it.
	w3 := rc.hand(failedOf(3))
	w4 := rc.hand(sentOf(4))
	if n, waiting := state(rc); n != 2 || !slices.Equal(waiting, []int64{3, 4}) {
		t.Fatalf("%d running, %v waiting; want 2 running and [3 4] waiting", n, waiting)
	}
	s.results[2] <- nil
	if err := outcomeOfWait(t, w2); err != nil {
		t.Fatal(err)
	}
	if n, waiting := state(rc); n != 1 || !slices.Equal(waiting, []int64{3, 4}) {
		t.Fatalf("%d running, %v waiting while the first statement runs; want the hand-over to wait", n, waiting)
	}

	s.results[1] <- nil
	if got := s.waitStarted(t); !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("hand-over statement %v; want [3 4], grouped, after both earlier ones returned", got)
	}
	if err := outcomeOfWait(t, w1); err != nil {
		t.Fatal(err)
	}
	s.results[3] <- nil
	for _, w := range []<-chan error{w3, w4} {
		if err := outcomeOfWait(t, w); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		<-done
	}
	if !rc.idle() || len(completed) != 3 {
		t.Fatalf("idle %v, completed %v; want idle with three statements completed", rc.idle(), completed)
	}
}

// A statement that fails ends the session: its waiters, and those of the
// group waiting behind it, get its error, nothing of theirs is completed
// (the position does not move over it), and whatever is handed in later
// fails at once.
func TestRecorder_FailedStatementFailsItsWaitersAndEndsTheSession(t *testing.T) {
	s := newStmts(1, 2)
	var completed [][]int64
	rc := newRecorder(s.run, func(out toRecord) { completed = append(completed, seqsOfRecord(out)) })
	w1 := rc.hand(sentOf(1))
	s.waitStarted(t)
	w2 := rc.hand(failedOf(2)) // waits for the first to return
	boom := errors.New("connection lost")
	s.results[1] <- boom
	for i, w := range []<-chan error{w1, w2} {
		if err := outcomeOfWait(t, w); !errors.Is(err, boom) {
			t.Fatalf("waiter %d: %v; want the statement's error", i+1, err)
		}
	}
	select {
	case <-rc.failed:
	default:
		t.Fatal("failed not closed")
	}
	if err := rc.failure(); !errors.Is(err, boom) {
		t.Fatalf("failure %v; want the statement's error", err)
	}
	if err := <-rc.hand(sentOf(5)); !errors.Is(err, boom) {
		t.Fatalf("hand-over after the failure: %v; want the statement's error at once", err)
	}
	if n, waiting := state(rc); n != 0 || len(waiting) != 0 {
		t.Fatalf("%d running, %v waiting after the failure; want nothing", n, waiting)
	}
	if len(completed) != 0 {
		t.Fatalf("completed %v; want nothing", completed)
	}
}
