package ops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
)

// DeadLetterGroup is the dead letters that share a cause: an error class,
// a topic and an event type. An incident (a topic deleted, a schema change,
// a size limit lowered) is usually one group, which [Ops.Replay] and
// [Ops.Discard] change at once with Filter.Group.
type DeadLetterGroup struct {
	// Key names the group in Filter.Group ("outbox dlq replay --group"):
	// 8 hex digits derived from ErrorClass, Topic and EventType, the same
	// as long as they are.
	Key string
	// ErrorClass is the cause, from the messages' last error: the Kafka
	// error code the broker gave, such as MESSAGE_TOO_LARGE or
	// UNKNOWN_TOPIC_OR_PARTITION, prefixed "max attempts: " when the error
	// was retriable and the message ran out of attempts ("max attempts:
	// NOT_ENOUGH_REPLICAS"). An error without a Kafka code is named by its
	// text without ids and numbers, cut to 60 characters.
	ErrorClass string
	// Topic is the messages' topic as stored: empty when they named none
	// and the relay's routes chose it when publishing.
	Topic     string
	EventType string
	// Count is how many dead letters the group has.
	Count int64
	// Aggregates counts the aggregates they block.
	Aggregates int64
	// FirstDeadAt and LastDeadAt are when the first and the last of them
	// became dead letters.
	FirstDeadAt, LastDeadAt time.Time
	// LastError is the last error of its newest message, in full.
	LastError string
}

// DeadLetterGroups groups the dead letters that f selects by cause (see
// [DeadLetterGroup]), most first. f.Limit bounds the groups returned;
// f.All is ignored. It reads the dead letters only, through the partial
// index on unsent messages.
func (o *Ops) DeadLetterGroups(ctx context.Context, f Filter) ([]DeadLetterGroup, error) {
	rows, err := o.pool.Query(ctx, o.q.dlqGroups, f.args(0)...)
	if err != nil {
		return nil, fmt.Errorf("ops: group dead letters: %w", o.dbErr(err))
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetterGroup, error) {
		var g DeadLetterGroup
		var lastError *string
		err := row.Scan(&g.Key, &g.ErrorClass, &g.Topic, &g.EventType, &g.Count, &g.Aggregates,
			&g.FirstDeadAt, &g.LastDeadAt, &lastError)
		g.LastError = deref(lastError)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("ops: group dead letters: %w", o.dbErr(err))
	}
	return groups, nil
}

// args are the parameters of queries/dead_letters.sql for f, with maxSeq
// as the highest seq selected (0: no bound).
func (f Filter) args(maxSeq int64) []any {
	var limit, upTo *int64
	if f.Limit > 0 {
		l := int64(f.Limit)
		limit = &l
	}
	if maxSeq > 0 {
		upTo = &maxSeq
	}
	return []any{f.AggregateType, f.AggregateID, f.EventType, sinceOrMin(f.Since), f.AfterSeq, limit,
		f.ErrorClass, f.Topic, f.Group, upTo}
}

// kafkaCodePattern is a PostgreSQL regular expression that finds, in an
// error text, a Kafka error code's name as kerr.Error prints it
// ("MESSAGE_TOO_LARGE: The request included ..."), and captures the name.
// It lists every code franz-go knows, longest first.
var kafkaCodePattern = func() string {
	seen := map[string]bool{}
	var names []string
	for code := int16(-1); code < 1000; code++ {
		ke := kerr.TypedErrorForCode(code)
		if ke == nil || seen[ke.Message] {
			continue
		}
		seen[ke.Message] = true
		names = append(names, ke.Message)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	return `\m(` + strings.Join(names, "|") + `):`
}()
