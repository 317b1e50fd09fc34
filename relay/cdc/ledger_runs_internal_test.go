package cdc

import (
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
)

// sized is msg with a payload of n bytes.
func sized(seq int64, agg string, n int) item {
	it := msg(seq, agg)
	it.rec.Payload = make([]byte, n)
	return it
}

// With runs, a claim hands out per aggregate the ready message and the
// messages right after it, in stream order, at most MaxRun; the
// aggregate's next message only once none of its run is out.
func TestLedger_RunsAreTheHeadAndTheMessagesRightAfterIt(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "b"), msg(3, "a"), msg(4, "a"), msg(5, "a"), msg(6, "b")}, 0)
	tok := uuid.New()
	wantSeqs(t, "claim, MaxRun 3", seqs(l.claim(tok, 10, runLimits{max: 3})), []int64{1, 2, 3, 4, 6})
	if got := l.claim(uuid.New(), 10, runLimits{max: 3}); len(got) != 0 {
		t.Fatalf("claim while the runs are out: %v; want nothing", seqs(got))
	}
	l.ack(tok, []int64{1, 3})
	if got := l.claim(uuid.New(), 10, runLimits{max: 3}); len(got) != 0 {
		t.Fatalf("claim while 4 of a is out: %v; want nothing", seqs(got))
	}
	l.ack(tok, []int64{4, 2, 6})
	wantSeqs(t, "after the acks", seqs(l.claim(uuid.New(), 10, runLimits{max: 3})), []int64{5})
}

// A run stops before a message that cannot be published: that one fails
// only once the run was acknowledged.
func TestLedger_RunStopsBeforeAnUnpublishableMessage(t *testing.T) {
	l := newLedger()
	bad := msg(3, "a")
	bad.fail = &store.Failure{Seq: 3, Dead: true, CountAttempt: true}
	bad.err = fmt.Errorf("bad headers")
	l.add(1, []item{msg(1, "a"), msg(2, "a"), bad}, 0)
	tok := uuid.New()
	wantSeqs(t, "claim", seqs(l.claim(tok, 10, runLimits{max: 5})), []int64{1, 2})
	out := l.ack(tok, []int64{1, 2})
	wantSeqs(t, "failed after the run's ack", entrySeqs(out.failed), []int64{3})
}

// A run's payload stays within MaxRunBytes; the head goes out whatever its
// size.
func TestLedger_RunPayloadWithinMaxRunBytes(t *testing.T) {
	l := newLedger()
	l.add(1, []item{sized(1, "a", 600), sized(2, "a", 300), sized(3, "a", 200), sized(4, "b", 2000), sized(5, "b", 1)}, 0)
	tok := uuid.New()
	wantSeqs(t, "claim, MaxRunBytes 1000", seqs(l.claim(tok, 10, runLimits{max: 10, bytes: 1000})), []int64{1, 2, 4})
	l.ack(tok, []int64{1, 2, 4})
	wantSeqs(t, "the rest", seqs(l.claim(uuid.New(), 10, runLimits{max: 10, bytes: 1000})), []int64{3, 5})
}

// The claim's limit takes the heads first, oldest first, then the
// followers rank by rank: every run's second message before any run's
// third.
func TestLedger_RunsWithinTheLimitHeadsFirstThenRankByRank(t *testing.T) {
	add := func() *ledger {
		l := newLedger()
		l.add(1, []item{msg(1, "a"), msg(2, "a"), msg(3, "a"), msg(4, "b"), msg(5, "b"), msg(6, "b"), msg(7, "c")}, 0)
		return l
	}
	for _, tc := range []struct {
		limit int
		want  []int64
	}{
		{2, []int64{1, 4}},
		{4, []int64{1, 2, 4, 7}},
		{5, []int64{1, 2, 4, 5, 7}},
		{6, []int64{1, 2, 3, 4, 5, 7}},
		{10, []int64{1, 2, 3, 4, 5, 6, 7}},
	} {
		wantSeqs(t, fmt.Sprintf("limit %d", tc.limit), seqs(add().claim(uuid.New(), tc.limit, runLimits{max: 3})), tc.want)
	}
}

