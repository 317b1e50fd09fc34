package cdc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

// msg is a message of aggregate agg with seq seq, to publish.
func msg(seq int64, agg string) item {
	rec := outbox.Record{Seq: seq}
	rec.AggregateType, rec.AggregateID = "Order", agg
	return item{rec: rec, bytes: 100}
}

// noRuns claims one message per aggregate (MaxRun 1).
var noRuns = runLimits{max: 1}

func seqs(recs []outbox.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func entrySeqs(es []*entry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.rec.Seq
	}
	return out
}

func wantSeqs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v; want %v", what, got, want)
	}
}

// A claim hands out at most one message per aggregate, in stream order,
// and an aggregate's next message only after the previous one was
// acknowledged.
func TestLedger_OnePerAggregateInStreamOrderAfterTheAck(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "b"), msg(3, "a"), msg(4, "c"), msg(5, "a")}, 100)
	tok := uuid.New()
	got := l.claim(tok, 10, noRuns)
	wantSeqs(t, "first claim", seqs(got), []int64{1, 2, 4})
	if got := l.claim(uuid.New(), 10, noRuns); len(got) != 0 {
		t.Fatalf("second claim before any ack: %v; want nothing (each aggregate's next waits)", seqs(got))
	}
	out := l.ack(tok, []int64{2, 1})
	wantSeqs(t, "acked", entrySeqs(out.sent), []int64{2, 1})
	tok2 := uuid.New()
	wantSeqs(t, "after acking 1", seqs(l.claim(tok2, 10, noRuns)), []int64{3})
	l.ack(tok, []int64{4})
	l.ack(tok2, []int64{3})
	wantSeqs(t, "after acking 3", seqs(l.claim(uuid.New(), 10, noRuns)), []int64{5})
}

// A claim's limit bounds it; the rest stays ready, oldest first.
func TestLedger_ClaimLimit(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "b"), msg(3, "c")}, 0)
	wantSeqs(t, "limit 2", seqs(l.claim(uuid.New(), 2, noRuns)), []int64{1, 2})
	if l.ready() != 1 || l.leased() != 2 {
		t.Fatalf("ready %d, leased %d; want 1, 2", l.ready(), l.leased())
	}
	wantSeqs(t, "the rest", seqs(l.claim(uuid.New(), 2, noRuns)), []int64{3})
}

// Marks of another claim's token change nothing.
func TestLedger_OtherTokensChangeNothing(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "a")}, 0)
	tok := uuid.New()
	l.claim(tok, 10, noRuns)
	other := uuid.New()
	if out := l.ack(other, []int64{1}); len(out.sent) != 0 {
		t.Fatalf("ack with another token acknowledged %v", entrySeqs(out.sent))
	}
	if n, out := l.fail(other, []store.Failure{{Seq: 1, CountAttempt: true}}); n != 0 || !out.empty() {
		t.Fatalf("fail with another token: n %d", n)
	}
	if n, _ := l.release(other, []int64{1}); n != 0 {
		t.Fatalf("release with another token: n %d", n)
	}
	if l.leased() != 1 {
		t.Fatalf("leased %d; want 1", l.leased())
	}
	if out := l.ack(tok, []int64{1, 1}); len(out.sent) != 1 {
		t.Fatalf("ack twice in one call acknowledged %d; want 1", len(out.sent))
	}
}

// A message that found the broker unavailable goes back first in line, and
// so does a released one; neither is recorded.
func TestLedger_UnavailableAndReleasedGoBackFirstInLine(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "b"), msg(3, "a")}, 0)
	tok := uuid.New()
	l.claim(tok, 1, noRuns)
	n, out := l.fail(tok, []store.Failure{{Seq: 1, Unavailable: true, Delay: 500}})
	if n != 1 || !out.empty() {
		t.Fatalf("unavailable: n %d, out %+v; want 1 and nothing to record", n, out)
	}
	tok2 := uuid.New()
	wantSeqs(t, "after the unavailable broker", seqs(l.claim(tok2, 10, noRuns)), []int64{1, 2})
	if n, _ := l.release(tok2, []int64{2, 1}); n != 2 {
		t.Fatalf("released %d; want 2", n)
	}
	wantSeqs(t, "after the release", seqs(l.claim(uuid.New(), 10, noRuns)), []int64{1, 2})
}

