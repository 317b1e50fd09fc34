package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// RepublishConfig configures [Ops.Republish].
type RepublishConfig struct {
	// Name identifies the run and its cursor: a run with the same name
	// continues where the last one stopped. 1-200 characters of letters,
	// digits, '.', '_' and '-'. Required.
	Name string
	// Since selects the SENT messages created at or after it. Required.
	Since time.Time
	// AggregateType and EventType narrow the selection. Default to empty:
	// any.
	AggregateType, EventType string
	// Rate is the most messages published per second. Defaults to 500.
	Rate float64
	// BatchSize is the most messages read and published at once; it is
	// capped at Rate, so that a batch never exceeds a second's allowance.
	// Defaults to 100.
	BatchSize int
	// Restart forgets the cursor of Name, if any, and starts over, with
	// the parameters given. Defaults to false: an existing cursor with
	// other parameters is an error wrapping [ErrCursorMismatch].
	Restart bool
	// Actor is recorded in the audit log. Defaults to [DefaultActor].
	Actor string
	// Reason is recorded in the audit log. Defaults to empty.
	Reason string
	// Progress, if set, is called after each published batch.
	Progress func(RepublishProgress)
}

// Defaults of RepublishConfig.
const (
	DefaultRepublishRate      = 500
	DefaultRepublishBatchSize = 100
)

// RepublishProgress is the state of a republish run.
type RepublishProgress struct {
	Name string
	// LastSeq is the last message published (0 before the first).
	LastSeq int64
	// UntilSeq bounds the run: the highest seq when it first started.
	UntilSeq int64
	// Published counts the messages published by this and earlier runs of
	// the same name.
	Published int64
	// ThisRun counts the messages published by this call.
	ThisRun int64
	// Finished is true when every selected message was published.
	Finished bool
}

var cursorNameRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)

func (c RepublishConfig) withDefaults() RepublishConfig {
	if c.Rate == 0 {
		c.Rate = DefaultRepublishRate
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultRepublishBatchSize
	}
	c.BatchSize = max(1, min(c.BatchSize, int(c.Rate)))
	// The cursor stores microseconds; a resumed run must compare equal.
	c.Since = c.Since.Truncate(time.Microsecond)
	c.Actor = actorOr(c.Actor)
	return c
}

func (c RepublishConfig) validate() error {
	return conf.First(ErrInvalidConfig,
		conf.Rule("Name", cursorNameRe.MatchString(c.Name), "%q must match %s", c.Name, cursorNameRe),
		conf.Required("Since", !c.Since.IsZero()),
		conf.NotNegative("Rate", c.Rate),
		conf.NotNegative("BatchSize", c.BatchSize),
	)
}

// cursor is a row of outbox_republish_cursors.
type cursor struct {
	Name          string
	Since         time.Time
	AggregateType string
	EventType     string
	UntilSeq      int64
	LastSeq       int64
	Published     int64
	StartedAt     time.Time
	UpdatedAt     time.Time
	FinishedAt    *time.Time
}