// The part of a run after its acknowledged part, given back, returns to
// the front of its aggregate's queue: the next claim hands it out again,
// in order, before the messages added meanwhile.
func TestLedger_RunPartlyAckedRestReleasedGoesBackInOrder(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "a"), msg(3, "a"), msg(4, "a")}, 0)
	tok := uuid.New()
	wantSeqs(t, "claim", seqs(l.claim(tok, 10, runLimits{max: 4})), []int64{1, 2, 3, 4})
	l.ack(tok, []int64{1, 2})
	l.add(2, []item{msg(5, "a")}, 0)
	if got := l.claim(uuid.New(), 10, runLimits{max: 4}); len(got) != 0 {
		t.Fatalf("claim while 3 and 4 are out: %v; want nothing", seqs(got))
	}
	if n, out := l.release(tok, []int64{3, 4}); n != 2 || !out.empty() {
		t.Fatalf("released %d; want 2 and nothing to record", n)
	}
	wantSeqs(t, "after the release, MaxRun 2", seqs(l.claim(uuid.New(), 10, runLimits{max: 2})), []int64{3, 4})
}

// A message of a run given back while later messages of the run are
// still out (out of the relay core's order) is not handed out again until
// they are back too: one claim at a time holds an aggregate's messages.
func TestLedger_RunGivenBackOutOfOrderHandsOutNothingUntilAllAreBack(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "a"), msg(3, "a")}, 0)
	tok := uuid.New()
	l.claim(tok, 10, runLimits{max: 3})
	l.release(tok, []int64{1})
	if got := l.claim(uuid.New(), 10, runLimits{max: 3}); len(got) != 0 {
		t.Fatalf("claim while 2 and 3 are out: %v; want nothing", seqs(got))
	}
	l.release(tok, []int64{3, 2})
	wantSeqs(t, "all back", seqs(l.claim(uuid.New(), 10, runLimits{max: 3})), []int64{1, 2, 3})
}

// A run of four fails at position p, as the relay core settles it: the
// messages before p acknowledged, those after it given back first, and then
// the failure of p. The aggregate goes to the table path with p and every
// message behind it (those given back, and one added meanwhile), and the
// stream hands out nothing of it any more, while other aggregates go on.
func TestLedger_RunFailingAtEveryPositionHandsTheRestToTheTablePath(t *testing.T) {
	for p := range 4 {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			l := newLedger()
			l.add(1, []item{msg(1, "a"), msg(2, "a"), msg(3, "a"), msg(4, "a"), msg(5, "a"), msg(6, "b")}, 0)
			tok := uuid.New()
			wantSeqs(t, "claim", seqs(l.claim(tok, 10, runLimits{max: 4})), []int64{1, 2, 3, 4, 6})
			run := []int64{1, 2, 3, 4}
			l.ack(tok, append(run[:p:p], 6))
			if n, _ := l.release(tok, run[p+1:]); n != len(run[p+1:]) {
				t.Fatalf("released %d; want %d", n, len(run[p+1:]))
			}
			if got := l.claim(uuid.New(), 10, runLimits{max: 4}); len(got) != 0 {
				t.Fatalf("claim between the release and the failure: %v; want nothing (%d is still out)", seqs(got), run[p])
			}
			n, out := l.fail(tok, []store.Failure{{Seq: run[p], CountAttempt: true}})
			if n != 1 {
				t.Fatalf("n %d; want 1", n)
			}
			wantSeqs(t, "failed", entrySeqs(out.failed), run[p:p+1])
			wantSeqs(t, "deferred", entrySeqs(out.deferred), append(append([]int64{}, run[p+1:]...), 5))
			l.add(2, []item{msg(7, "a"), msg(8, "b")}, 0)
			wantSeqs(t, "after the failure", seqs(l.claim(uuid.New(), 10, runLimits{max: 4})), []int64{8})
			if l.leased() != 1 || l.ready() != 0 {
				t.Fatalf("leased %d, ready %d; want only 8 out", l.leased(), l.ready())
			}
		})
	}
}