// A failure blocks its aggregate: the messages queued behind it, and those
// added later, are deferred, until the failure is recorded and a check
// that started after that was added. Other aggregates go on.
func TestLedger_FailureBlocksItsAggregateUntilACheckAfterItsRecord(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a"), msg(2, "b"), msg(3, "a"), msg(4, "a")}, 0)
	tok := uuid.New()
	l.claim(tok, 10, noRuns)
	n, out := l.fail(tok, []store.Failure{{Seq: 1, CountAttempt: true}})
	if n != 1 {
		t.Fatalf("n %d; want 1", n)
	}
	wantSeqs(t, "failed", entrySeqs(out.failed), []int64{1})
	wantSeqs(t, "deferred behind it", entrySeqs(out.deferred), []int64{3, 4})
	if !out.handsOver() {
		t.Fatal("a failure's record must hand over")
	}

	// Check 2 started before the failure was recorded: its message of a
	// is deferred too.
	more := l.add(2, []item{msg(5, "a"), msg(6, "b")}, 0)
	wantSeqs(t, "added while blocked", entrySeqs(more.deferred), []int64{5})
	l.ack(tok, []int64{2})
	wantSeqs(t, "b goes on", seqs(l.claim(uuid.New(), 10, noRuns)), []int64{6})

	// The records commit when 3 checks have started: check 3 was maybe
	// planned before the commit, so a (7) is still deferred; check 4
	// started after it.
	l.recorded(out, 3)
	l.recorded(more, 3)
	third := l.add(3, []item{msg(7, "a")}, 0)
	wantSeqs(t, "check 3", entrySeqs(third.deferred), []int64{7})
	l.recorded(third, 3)
	if fourth := l.add(4, []item{msg(8, "a")}, 0); !fourth.empty() {
		t.Fatalf("check 4 started after the records: deferred %v", entrySeqs(fourth.deferred))
	}
	wantSeqs(t, "a again from the stream", seqs(l.claim(uuid.New(), 10, noRuns)), []int64{8})
}

// A message the check deferred blocks its aggregate from there on; the
// aggregate's earlier messages still go out in order.
func TestLedger_DeferredVerdictBlocksOnlyWhatFollows(t *testing.T) {
	l := newLedger()
	deferred := msg(3, "a")
	deferred.act = actDefer
	out := l.add(1, []item{msg(1, "a"), msg(2, "a"), deferred, msg(4, "a")}, 0)
	wantSeqs(t, "deferred", entrySeqs(out.deferred), []int64{3, 4})
	tok := uuid.New()
	wantSeqs(t, "head", seqs(l.claim(tok, 10, noRuns)), []int64{1})
	l.ack(tok, []int64{1})
	wantSeqs(t, "the earlier message after the head", seqs(l.claim(tok, 10, noRuns)), []int64{2})
}

// A message that could not be decoded fails at once and blocks its
// aggregate; a skipped message (SENT or gone) is done at once.
func TestLedger_DecodeFailureAndSkip(t *testing.T) {
	l := newLedger()
	bad := msg(1, "a")
	bad.fail = &store.Failure{Seq: 1, Dead: true, CountAttempt: true}
	bad.err = fmt.Errorf("bad headers")
	skipped := msg(3, "b")
	skipped.act = actSkip
	out := l.add(1, []item{bad, msg(2, "a"), skipped}, 50)
	wantSeqs(t, "failed", entrySeqs(out.failed), []int64{1})
	if out.failed[0].err == nil || !out.failed[0].failure.Dead {
		t.Fatal("the failed entry lost its reason or decision")
	}
	wantSeqs(t, "deferred", entrySeqs(out.deferred), []int64{2})
	if l.ready() != 0 {
		t.Fatalf("ready %d; want 0", l.ready())
	}
	confirm, msgs, bytes := l.recorded(out, 1)
	if confirm != 50 || msgs != 3 || bytes != 300 || l.held() != 0 {
		t.Fatalf("confirm %s, msgs %d, bytes %d, held %d; want 0/32, 3, 300, 0", confirm, msgs, bytes, l.held())
	}
}

