package cursor

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/store/pgstore"
)

// The window's runs (window.go: pick, follower): several consecutive
// records of one aggregate handed out together, and every path that ends
// their leases.

// runs are the limits of a claim of limit records with runs of at most
// maxRun records and maxBytes of payload.
func runs(limit, maxRun, maxBytes int) claimLimits {
	return claimLimits{limit: limit, maxRun: maxRun, maxRunBytes: maxBytes}
}

// prow is a QUEUED row with a payload of n bytes.
func prow(seq int64, agg string, n int) pgstore.CursorRow {
	r := qrow(seq, agg)
	r.Record.Payload = make([]byte, n)
	return r
}

// aggRows are QUEUED rows from seq 1 on, of the aggregates aggs spells.
func aggRows(aggs string) []pgstore.CursorRow {
	var out []pgstore.CursorRow
	for i, a := range aggs {
		out = append(out, qrow(int64(i+1), string(a)))
	}
	return out
}

func TestCursorWindow_RunsAreTheNextBufferedRecordsOfAnAggregateWithinTheLimits(t *testing.T) {
	cases := []struct {
		name string
		rows []pgstore.CursorRow
		l    claimLimits
		want []int64
	}{
		{"a run of one aggregate", aggRows("aaaa"), runs(10, 10, 0), []int64{1, 2, 3, 4}},
		{"other aggregates between its records", aggRows("abab"), runs(10, 10, 0), []int64{1, 2, 3, 4}},
		{"at most MaxRun per aggregate", aggRows("aaaaa"), runs(10, 3, 0), []int64{1, 2, 3}},
		{"MaxRun 1: heads only", aggRows("aabb"), runs(10, 1, 0), []int64{1, 3}},
		{"MaxRun 0: heads only", aggRows("aabb"), runs(10, 0, 0), []int64{1, 3}},
		{"the limit takes heads first", aggRows("aaabbbcc"), runs(3, 5, 0), []int64{1, 4, 7}},
		{"then followers rank by rank", aggRows("aaaabbbbc"), runs(6, 5, 0), []int64{1, 2, 3, 5, 6, 9}},
		{"the second of every run before any third", aggRows("aaabbbccc"), runs(7, 3, 0), []int64{1, 2, 3, 4, 5, 7, 8}},
		{"payload within MaxRunBytes", []pgstore.CursorRow{prow(1, "a", 40), prow(2, "a", 40), prow(3, "a", 40)}, runs(10, 10, 100), []int64{1, 2}},
		{"a follower that does not fit ends the run", []pgstore.CursorRow{prow(1, "a", 40), prow(2, "a", 70), prow(3, "a", 1)}, runs(10, 10, 100), []int64{1}},
		{"the head whatever its size", []pgstore.CursorRow{prow(1, "a", 500), prow(2, "a", 1), prow(3, "b", 500)}, runs(10, 10, 100), []int64{1, 3}},
		{"no bytes bound at 0", []pgstore.CursorRow{prow(1, "a", 1<<20), prow(2, "a", 1<<20)}, runs(10, 10, 0), []int64{1, 2}},
		{"a gap between two records ends the run", []pgstore.CursorRow{qrow(1, "a"), qrow(2, "a"), qrow(4, "a"), qrow(5, "b")}, runs(10, 10, 0), []int64{1, 2, 5}},
		{"a gap before the head does not", []pgstore.CursorRow{qrow(2, "a"), qrow(3, "a")}, runs(10, 10, 0), []int64{2, 3}},
		{"a gap outside the run does not", []pgstore.CursorRow{qrow(1, "a"), qrow(2, "a"), qrow(4, "b"), qrow(5, "b")}, runs(10, 10, 0), []int64{1, 2, 4, 5}},
		{"a record on its way to the table path ends the run", []pgstore.CursorRow{qrow(1, "a"), qrow(2, "a"), brow(3, "a"), qrow(4, "a")}, runs(10, 10, 0), []int64{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newCursorWindow(0, time.Second)
			w.apply(headRead(90, 100, winT0, tc.rows...))
			mustCheck(t, w)
			eligible := w.eligible(tc.l)
			out := w.handOut(tc.l, tok(1), "A", winT0.Add(time.Minute))
			mustCheck(t, w)
			if got := seqsOfRecs(out); !slices.Equal(got, tc.want) {
				t.Fatalf("handed out %v, want %v\n%s", got, tc.want, dump(w))
			}
			if eligible != len(out) {
				t.Errorf("eligible = %d, handOut gave %d", eligible, len(out))
			}
			if more := w.handOut(tc.l, tok(2), "B", winT0.Add(time.Minute)); len(more) > 0 {
				t.Errorf("a second claim got %v while the runs are leased", seqsOfRecs(more))
			}
		})
	}
}