// A run whose message finds the broker unavailable, as the relay core
// settles it (the part before acknowledged, the part after given back, then
// the unavailable one): nothing is recorded, and the whole rest goes back
// in order, handed out again as a run.
func TestLedger_RunUnavailableMidRunGoesBackWholeInOrder(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "a"), msg(3, "a"), msg(4, "a")}, 0)
	tok := uuid.New()
	l.claim(tok, 10, runLimits{max: 4})
	l.ack(tok, []int64{1})
	l.release(tok, []int64{3, 4})
	if got := l.claim(uuid.New(), 10, runLimits{max: 4}); len(got) != 0 {
		t.Fatalf("claim between the release and the failure: %v; want nothing (2 is still out)", seqs(got))
	}
	n, out := l.fail(tok, []store.Failure{{Seq: 2, Unavailable: true}})
	if n != 1 || !out.empty() {
		t.Fatalf("n %d, out %+v; want 1 and nothing to record", n, out)
	}
	wantSeqs(t, "after the unavailable broker, MaxRun 2", seqs(l.claim(uuid.New(), 10, runLimits{max: 2})), []int64{2, 3})
}

// The confirmed position never passes a message of a run that is not
// acknowledged and recorded: the acknowledged part of a run confirms up to
// it, the part given back holds the position until it is acknowledged and
// recorded in turn.
func TestLedger_PositionNeverPassesAnUnackedMessageOfARun(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a")}, 10)
	l.add(2, []item{msg(2, "a")}, 20)
	l.add(3, []item{msg(3, "a")}, 30)
	tok := uuid.New()
	wantSeqs(t, "claim", seqs(l.claim(tok, 10, runLimits{max: 3})), []int64{1, 2, 3})
	acked := l.ack(tok, []int64{1, 2})
	if c, _, _ := l.recorded(acked, 3); c != 20 {
		t.Fatalf("confirm %s after recording 1 and 2; want 0/14", c)
	}
	l.release(tok, []int64{3})
	if c, _, _ := l.recorded(toRecord{}, 3); c != 0 {
		t.Fatalf("confirm %s with 3 given back; want nothing new", c)
	}
	tok2 := uuid.New()
	wantSeqs(t, "claim again", seqs(l.claim(tok2, 10, runLimits{max: 3})), []int64{3})
	last := l.ack(tok2, []int64{3})
	if c, _, _ := l.recorded(last, 3); c != 30 || l.held() != 0 {
		t.Fatalf("confirm %s, held %d; want 0/1E, 0", c, l.held())
	}
}

// A failure of a message of a run while an earlier message of the run is
// still out (not the relay core's way: it fails only the first message not
// acknowledged) is not recorded and not counted: the message goes back,
// and the aggregate is not handed to the table path while the earlier one
// is being published.
func TestLedger_RunFailureBehindAnEarlierMessageStillOutIsGivenBack(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "a")}, 0)
	tok := uuid.New()
	l.claim(tok, 10, runLimits{max: 2})
	n, out := l.fail(tok, []store.Failure{{Seq: 2, CountAttempt: true}})
	if n != 0 || !out.empty() {
		t.Fatalf("n %d, failed %v, deferred %v; want 0 and nothing to record", n, entrySeqs(out.failed), entrySeqs(out.deferred))
	}
	l.ack(tok, []int64{1})
	wantSeqs(t, "after the ack of 1", seqs(l.claim(uuid.New(), 10, runLimits{max: 2})), []int64{2})
}
