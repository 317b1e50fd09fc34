package relay

import (
	"fmt"
	"log/slog"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
)

// aggregate identifies an aggregate: the unit of order.
type aggregate struct{ typ, id string }

func aggregateOf(rec outbox.Record) aggregate { return aggregate{rec.AggregateType, rec.AggregateID} }

// errOnePerAggregate is the error of a record the relay did not hand to a
// sink that is not a sink.RunSink, because an earlier record of its
// aggregate is in the same call.
var errOnePerAggregate = fmt.Errorf("relay: the sink publishes one message per aggregate per call: %w", sink.ErrNotSent)

// holdBack decides which records of recs are not handed to the sink and
// returns their errors (nil for the others; a nil slice when every record
// is handed over), and whether those handed over hold a run (two or more
// records of one aggregate):
//
//   - a record that is not a message to publish (outbox.Record.Invalid)
//     gets a permanent error, with the column and the rule, so that it
//     becomes a dead letter at once with that reason;
//   - a later record of its aggregate gets an error wrapping
//     sink.ErrNotSent: it follows the invalid one;
//   - with a sink that is not a sink.RunSink, a record after another of its
//     aggregate gets errOnePerAggregate: a plain Sink never gets two
//     records of one aggregate.
func (r *Relay) holdBack(recs []outbox.Record) (held []error, run bool) {
	if len(recs) == 1 && recs[0].Invalid == nil {
		return nil, false
	}
	seen := make(map[aggregate]bool, len(recs)) // the aggregates so far; true: with an invalid record
	hold := func(i int, err error) {
		if held == nil {
			held = make([]error, len(recs))
		}
		held[i] = err
	}
	for i, rec := range recs {
		agg := aggregateOf(rec)
		invalid, ok := seen[agg]
		switch {
		case invalid:
			hold(i, fmt.Errorf("%w: relay: message %s follows an invalid message of its aggregate", sink.ErrNotSent, rec.ID))
		case rec.Invalid != nil:
			hold(i, fmt.Errorf("%w: relay: message %s not published: %w", sink.ErrPermanent, rec.ID, rec.Invalid))
			seen[agg] = true
		case ok && r.runs == nil:
			hold(i, errOnePerAggregate)
		case ok:
			run = true
		default:
			seen[agg] = false
		}
	}
	return held, run
}

// orderBroken logs, at error level, each aggregate of out.broken: the sink
// acknowledged a message of it after an earlier one failed in the same
// call, which a sink.RunSink must not do, so that on the topic the later
// message is ahead of the earlier one, or without it.
func (r *Relay) orderBroken(out outcome) {
	for _, agg := range out.broken {
		r.log.Error("the sink acknowledged a message after an earlier one of its aggregate failed; "+
			"order on the topic is broken for the aggregate",
			slog.String("aggregate_type", agg.typ), slog.String("aggregate_id", agg.id))
	}
}