func TestCursorWindow_AGapRowThatFillsTheGapLetsTheRunGoOn(t *testing.T) {
	w := newCursorWindow(0, time.Second)
	w.apply(headRead(90, 100, winT0, qrow(1, "a"), qrow(3, "a"))) // 2 not visible yet
	if got := seqsOfRecs(w.handOut(runs(10, 10, 0), tok(1), "A", winT0.Add(time.Minute))); !slices.Equal(got, []int64{1}) {
		t.Fatalf("handed out %v, want [1]: 2 may still commit as a's", got)
	}
	w.ack(tok(1), []int64{1})
	w.apply(gapRead(90, 100, winT0, true, qrow(2, "a")))
	mustCheck(t, w)
	if got := seqsOfRecs(w.handOut(runs(10, 10, 0), tok(2), "A", winT0.Add(time.Minute))); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("after the gap filled handed out %v, want [2 3]", got)
	}
}

func TestCursorWindow_AckOfPartOfARunThenReleaseOfTheRest(t *testing.T) {
	w := newCursorWindow(0, time.Second)
	w.apply(headRead(90, 100, winT0, aggRows("aaaab")...))
	if got := seqsOfRecs(w.handOut(runs(10, 10, 0), tok(1), "A", winT0.Add(time.Minute))); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("handed out %v, want [1 2 3 4 5]", got)
	}
	if n := w.ack(tok(1), []int64{1, 2, 5}); n != 3 {
		t.Fatalf("ack = %d, want 3", n)
	}
	mustCheck(t, w)
	if w.pos != 2 {
		t.Errorf("position %d, want 2: 3 and 4 are still leased", w.pos)
	}
	if got := w.handOut(runs(10, 10, 0), tok(2), "B", winT0.Add(time.Minute)); len(got) > 0 {
		t.Fatalf("handed out %v while a's 3 and 4 are leased", seqsOfRecs(got))
	}
	if n := w.release(tok(1), []int64{3, 4}); n != 2 {
		t.Fatalf("release = %d, want 2", n)
	}
	mustCheck(t, w)
	if w.pos != 2 {
		t.Errorf("position %d after the release, want 2", w.pos)
	}
	if got := seqsOfRecs(w.handOut(runs(10, 10, 0), tok(2), "B", winT0.Add(time.Minute))); !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("after the release handed out %v, want [3 4] again, in order", got)
	}
}

func TestCursorWindow_ARunReleasedBehindItsLeasedHeadWaitsForIt(t *testing.T) {
	w := newCursorWindow(0, time.Second)
	w.apply(headRead(90, 100, winT0, aggRows("aaa")...))
	w.handOut(runs(10, 10, 0), tok(1), "A", winT0.Add(time.Minute))
	w.release(tok(1), []int64{2, 3}) // what the relay does after 1 was not sent
	mustCheck(t, w)
	if got := w.handOut(runs(10, 10, 0), tok(2), "B", winT0.Add(time.Minute)); len(got) > 0 {
		t.Fatalf("handed out %v while a's 1 is leased", seqsOfRecs(got))
	}
	w.release(tok(1), []int64{1})
	if got := seqsOfRecs(w.handOut(runs(10, 10, 0), tok(2), "B", winT0.Add(time.Minute))); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("handed out %v, want the run [1 2 3] from a's lowest open record", got)
	}
}

func TestCursorWindow_AFailureInARunTablesItAndEverythingBehindIt(t *testing.T) {
	const n = 4 // a's run: seqs 1-4; b's 5 and a's 6 (beyond MaxRun) follow
	for p := int64(1); p <= n; p++ {
		t.Run(fmt.Sprint("failure at ", p), func(t *testing.T) {
			w := newCursorWindow(0, time.Second)
			w.apply(headRead(90, 100, winT0, append(aggRows("aaaab"), qrow(6, "a"))...))
			if got := seqsOfRecs(w.handOut(runs(10, n, 0), tok(1), "A", winT0.Add(time.Minute))); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
				t.Fatalf("handed out %v, want [1 2 3 4 5]", got)
			}
			// The relay's order: the records before p were sent, those
			// after it are given back, then p's failure is recorded.
			var sent, back []int64
			for s := int64(1); s <= n; s++ {
				switch {
				case s < p:
					sent = append(sent, s)
				case s > p:
					back = append(back, s)
				}
			}
			w.ack(tok(1), append(sent, 5))
			if got := w.release(tok(1), back); got != int64(len(back)) {
				t.Fatalf("release of %v = %d", back, got)
			}
			if got := w.handOut(runs(10, n, 0), tok(2), "B", winT0.Add(time.Minute)); len(got) > 0 {
				t.Fatalf("handed out %v between the release and the failure, while %d is leased", seqsOfRecs(got), p)
			}
			mine, behind := w.failing(tok(1), []int64{p})
			wantBehind := append(slices.Clone(back), 6)
			if !slices.Equal(mine, []int64{p}) || !slices.Equal(behind, wantBehind) {
				t.Fatalf("failing = %v, %v; want [%d], %v", mine, behind, p, wantBehind)
			}
			w.failed(tok(1), mine, behind)
			mustCheck(t, w)
			if w.open() != 0 || w.pos != 6 {
				t.Fatalf("after the failure want nothing open and the position at 6\n%s", dump(w))
			}
			if w.holds("Order", "a") {
				t.Errorf("the window still holds a record of a")
			}
			// A later message of a is read behind the failed one (the
			// database says it is blocked): it follows to the table path.
			w.apply(headRead(90, 100, winT0, brow(7, "a")))
			if got := w.handOut(runs(10, n, 0), tok(3), "C", winT0.Add(time.Minute)); len(got) > 0 {
				t.Fatalf("handed out %v of a after its failure", seqsOfRecs(got))
			}
		})
	}
}

