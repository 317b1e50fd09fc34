package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/conf"
)

// CleanupConfig configures [Ops.Cleanup].
type CleanupConfig struct {
	// OlderThan is the retention: SENT messages published more than
	// OlderThan ago (by the database clock) are deleted, and in cursor
	// mode the messages the cursor passed that were created that long ago.
	// Required; at least a minute.
	OlderThan time.Duration
	// BatchSize is the most rows one DELETE removes; each batch is a
	// short transaction of its own. Defaults to 5,000.
	BatchSize int
	// Pause is a sleep between batches, to spread the load (and the WAL)
	// further. Defaults to 0.
	Pause time.Duration
	// IncludeDiscarded also deletes DISCARDED messages discarded more than
	// OlderThan ago. Defaults to false: they stay for audit.
	IncludeDiscarded bool
	// Actor is recorded in the audit log. Defaults to [DefaultActor].
	Actor string
	// OnBatch, if set, is called after each batch with the number of rows
	// it deleted.
	OnBatch func(deleted int64)
}

// Defaults and bounds of CleanupConfig.
const (
	DefaultCleanupBatchSize = 5000
	MinCleanupAge           = time.Minute
)

// CleanupResult is what a cleanup deleted.
type CleanupResult struct {
	// Cutoff is the database time before which messages were deleted.
	Cutoff time.Time
	// Sent and Discarded count the deleted messages by status. Sent
	// includes Queued.
	Sent, Discarded int64
	// Queued counts the deleted messages of cursor mode, which were SENT:
	// the cursor had passed them.
	Queued int64
	// Batches counts the DELETE statements that removed rows.
	Batches int
}

func (c CleanupConfig) withDefaults() CleanupConfig {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultCleanupBatchSize
	}
	c.Actor = actorOr(c.Actor)
	return c
}

func (c CleanupConfig) validate() error {
	return conf.First(ErrInvalidConfig,
		conf.AtLeast("OlderThan", c.OlderThan, MinCleanupAge),
		conf.AtLeast("BatchSize", c.BatchSize, 1),
		conf.NotNegative("Pause", c.Pause),
	)
}

// Cleanup deletes SENT messages published more than cfg.OlderThan ago (and,
// with cfg.IncludeDiscarded, DISCARDED ones discarded that long ago),
// together with their attempt history, oldest first, in batches of at most
// cfg.BatchSize rows. Each batch is one short autocommit statement that
// locks only the rows it deletes and skips any that are locked, so the relay
// keeps claiming and marking throughout. PENDING, IN_FLIGHT, FAILED and
// DEAD_LETTER messages are never deleted.
//
// In cursor mode (and after it) it then deletes the messages of cursor mode
// at or below the cursor's position, which are SENT, created more than
// cfg.OlderThan ago: they have no publish time, and a message is sent
// after it is created. No index holds them, so it walks the primary key
// from the lowest seq in steps of cfg.BatchSize rows and stops at the first
// message created after the cutoff; it never reads or deletes a message
// above the position (unsent).
//
// When ctx ends, Cleanup stops after the current batch and returns what it
// deleted with ctx's error; what was deleted stays deleted. A run that
// deleted anything is recorded in the audit log (action "cleanup").
func (o *Ops) Cleanup(ctx context.Context, cfg CleanupConfig) (CleanupResult, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return CleanupResult{}, err
	}
	var res CleanupResult
	if err := o.pool.QueryRow(ctx, o.q.cleanupCutoff, cfg.OlderThan.Milliseconds()).Scan(&res.Cutoff); err != nil {
		return res, fmt.Errorf("ops: cleanup: %w", o.dbErr(err))
	}
	runErr := o.cleanupStatus(ctx, cfg, o.q.cleanupSent, &res, &res.Sent)
	if runErr == nil && cfg.IncludeDiscarded {
		runErr = o.cleanupStatus(ctx, cfg, o.q.cleanupDiscarded, &res, &res.Discarded)
	}
	if runErr == nil {
		runErr = o.cleanupQueued(ctx, cfg, &res)
	}
	if res.Sent+res.Discarded > 0 {
		filter, _ := json.Marshal(map[string]any{
			"olderThan": cfg.OlderThan.String(), "cutoff": res.Cutoff,
			"includeDiscarded": cfg.IncludeDiscarded, "sent": res.Sent, "discarded": res.Discarded,
			"queued": res.Queued,
		})
		auditCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := o.audit(auditCtx, cfg.Actor, ActionCleanup, "", filter, res.Sent+res.Discarded); err != nil && runErr == nil {
			runErr = fmt.Errorf("audit: %w", err)
		}
	}
	attrs := []any{slog.Time("cutoff", res.Cutoff), slog.Int64("sent_deleted", res.Sent),
		slog.Int64("queued_deleted", res.Queued), slog.Int64("discarded_deleted", res.Discarded),
		slog.Int("batches", res.Batches)}
	if runErr != nil {
		runErr = o.dbErr(runErr)
		o.log.Warn("cleanup stopped", append(attrs, slog.Any("error", runErr))...)
		return res, fmt.Errorf("ops: cleanup: %w", runErr)
	}
	o.log.Info("cleanup done", attrs...)
	return res, nil
}

