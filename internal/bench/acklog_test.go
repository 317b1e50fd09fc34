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