func TestCursorWindow_AFailureWhileTheRunIsLeasedTablesTheWholeRest(t *testing.T) {
	w := newCursorWindow(0, time.Second)
	w.apply(headRead(90, 100, winT0, aggRows("aaa")...))
	w.handOut(runs(10, 10, 0), tok(1), "A", winT0.Add(time.Minute))
	// 2 and 3 not given back first: the table path owns them all the same.
	mine, behind := w.failing(tok(1), []int64{1})
	if !slices.Equal(mine, []int64{1}) || !slices.Equal(behind, []int64{2, 3}) {
		t.Fatalf("failing = %v, %v; want [1], [2 3]", mine, behind)
	}
	w.failed(tok(1), mine, behind)
	mustCheck(t, w)
	if w.open() != 0 {
		t.Fatalf("want nothing open after the failure\n%s", dump(w))
	}
	if n := w.release(tok(1), []int64{2, 3}); n != 0 {
		t.Errorf("a release after the failure = %d, want 0: they are the table path's", n)
	}
}

func TestCursorWindow_AnEndedLeaseGivesBackTheWholeRun(t *testing.T) {
	w := newCursorWindow(0, time.Second)
	w.apply(headRead(90, 100, winT0, aggRows("aaabb")...))
	w.handOut(runs(10, 10, 0), tok(1), "A", winT0.Add(time.Second))
	w.ack(tok(1), []int64{1})
	w.expire(winT0.Add(time.Second - time.Nanosecond))
	if got := w.handOut(runs(10, 10, 0), tok(2), "B", winT0.Add(time.Minute)); len(got) > 0 {
		t.Fatalf("handed out %v while the lease runs", seqsOfRecs(got))
	}
	w.expire(winT0.Add(time.Second))
	mustCheck(t, w)
	for _, s := range []int64{2, 3, 4, 5} {
		if st := w.recs[s].state; st != recBuffered {
			t.Errorf("record %d in state %d after its lease ended, want buffered", s, st)
		}
	}
	if got := seqsOfRecs(w.handOut(runs(10, 10, 0), tok(2), "B", winT0.Add(time.Minute))); !slices.Equal(got, []int64{2, 3, 4, 5}) {
		t.Errorf("the next claim got %v, want [2 3 4 5]", got)
	}
}

func TestCursorWindow_ThePositionPassesOnlyTheHandledPartOfRuns(t *testing.T) {
	w := newCursorWindow(0, time.Second)
	w.apply(headRead(90, 100, winT0, aggRows("aabbaab")...)) // a: 1 2 5 6, b: 3 4 7
	if got := seqsOfRecs(w.handOut(runs(10, 10, 0), tok(1), "A", winT0.Add(time.Minute))); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("handed out %v, want everything", got)
	}
	steps := []struct {
		ack     []int64
		wantPos int64
	}{
		{[]int64{3, 4}, 0}, // b's prefix; a's 1 is still leased
		{[]int64{1, 2}, 4},
		{[]int64{7}, 4},
		{[]int64{5}, 5},
		{[]int64{6}, 7},
	}
	for _, st := range steps {
		w.ack(tok(1), st.ack)
		mustCheck(t, w)
		if w.pos != st.wantPos {
			t.Fatalf("after the ack of %v the position is %d, want %d\n%s", st.ack, w.pos, st.wantPos, dump(w))
		}
		head, lo, hi, _ := w.unhandled(maxSavedRanges)
		for s := w.pos + 1; s <= head; s++ {
			i, _ := slices.BinarySearch(hi, s)
			inRange := i < len(lo) && lo[i] <= s
			if _, open := w.recs[s]; open != inRange {
				t.Fatalf("a save records %d as unhandled = %v, but it is open = %v", s, inRange, open)
			}
		}
	}
}
