package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-dev/outbox/sink"
)

// Topic is what the running relays reported of one topic (see
// [Ops.ReportTopics]).
type Topic struct {
	// Topic is the topic's name.
	Topic string
	// PublishedLastHour counts the records the broker acknowledged in the
	// last hour, over all relays.
	PublishedLastHour int64
	// LastPublishedAt is the last acknowledgement; zero if none.
	LastPublishedAt time.Time
	// UnavailableSince is when the topic stopped taking records (it does
	// not exist, or the relays may not write to it): its
	// messages wait. Zero while it takes them.
	UnavailableSince time.Time
	// Reason is the broker's answer while unavailable, such as
	// UNKNOWN_TOPIC_OR_PARTITION, and Fix what an operator does about it.
	Reason, Fix string
}

// Unavailable reports whether the topic cannot take records now.
func (t Topic) Unavailable() bool { return !t.UnavailableSince.IsZero() }

// ReportTopics records what relay relayID's sink knows of its topics
// ([sink.TopicReporter]), so that [Ops.Stats] in any process shows them.
// A relay calls it every few seconds (the outbox relay command does so
// every 10 seconds); Stats takes the reports of the last minute. It
// needs migration 013.
func (o *Ops) ReportTopics(ctx context.Context, relayID string, topics []sink.TopicStatus) error {
	n := len(topics)
	names, reasons, fixes := make([]string, n), make([]string, n), make([]string, n)
	published, lastHour := make([]int64, n), make([]int64, n)
	firstAt, lastAt, since := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	for i, t := range topics {
		names[i], reasons[i], fixes[i] = t.Topic, t.Reason, t.Fix
		published[i], lastHour[i] = t.Published, t.PublishedLastHour
		firstAt[i], lastAt[i], since[i] = timestamptz(t.FirstPublishedAt), timestamptz(t.LastPublishedAt), timestamptz(t.UnavailableSince)
	}
	if _, err := o.pool.Exec(ctx, o.q.topicsReport, relayID, names, published, lastHour, firstAt, lastAt, since, reasons, fixes); err != nil {
		return fmt.Errorf("ops: report topics: %w", err)
	}
	return nil
}

// timestamptz is t for the database, NULL when zero.
func timestamptz(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// topics reads Stats.Topics. An outbox without migration 013 (a relay
// binary upgraded before "outbox migrate") has no reports: none, not an
// error, so that the statistics keep working meanwhile.
func (o *Ops) topics(ctx context.Context) ([]Topic, error) {
	rows, err := o.pool.Query(ctx, o.q.statsTopics)
	var out []Topic
	if err == nil {
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Topic, error) {
			var t Topic
			var last, since *time.Time
			err := row.Scan(&t.Topic, &t.PublishedLastHour, &last, &since, &t.Reason, &t.Fix)
			t.LastPublishedAt, t.UnavailableSince = deref(last), deref(since)
			return t, err
		})
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "42P01" {
		return nil, nil // undefined_table: before migration 013
	}
	return out, err
}
