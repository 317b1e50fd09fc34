package failure_test

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay/failure"
	"github.com/outbox-dev/outbox/sink"
)

// A relay decides each failed publish with its Policy, records the
// decision with its store (store.Queue.MarkFailed) and reports it; while
// the broker is unreachable it claims nothing until its Pause is over.
func Example() {
	pause := failure.NewPause(30 * time.Second)
	policy := failure.Policy{MaxAttempts: 3, RetryBase: time.Second, RetryMax: time.Minute, Pause: pause}
	report := failure.Reporter{Log: slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "message_id" || a.Key == "retry_in" {
				return slog.Attr{} // vary from run to run
			}
			return a
		}}))}

	now := time.Now()
	rec := outbox.Record{Seq: 7, Attempts: 2, Message: outbox.Message{AggregateType: "Order", AggregateID: "o-1", EventType: "OrderPlaced"}}
	err := fmt.Errorf("%w: MESSAGE_TOO_LARGE", sink.ErrPermanent)
	f := policy.Decide(rec, err, now)
	report.Report(rec, err, f)

	err = fmt.Errorf("%w: connection refused", sink.ErrUnavailable)
	f = policy.Decide(rec, err, now)
	fmt.Println("counted:", f.CountAttempt, "dead:", f.Dead, "relay pauses for", pause.Remaining(now))
	// Output:
	// level=ERROR msg="message dead-lettered" seq=7 aggregate_type=Order aggregate_id=o-1 event_type=OrderPlaced attempts=3 error="permanent publish error: MESSAGE_TOO_LARGE"
	// counted: false dead: false relay pauses for 500ms
}