// A message that cannot be published, behind an earlier message of its
// aggregate that is still being published, fails only once that one was
// acknowledged (or failed): its record hands the aggregate to the table
// path, which must not take over a message the stream still publishes.
func TestLedger_UnpublishableWaitsForTheMessagesBeforeIt(t *testing.T) {
	for _, outcome := range []string{"ack", "fail"} {
		t.Run(outcome, func(t *testing.T) {
			l := newLedger()
			bad := msg(2, "a")
			bad.fail = &store.Failure{Seq: 2, Dead: true, CountAttempt: true}
			bad.err = fmt.Errorf("bad headers")
			out := l.add(1, []item{msg(1, "a"), bad, msg(3, "a")}, 0)
			if len(out.failed) != 0 {
				t.Fatalf("failed %v while 1 waits to be published; want nothing yet", entrySeqs(out.failed))
			}
			wantSeqs(t, "deferred behind it", entrySeqs(out.deferred), []int64{3})
			tok := uuid.New()
			wantSeqs(t, "claim", seqs(l.claim(tok, 10, noRuns)), []int64{1})
			if outcome == "ack" {
				out = l.ack(tok, []int64{1})
				wantSeqs(t, "sent", entrySeqs(out.sent), []int64{1})
				wantSeqs(t, "failed", entrySeqs(out.failed), []int64{2})
			} else {
				_, out = l.fail(tok, []store.Failure{{Seq: 1, CountAttempt: true}})
				wantSeqs(t, "failed", entrySeqs(out.failed), []int64{1, 2})
			}
			if out.failed[len(out.failed)-1].err == nil || len(out.deferred) != 0 || l.ready() != 0 {
				t.Fatalf("deferred %v, ready %d; want the failure with its reason, nothing else", entrySeqs(out.deferred), l.ready())
			}
		})
	}
}

// The confirmed position moves only over recorded messages, in stream
// order, whatever order the records commit in; an idle position is
// confirmed once everything before it is.
func TestLedger_PositionOnlyOverRecordedInStreamOrder(t *testing.T) {
	l := newLedger()
	l.add(1, []item{msg(1, "a")}, 10)
	l.add(2, []item{msg(2, "b")}, 20)
	l.add(0, nil, 25)
	tok := uuid.New()
	l.claim(tok, 10, noRuns)
	first := l.ack(tok, []int64{1})
	second := l.ack(tok, []int64{2})
	if c, n, _ := l.recorded(second, 2); c != 0 || n != 0 {
		t.Fatalf("recording the second batch first confirmed %s (%d messages); want nothing", c, n)
	}
	if l.held() != 2 {
		t.Fatalf("held %d; want 2", l.held())
	}
	c, n, b := l.recorded(first, 2)
	if c != 25 || n != 2 || b != 200 || l.held() != 0 {
		t.Fatalf("confirm %s, msgs %d, bytes %d, held %d; want 0/19, 2, 200, 0", c, n, b, l.held())
	}
	l.add(0, nil, 30)
	if c, _, _ := l.recorded(toRecord{}, 2); c != 30 {
		t.Fatalf("idle position: confirm %s; want 0/1E", c)
	}
}

// TestLedger_RandomHistories drives the ledger through random histories
// of adds, claims, acks, failures, releases and record commits in any
// order, and checks its promises against a model after every step:
//   - a message is handed out only after every earlier message of its
//     aggregate was acknowledged or is handed out in the same claim (a
//     run), and never behind a failed or deferred one unless its check
//     started after that one's record committed;
//   - the messages of an aggregate handed out at once are of one claim, at
//     most MaxRun of them (one in the first half of the seeds, which never
//     claim runs);
//   - a failure is left to record (which hands its aggregate to the table
//     path) only when no earlier message of its aggregate is still waiting
//     to be published or being published;
//   - the confirmed position never passes a message whose outcome is not
//     recorded;
//   - in the end every message is recorded and the last position confirmed.
func TestLedger_RandomHistories(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runHistory(t, seed) })
	}
}

// simMsg is the model's view of one message.
type simMsg struct {
	seq, epoch int64
	agg        string
	pos        pglogrepl.LSN // the position of its add
	state      string        // "", "leased", "sent", "failed", "deferred", "skipped"
	recorded   bool
	recEpoch   int64 // checks started when its record committed
}

type sim struct {
	t        *testing.T
	rng      *rand.Rand
	l        *ledger
	msgs     map[int64]*simMsg
	order    []*simMsg
	checks   int64
	nextSeq  int64
	lsn      pglogrepl.LSN
	claims   map[uuid.UUID][]int64
	pending  []toRecord
	confirm  pglogrepl.LSN
	leasedBy map[string]uuid.UUID
	// maxRun is the most messages of an aggregate per claim: 1, or random
	// up to 4 per claim when 0.
	maxRun int
	// running is the check started and not yet added, of epoch runningEpoch.
	running      []item
	runningEpoch int64
}

