package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
)

// stepSink fails the records whose ids are in fail and takes d to publish.
type stepSink struct {
	sink.Sink
	fail map[uuid.UUID]bool
	d    time.Duration
}

func (s stepSink) Publish(_ context.Context, recs []outbox.Record) []error {
	time.Sleep(s.d)
	errs := make([]error, len(recs))
	for i, r := range recs {
		if s.fail[r.ID] {
			errs[i] = errors.New("refused")
		}
	}
	return errs
}

// The ack time of a message is when the broker acknowledged it, not when the
// relay marked it: a message whose publish failed gets its ack time from the
// publish that succeeded, and the mark comes after.
func TestAckLog_AckIsTheBrokersAcknowledgementNotTheMark(t *testing.T) {
	l := newAckLog()
	ok, retried := outbox.Record{Message: outbox.Message{ID: uuid.New()}}, outbox.Record{Message: outbox.Message{ID: uuid.New()}}
	l.commit(ok.ID)
	l.commit(retried.ID)
	const publish = 20 * time.Millisecond
	snk := withTimes(stepSink{fail: map[uuid.UUID]bool{retried.ID: true}, d: publish}, l)

	if errs := snk.Publish(context.Background(), []outbox.Record{ok, retried}); errs[0] != nil || errs[1] == nil {
		t.Fatalf("publish errors %v, want only the second", errs)
	}
	time.Sleep(30 * time.Millisecond) // the mark of ok
	l.hook(ok, 0)
	snk = withTimes(stepSink{d: publish}, l)
	snk.Publish(context.Background(), []outbox.Record{retried})
	l.hook(retried, 0)

	d := l.latency()
	if d.Unacked != 0 || d.CommitToAck.Count != 2 || d.CommitToPublish.Count != 2 {
		t.Fatalf("latencies over %d (to publish %d), %d unacked; want 2, 2, 0", d.CommitToAck.Count, d.CommitToPublish.Count, d.Unacked)
	}
	l.mu.Lock()
	okAck, okMark := l.acked[ok.ID]-l.commits[ok.ID], l.marked[ok.ID]-l.commits[ok.ID]
	retriedAck, retriedHanded := l.acked[retried.ID], l.handed[retried.ID]
	l.mu.Unlock()
	if okAck < publish || okMark-okAck < 30*time.Millisecond {
		t.Errorf("ok: ack %v after commit, mark %v; want the ack after the %v publish and the mark 30 ms after the ack", okAck, okMark, publish)
	}
	if retriedAck-retriedHanded < 2*publish+30*time.Millisecond {
		t.Errorf("retried: acked %v after it was first handed over; want after its second publish", retriedAck-retriedHanded)
	}
}

// runStepSink is a stepSink that publishes runs.
type runStepSink struct{ stepSink }

func (s runStepSink) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	return s.Publish(ctx, recs)
}

// A bench relay with runs on needs a sink.RunSink: the ack log's wrapper of
// one is a RunSink too, and times what PublishRuns acknowledged; the
// wrapper of a plain Sink is not.
func TestAckLog_TheWrapperOfARunSinkPublishesRuns(t *testing.T) {
	l := newAckLog()
	rec := outbox.Record{Message: outbox.Message{ID: uuid.New()}}
	l.commit(rec.ID)
	if _, ok := withTimes(stepSink{}, l).(sink.RunSink); ok {
		t.Fatal("the wrapper of a plain Sink is a RunSink")
	}
	runs, ok := withTimes(runStepSink{}, l).(sink.RunSink)
	if !ok {
		t.Fatal("the wrapper of a RunSink is not a RunSink")
	}
	if errs := runs.PublishRuns(context.Background(), []outbox.Record{rec}); errs[0] != nil {
		t.Fatalf("PublishRuns: %v", errs[0])
	}
	l.hook(rec, 0)
	if d := l.latency(); d.Unacked != 0 || d.CommitToAck.Count != 1 {
		t.Errorf("after PublishRuns: %d acked, %d unacked; want 1 acked", d.CommitToAck.Count, d.Unacked)
	}
}