// Republish publishes SENT messages again, through snk, for rebuilding a
// consumer's state: those created at or after cfg.Since (and of
// cfg.AggregateType and cfg.EventType, if set), up to the newest message
// when the run named cfg.Name first started. They go out with their
// original ids (the eventId header) and the same record contract as the
// relay's, in seq order, so per-aggregate order holds, at most cfg.Rate per
// second. Consumers that deduplicate by event id treat a message they
// already processed as a duplicate; a consumer rebuilding from an empty
// state processes each once.
//
// The messages are those in state SENT (pgstore's outbox_message_states):
// in cursor mode those at or below the cursor's position too, while those
// above it are not sent yet and are skipped (a resumed run takes those the
// cursor passed meanwhile, as it takes PENDING messages that were marked
// SENT meanwhile). Their records carry that state (SENT).
//
// Progress is saved after every batch in a cursor row named cfg.Name: a run
// stopped by a crash, a signal (ctx) or a publish error is continued by
// calling Republish again with the same config; messages of the batch in
// progress may then be published twice, which idempotent consumers absorb.
// Messages are not changed in the outbox (they stay SENT), and messages that
// retention already deleted cannot be republished.
//
// It returns the progress when every selected message was published, or
// with the error that stopped it. Each call is recorded in the audit log
// (action "republish") with its parameters and how many it published.
func (o *Ops) Republish(ctx context.Context, cfg RepublishConfig, snk sink.Sink) (RepublishProgress, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return RepublishProgress{}, err
	}
	if snk == nil {
		return RepublishProgress{}, fmt.Errorf("%w: nil sink", ErrInvalidConfig)
	}
	cur, err := o.openCursor(ctx, cfg)
	if err != nil {
		return RepublishProgress{}, fmt.Errorf("ops: republish %s: %w", cfg.Name, o.dbErr(err))
	}
	p := RepublishProgress{Name: cur.Name, LastSeq: cur.LastSeq, UntilSeq: cur.UntilSeq,
		Published: cur.Published, Finished: cur.FinishedAt != nil}
	log := o.log.With(slog.String("republish", cfg.Name))
	log.Info("republish starting", slog.Time("since", cur.Since), slog.Int64("after_seq", cur.LastSeq),
		slog.Int64("until_seq", cur.UntilSeq), slog.Float64("rate", cfg.Rate), slog.String("actor", cfg.Actor))

	runErr := o.republish(ctx, cfg, cur, snk, &p)
	// The audit entry is written even when ctx ended, so that a stopped run
	// is on record too.
	auditCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := o.audit(auditCtx, cfg.Actor, ActionRepublish, cfg.Reason, republishFilter(cur, p), p.ThisRun); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("audit: %w", err))
	}
	if runErr != nil {
		log.Warn("republish stopped", slog.Int64("last_seq", p.LastSeq), slog.Int64("published", p.ThisRun), slog.Any("error", runErr))
		return p, fmt.Errorf("ops: republish %s: %w", cfg.Name, o.dbErr(runErr))
	}
	log.Info("republish finished", slog.Int64("published", p.ThisRun), slog.Int64("published_total", p.Published))
	return p, nil
}

// openCursor returns the cursor named cfg.Name, creating it (or, with
// Restart, recreating it) as needed.
func (o *Ops) openCursor(ctx context.Context, cfg RepublishConfig) (cursor, error) {
	if cfg.Restart {
		if _, err := o.pool.Exec(ctx, o.q.cursorDelete, cfg.Name); err != nil {
			return cursor{}, err
		}
	}
	if _, err := o.pool.Exec(ctx, o.q.cursorCreate, cfg.Name, cfg.Since, cfg.AggregateType, cfg.EventType); err != nil {
		return cursor{}, err
	}
	rows, err := o.pool.Query(ctx, o.q.cursorGet, cfg.Name)
	if err != nil {
		return cursor{}, err
	}
	cur, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[cursor])
	if err != nil {
		return cursor{}, err
	}
	if !cur.Since.Equal(cfg.Since) || cur.AggregateType != cfg.AggregateType || cur.EventType != cfg.EventType {
		return cursor{}, fmt.Errorf("%w: cursor %q has since %s, aggregate type %q, event type %q",
			ErrCursorMismatch, cur.Name, cur.Since.Format(time.RFC3339Nano), cur.AggregateType, cur.EventType)
	}
	return cur, nil
}

func (o *Ops) republish(ctx context.Context, cfg RepublishConfig, cur cursor, snk sink.Sink, p *RepublishProgress) error {
	if p.Finished {
		return nil
	}
	pace := newPacer(cfg.Rate)
	for {
		rows, err := o.pool.Query(ctx, o.q.republishBatch, p.LastSeq, cur.UntilSeq, cur.Since,
			cur.AggregateType, cur.EventType, cfg.BatchSize)
		if err != nil {
			return err
		}
		recs, err := pgx.CollectRows(rows, pgstore.ScanRecord)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			if _, err := o.pool.Exec(ctx, o.q.cursorAdvance, cur.Name, p.LastSeq, 0, true); err != nil {
				return err
			}
			p.Finished = true
			return nil
		}
		for len(recs) > 0 {
			var chunk []outbox.Record
			chunk, recs = distinctAggregates(recs)
			if err := o.publishChunk(ctx, cfg, cur, snk, pace, chunk, p); err != nil {
				return err
			}
		}
	}
}