func runHistory(t *testing.T, seed uint64) {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 7)), l: newLedger(), msgs: map[int64]*simMsg{},
		claims: map[uuid.UUID][]int64{}, leasedBy: map[string]uuid.UUID{}}
	if seed < 150 {
		s.maxRun = 1
	}
	for range 400 {
		s.step()
	}
	s.drain()
}

func (s *sim) step() {
	switch r := s.rng.IntN(100); {
	case r < 20:
		s.check()
	case r < 45:
		s.claim()
	case r < 75:
		s.settle()
	default:
		s.recordSome()
	}
}

// check starts a check, or adds the one started: records may commit while
// it runs, as they do while the relay's check statement runs.
func (s *sim) check() {
	if s.running == nil {
		s.checks++
		s.running = s.newItems()
		s.runningEpoch = s.checks
		return
	}
	items := s.running
	s.running = nil
	s.lsn += 10
	for _, it := range items {
		s.msgs[it.rec.Seq].pos = s.lsn
	}
	for _, it := range items {
		if it.act == actSkip && it.fail == nil {
			s.msgs[it.rec.Seq].state, s.msgs[it.rec.Seq].recorded = "skipped", true
		}
	}
	s.take(s.l.add(uint64(s.runningEpoch), items, s.lsn))
}

// newItems makes up to 4 messages of a check.
func (s *sim) newItems() []item {
	var items []item
	for range s.rng.IntN(5) {
		s.nextSeq++
		agg := fmt.Sprint(s.rng.IntN(4))
		it := msg(s.nextSeq, agg)
		switch r := s.rng.IntN(20); {
		case r == 0:
			it.act = actDefer
		case r == 1:
			it.act = actSkip
		case r == 2:
			it.fail = &store.Failure{Seq: s.nextSeq, Dead: true}
			it.err = fmt.Errorf("undecodable")
		}
		m := &simMsg{seq: s.nextSeq, epoch: s.checks, agg: agg}
		s.msgs[m.seq] = m
		s.order = append(s.order, m)
		items = append(items, it)
	}
	return items
}

// take notes what a ledger change left to record.
func (s *sim) take(out toRecord) {
	for _, e := range out.failed {
		s.msgs[e.rec.Seq].state = "failed"
	}
	for _, e := range out.deferred {
		s.msgs[e.rec.Seq].state = "deferred"
	}
	for _, e := range out.sent {
		s.msgs[e.rec.Seq].state = "sent"
	}
	for _, e := range out.failed {
		for _, m := range s.order {
			if m.seq < e.rec.Seq && m.agg == e.agg.id && m.pos > 0 && (m.state == "" || m.state == "leased") {
				s.t.Fatalf("seq %d left to record as failed while %d of its aggregate is %q", e.rec.Seq, m.seq, m.state)
			}
		}
	}
	s.pending = append(s.pending, out)
}

func (s *sim) claim() {
	tok := uuid.New()
	runs := runLimits{max: s.maxRun}
	if runs.max == 0 {
		runs.max = 1 + s.rng.IntN(4)
	}
	recs := s.l.claim(tok, 1+s.rng.IntN(6), runs)
	perAgg := map[string]int{}
	for _, rec := range recs {
		m := s.msgs[rec.Seq]
		s.handedOut(m, tok)
		s.claims[tok] = append(s.claims[tok], rec.Seq)
		if perAgg[m.agg]++; perAgg[m.agg] > runs.max {
			s.t.Fatalf("claim handed out %d messages of aggregate %s; MaxRun is %d", perAgg[m.agg], m.agg, runs.max)
		}
	}
}

// handedOut checks the promises of a claim tok for m.
func (s *sim) handedOut(m *simMsg, tok uuid.UUID) {
	t := s.t
	if other, ok := s.leasedBy[m.agg]; ok && other != tok {
		t.Fatalf("seq %d handed out while another claim holds a message of its aggregate", m.seq)
	}
	for _, e := range s.order {
		if e.seq >= m.seq {
			break
		}
		if e.agg != m.agg {
			continue
		}
		switch e.state {
		case "sent", "skipped":
		case "leased":
			if s.leasedBy[m.agg] != tok {
				t.Fatalf("seq %d handed out while %d of its aggregate is leased to another claim", m.seq, e.seq)
			}
		case "failed", "deferred":
			if !e.recorded || m.epoch <= e.recEpoch {
				t.Fatalf("seq %d (check %d) handed out behind %s %d (recorded %t at %d)", m.seq, m.epoch, e.state, e.seq, e.recorded, e.recEpoch)
			}
		default:
			t.Fatalf("seq %d handed out before %d of its aggregate was acknowledged (%q)", m.seq, e.seq, e.state)
		}
	}
	m.state = "leased"
	s.leasedBy[m.agg] = tok
}

