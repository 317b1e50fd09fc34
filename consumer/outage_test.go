package consumer_test

import (
	"testing"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// A database outage is nobody's fault: failed attempts while the database
// does not answer are retried without being counted, so the message is not
// parked, and it is applied once the database is back.
func TestRunner_DatabaseOutage_DoesNotParkTheMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	proxy := pgtest.NewProxy(t)
	ib, err := inbox.New(proxy.Pool(t, e.schema), inbox.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	r := event(0, "o-1", 1)
	e.produce(t, r)

	rec := newRecorder()
	e.start(t, fastRetries(consumer.Config{Group: "billing", Inbox: ib, MaxAttempts: 2, Hooks: rec.hooks()}))
	waitFor(t, "retries while the database is down", func() bool { return rec.retriedOf(idOf(r)) >= 5 })
	proxy.Open(t)
	waitFor(t, "the message handled", func() bool { return rec.handled(inbox.Processed) == 1 })
	if n := rec.parkedCount(); n != 0 {
		t.Errorf("%d messages parked during the outage, want 0", n)
	}
	if n := e.effects(t, idOf(r)); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}