// distinctAggregates splits recs after its longest prefix in which no
// aggregate appears twice. Publishing such a chunk keeps every aggregate in
// order even when a record fails and later ones of the chunk get through:
// those belong to other aggregates, and the resumed run sends them again
// before anything later of theirs.
func distinctAggregates(recs []outbox.Record) (chunk, rest []outbox.Record) {
	type key struct{ typ, id string }
	seen := make(map[key]bool, len(recs))
	for i, r := range recs {
		k := key{r.AggregateType, r.AggregateID}
		if seen[k] {
			return recs[:i], recs[i:]
		}
		seen[k] = true
	}
	return recs, nil
}

// publishChunk publishes recs and moves the cursor past the published
// prefix.
func (o *Ops) publishChunk(ctx context.Context, cfg RepublishConfig, cur cursor, snk sink.Sink, pace *pacer,
	recs []outbox.Record, p *RepublishProgress) error {

	if err := pace.wait(ctx, len(recs)); err != nil {
		return err
	}
	errs := snk.Publish(ctx, recs)
	// The cursor moves past the published prefix only: after a
	// failure, the next run starts at the first unpublished message.
	n := 0
	var pubErr error
	for i := range recs {
		if i >= len(errs) {
			pubErr = fmt.Errorf("sink returned %d results for %d records", len(errs), len(recs))
			break
		}
		if errs[i] != nil {
			pubErr = fmt.Errorf("publish message %s (seq %d): %w", recs[i].ID, recs[i].Seq, errs[i])
			break
		}
		n++
	}
	if n > 0 {
		last := recs[n-1].Seq
		// Saved even when ctx ended, so that the work done counts.
		saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, err := o.pool.Exec(saveCtx, o.q.cursorAdvance, cur.Name, last, n, false)
		cancel()
		if err != nil {
			return errors.Join(pubErr, fmt.Errorf("save cursor: %w", err))
		}
		p.LastSeq = last
		p.Published += int64(n)
		p.ThisRun += int64(n)
		if cfg.Progress != nil {
			cfg.Progress(*p)
		}
	}
	return pubErr
}

// republishFilter describes a run for the audit log.
func republishFilter(cur cursor, p RepublishProgress) []byte {
	b, _ := json.Marshal(map[string]any{
		"name": cur.Name, "since": cur.Since, "aggregateType": cur.AggregateType, "eventType": cur.EventType,
		"untilSeq": cur.UntilSeq, "lastSeq": p.LastSeq, "finished": p.Finished,
	})
	return b
}

// audit records an operation that is not a dead-letter change.
func (o *Ops) audit(ctx context.Context, actor, action, reason string, filter []byte, count int64) error {
	var (
		id int64
		at time.Time
	)
	return o.pool.QueryRow(ctx, o.q.auditInsert, actor, action, reason, uuidArray(nil), jsonArg(filter), count).Scan(&id, &at)
}

// pacer spaces publishing out to rate messages per second on average:
// before n more, it waits until (published+n)/rate seconds have passed
// since the start, so it never runs ahead and never bursts more than a
// batch.
type pacer struct {
	rate  float64
	start time.Time
	sent  float64
}

func newPacer(rate float64) *pacer { return &pacer{rate: rate, start: time.Now()} }

func (p *pacer) wait(ctx context.Context, n int) error {
	due := p.start.Add(time.Duration(p.sent / p.rate * float64(time.Second)))
	p.sent += float64(n)
	return sleep(ctx, time.Until(due))
}