// settle settles one claim as the relay core does: per aggregate, the
// messages before a random position are acknowledged, the one there (if
// any) fails for good, finds the broker unavailable or is given back, and
// those after it are given back; the core marks the acknowledged ones
// first, then gives back, then records the failures.
func (s *sim) settle() {
	for tok, held := range s.claims {
		delete(s.claims, tok)
		byAgg := map[string][]int64{}
		var aggs []string
		for _, seq := range held {
			m := s.msgs[seq]
			if byAgg[m.agg] == nil {
				aggs = append(aggs, m.agg)
			}
			byAgg[m.agg] = append(byAgg[m.agg], seq)
			delete(s.leasedBy, m.agg)
			m.state = ""
		}
		var sent, released []int64
		var fs []store.Failure
		for _, agg := range aggs {
			run := byAgg[agg]
			p := len(run)
			if s.rng.IntN(10) >= 6 {
				p = s.rng.IntN(len(run))
			}
			sent = append(sent, run[:p]...)
			if p == len(run) {
				continue
			}
			switch r := s.rng.IntN(4); {
			case r == 0:
				fs = append(fs, store.Failure{Seq: run[p], CountAttempt: true})
			case r == 1:
				fs = append(fs, store.Failure{Seq: run[p], Unavailable: true})
			default:
				released = append(released, run[p])
			}
			released = append(released, run[p+1:]...)
		}
		if len(sent) > 0 {
			out := s.l.ack(tok, sent)
			s.expectN(len(out.sent), len(sent))
			s.take(out)
		}
		if len(released) > 0 {
			n, out := s.l.release(tok, released)
			s.expectN(n, len(released))
			s.take(out)
		}
		if len(fs) > 0 {
			n, out := s.l.fail(tok, fs)
			s.expectN(n, len(fs))
			for _, f := range fs {
				if f.Unavailable && slices.ContainsFunc(out.failed, func(e *entry) bool { return e.rec.Seq == f.Seq }) {
					s.t.Fatalf("seq %d found the broker unavailable and was left to record as failed", f.Seq)
				}
			}
			s.take(out)
		}
		return
	}
}

func (s *sim) expectN(n, want int) {
	if n != want {
		s.t.Fatalf("n %d; want %d", n, want)
	}
}

// recordSome commits one pending record, any of them.
func (s *sim) recordSome() {
	if len(s.pending) == 0 {
		return
	}
	i := s.rng.IntN(len(s.pending))
	out := s.pending[i]
	s.pending = slices.Delete(s.pending, i, i+1)
	for _, list := range [][]*entry{out.sent, out.failed, out.deferred} {
		for _, e := range list {
			m := s.msgs[e.rec.Seq]
			m.recorded, m.recEpoch = true, s.checks
		}
	}
	confirm, _, _ := s.l.recorded(out, uint64(s.checks))
	if confirm == 0 {
		return
	}
	if confirm < s.confirm {
		s.t.Fatalf("position went back from %s to %s", s.confirm, confirm)
	}
	s.confirm = confirm
	for _, m := range s.order {
		if m.pos > 0 && m.pos <= confirm && !m.recorded {
			s.t.Fatalf("position %s passed seq %d (%q), not recorded", confirm, m.seq, m.state)
		}
	}
}

// drain settles everything: every message ends recorded, the last
// position confirmed, nothing held.
func (s *sim) drain() {
	if s.running != nil {
		s.check()
	}
	for range 10000 {
		if len(s.claims) == 0 && len(s.pending) == 0 && s.l.ready() == 0 {
			break
		}
		s.claim()
		s.settle()
		s.recordSome()
	}
	s.checks++
	s.take(s.l.add(uint64(s.checks), nil, s.lsn+1))
	s.recordSome()
	for _, m := range s.order {
		if !m.recorded {
			s.t.Fatalf("seq %d never recorded (%q)", m.seq, m.state)
		}
	}
	if s.confirm != s.lsn+1 || s.l.held() != 0 || s.l.leased() != 0 || len(s.l.lanes) != 0 {
		s.t.Fatalf("confirm %s (want %s), held %d, leased %d, lanes %d", s.confirm, s.lsn+1, s.l.held(), s.l.leased(), len(s.l.lanes))
	}
}
