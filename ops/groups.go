package ops

import (
	"context"
	"fmt"
	"regexp"
	"slices"
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
	// 16 lower-case hex digits derived from ErrorClass, Topic and
	// EventType, the same as long as they are (see [ValidGroupKey]).
	Key string
	// ErrorClass is the cause, from the messages' last error: the Kafka
	// error code the broker gave, such as MESSAGE_TOO_LARGE or
	// INVALID_TOPIC_EXCEPTION, prefixed "max attempts: " when the error
	// was retriable and the message ran out of attempts ("max attempts:
	// UNKNOWN_SERVER_ERROR"). An error without a Kafka code is named by its
	// reason: its text without the prefixes that name the message and its
	// topic, with ids as <id> and numbers as N, cut at a word to 80
	// characters and "…" ("outbox: invalid message: headers[\"x\"]: value
	// must be a string, is a number").
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
// f.All is ignored. It reads the dead letters only, through their partial
// index outbox_messages_dead, and classifies each in a few microseconds;
// a caller that shows the groups often, such as a status page, should
// share one result for a few seconds rather than call it on every view.
func (o *Ops) DeadLetterGroups(ctx context.Context, f Filter) ([]DeadLetterGroup, error) {
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("ops: group dead letters: %w", err)
	}
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
		f.ErrorClass, f.Topic, f.Group, upTo, kafkaCodes}
}

// groupKeyRe is the form of a DeadLetterGroup.Key.
var groupKeyRe = regexp.MustCompile(`^[0-9a-f]{16}$`)

// ValidGroupKey reports whether key has the form of a
// [DeadLetterGroup].Key: 16 lower-case hex digits.
func ValidGroupKey(key string) bool { return groupKeyRe.MatchString(key) }

// validate checks what f's fields must look like: a Group is a group key.
func (f Filter) validate() error {
	if f.Group != "" && !ValidGroupKey(f.Group) {
		return fmt.Errorf("%w: Filter.Group %q must be a group's key: 16 lower-case hex digits", ErrInvalidConfig, f.Group)
	}
	return nil
}

// kafkaCodes are the names of the Kafka error codes franz-go knows, as
// kerr.Error prints them: dead_letters.sql names a dead letter's class by
// the first upper-case word with underscores before a ':' in its error if
// it is one of them. Each has an underscore
// (TestKafkaCodes_EveryCodeIsClassifiedByItsName).
var kafkaCodes = func() []string {
	var names []string
	for code := int16(-1); code < 1000; code++ {
		if ke := kerr.TypedErrorForCode(code); ke != nil && !slices.Contains(names, ke.Message) {
			names = append(names, ke.Message)
		}
	}
	slices.Sort(names)
	return names
}()