// cleanupFinalFor renders queries/cleanup_final.sql for the final status,
// whose time column is at; cursor ends outbox_message_states's arguments.
func cleanupFinalFor(sql string, status outbox.Status, cursor, at string) string {
	return strings.NewReplacer("{{status}}", string(status), "{{cursor}}", cursor, "{{at}}", at).Replace(sql)
}

// cleanupStatus runs one of the cleanup statements until a batch deletes
// nothing, adding to *n.
func (o *Ops) cleanupStatus(ctx context.Context, cfg CleanupConfig, sql string, res *CleanupResult, n *int64) error {
	from := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC) // keyset: the newest time deleted so far
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var (
			deleted int64
			newest  *time.Time
		)
		if err := o.pool.QueryRow(ctx, sql, res.Cutoff, from, cfg.BatchSize).Scan(&deleted, &newest); err != nil {
			return err
		}
		if deleted == 0 {
			return nil
		}
		*n += deleted
		from = *newest
		if err := res.batchDone(ctx, cfg, deleted); err != nil {
			return err
		}
	}
}

// cleanupQueued deletes the messages of cursor mode the cursor passed that
// were created before res.Cutoff (queries/cleanup_queued.sql), a step of at most
// cfg.BatchSize rows at a time from the lowest seq, until a step reaches
// the first message created after the cutoff or the position. Without a
// cursor the first step finds nothing.
func (o *Ops) cleanupQueued(ctx context.Context, cfg CleanupConfig, res *CleanupResult) error {
	var after int64 // keyset: the last seq scanned so far
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var (
			deleted, scanned int64
			last             *int64
			edge             *bool
		)
		if err := o.pool.QueryRow(ctx, o.q.cleanupQueued, res.Cutoff, after, cfg.BatchSize).Scan(&deleted, &scanned, &last, &edge); err != nil {
			return fmt.Errorf("cursor-sent messages: %w", err)
		}
		if deleted > 0 {
			res.Sent += deleted
			res.Queued += deleted
			if err := res.batchDone(ctx, cfg, deleted); err != nil {
				return err
			}
		}
		if scanned < int64(cfg.BatchSize) || deref(edge) || last == nil {
			return nil
		}
		after = *last
	}
}

// batchDone counts a batch that deleted rows, reports it and pauses.
func (res *CleanupResult) batchDone(ctx context.Context, cfg CleanupConfig, deleted int64) error {
	res.Batches++
	if cfg.OnBatch != nil {
		cfg.OnBatch(deleted)
	}
	return sleep(ctx, cfg.Pause)
}

// sleep waits for d, or until ctx ends and then returns its error. It
// returns at once for d <= 0.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CleanupEvery runs [Ops.Cleanup] with cfg now and then every interval
// until ctx ends, for a retention loop next to the relay. A failed run is
// logged and retried at the next interval. It returns ctx's error.
func (o *Ops) CleanupEvery(ctx context.Context, cfg CleanupConfig, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("%w: interval %s must be positive", ErrInvalidConfig, interval)
	}
	if err := cfg.withDefaults().validate(); err != nil {
		return err
	}
	return o.every(ctx, interval, "cleanup", func(ctx context.Context) error {
		_, err := o.Cleanup(ctx, cfg)
		return err
	})
}

// every runs run now and then every interval until ctx ends; a failed run
// is logged as what and retried at the next interval. It returns ctx's
// error.
func (o *Ops) every(ctx context.Context, interval time.Duration, what string, run func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := run(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn(what+" failed; retrying at the next interval", slog.Any("error", err), slog.Duration("interval", interval))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
