package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// PartitionConfig configures [Ops.MaintainPartitions].
type PartitionConfig struct {
	// OlderThan is the retention: a partition whose whole time range ended
	// more than OlderThan ago (by the database clock) is dropped, if
	// nothing in it must be kept (see [Ops.MaintainPartitions]). 0 drops
	// nothing (only creates partitions); otherwise at least a minute.
	// Defaults to 0.
	OlderThan time.Duration
	// Ahead is how many partitions after the current one must exist.
	// Defaults to pgstore.DefaultPartitionsAhead.
	Ahead int
	// IncludeDiscarded lets a partition holding DISCARDED messages be
	// dropped once they were discarded more than OlderThan ago. Defaults
	// to false: such a partition is kept, as [Ops.Cleanup] keeps discarded
	// rows.
	IncludeDiscarded bool
	// LockTimeout bounds the wait for the lock that dropping a partition
	// takes on outbox_messages (enqueues and claims queue behind it while
	// it waits). A partition whose lock is not granted in time is kept
	// and tried again at the next run. Defaults to 1s.
	LockTimeout time.Duration
	// Actor is recorded in the audit log. Defaults to [DefaultActor].
	Actor string
}

// DefaultPartitionLockTimeout is the default of PartitionConfig.LockTimeout.
const DefaultPartitionLockTimeout = time.Second

func (c PartitionConfig) withDefaults() PartitionConfig {
	if c.LockTimeout == 0 {
		c.LockTimeout = DefaultPartitionLockTimeout
	}
	c.Actor = actorOr(c.Actor)
	return c
}

func (c PartitionConfig) validate() error {
	return conf.First(ErrInvalidConfig,
		conf.Rule("OlderThan", c.OlderThan == 0 || c.OlderThan >= MinCleanupAge,
			"must be 0 (drop nothing) or at least %s, not %s", MinCleanupAge, c.OlderThan),
		conf.NotNegative("Ahead", c.Ahead),
		conf.AtLeast("LockTimeout", c.LockTimeout, time.Millisecond),
	)
}

// KeptPartition is a partition old enough to drop that retention kept, and
// why.
type KeptPartition struct {
	pgstore.Partition
	// Reason says what keeps it, for people: "2 unsent message(s)",
	// "1 dead letter(s)", and so on.
	Reason string
	// Unsent counts its PENDING, IN_FLIGHT and FAILED messages (those of
	// cursor mode above the cursor's position included), DeadLetters its
	// DEAD_LETTER ones and Discarded its DISCARDED ones.
	Unsent, DeadLetters, Discarded int64
}

// PartitionResult is what [Ops.MaintainPartitions] did.
type PartitionResult struct {
	// Cutoff is the database time before which a partition's range must
	// have ended for it to be dropped; zero when OlderThan was 0.
	Cutoff time.Time
	// Created names the partitions created (ahead, and for rows found in
	// the default partition).
	Created []string
	// Dropped are the partitions dropped, with every message in them.
	Dropped []pgstore.Partition
	// DroppedRows is the number of rows they held, as PostgreSQL's
	// statistics estimated it.
	DroppedRows int64
	// Kept are the partitions past the cutoff that were not dropped.
	Kept []KeptPartition
}

// MaintainPartitions keeps a time-partitioned outbox (pgstore's
// Config.Partitioning, "outbox migrate --partitioned") in shape: it creates
// the partitions from now to cfg.Ahead intervals ahead (and the default
// partition, and partitions for any rows that went to it), then, with
// cfg.OlderThan set, drops every partition whose time range ended before
// now - OlderThan, with its messages' attempt history, instead of
// deleting rows: no DELETE, no dead tuples, nothing to vacuum.
//
// A partition is dropped only when everything in it may go, by the
// messages' states (pgstore's outbox_message_states): no PENDING,
// IN_FLIGHT or FAILED message (in cursor mode, none above the cursor's
// position), no DEAD_LETTER, no SENT message published after the cutoff,
// and no DISCARDED message unless cfg.IncludeDiscarded (and then none
// discarded after the cutoff). The messages of cursor mode that the cursor
// passed are SENT without a publish time: they are aged by the partition's
// range, as Cleanup ages them by created_at. Otherwise it is kept and
// listed in PartitionResult.Kept with the reason, and logged; replay or
// discard its dead letters, and a later run drops it. The default
// partition and the current and future ones are never dropped.
//
// The check is repeated under the lock that DROP TABLE takes on the table
// (an ACCESS EXCLUSIVE lock, held for milliseconds, waited for at most
// cfg.LockTimeout). Each run that dropped something is recorded in the
// audit log (action "cleanup"). Concurrent runs are serialised.
//
// On a plain table it returns an error wrapping pgstore.ErrNotPartitioned.
func (o *Ops) MaintainPartitions(ctx context.Context, cfg PartitionConfig) (PartitionResult, error) {
	cfg = cfg.withDefaults()
	var res PartitionResult
	if err := cfg.validate(); err != nil {
		return res, err
	}
	created, err := o.store.EnsurePartitions(ctx, cfg.Ahead)
	if err != nil {
		return res, fmt.Errorf("ops: partitions: %w", o.dbErr(err))
	}
	res.Created = created
	for _, name := range created {
		o.log.Info("partition created", slog.String("partition", name))
	}
	if cfg.OlderThan == 0 {
		return res, nil
	}
	if err := o.pool.QueryRow(ctx, o.q.cleanupCutoff, cfg.OlderThan.Milliseconds()).Scan(&res.Cutoff); err != nil {
		return res, fmt.Errorf("ops: partitions: %w", o.dbErr(err))
	}
	ps, err := o.store.Partitions(ctx)
	if err != nil {
		return res, fmt.Errorf("ops: partitions: %w", o.dbErr(err))
	}
	var runErr error
	for _, p := range ps {
		if p.Default || p.To.IsZero() || p.To.After(res.Cutoff) {
			continue
		}
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		kept, rows, err := o.dropPartition(ctx, cfg, res.Cutoff, p)
		if err != nil {
			runErr = fmt.Errorf("partition %s: %w", p.Name, err)
			break
		}
		if kept != nil {
			res.Kept = append(res.Kept, *kept)
			o.log.Warn("partition kept past the retention", slog.String("partition", p.Name), slog.String("reason", kept.Reason))
			continue
		}
		res.Dropped = append(res.Dropped, p)
		res.DroppedRows += rows
		o.log.Info("partition dropped", slog.String("partition", p.Name), slog.Time("to", p.To), slog.Int64("rows_estimated", rows))
	}
	if len(res.Dropped) > 0 {
		names := make([]string, len(res.Dropped))
		for i, p := range res.Dropped {
			names[i] = p.Name
		}
		filter, _ := json.Marshal(map[string]any{
			"olderThan": cfg.OlderThan.String(), "cutoff": res.Cutoff, "includeDiscarded": cfg.IncludeDiscarded,
			"droppedPartitions": names, "rowsEstimated": res.DroppedRows,
		})
		auditCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := o.audit(auditCtx, cfg.Actor, ActionCleanup, "", filter, res.DroppedRows); err != nil && runErr == nil {
			runErr = fmt.Errorf("audit: %w", err)
		}
	}
	if runErr != nil {
		return res, fmt.Errorf("ops: partitions: %w", o.dbErr(runErr))
	}
	return res, nil
}

// partitionCheck is what partition_check.sql reads.
type partitionCheck struct {
	unsent, dead, discarded      int64
	lastDiscarded, lastPublished *time.Time
	rows                         int64
}

// keeps returns why the partition must stay, or "".
func (c partitionCheck) keeps(cfg PartitionConfig, cutoff time.Time) string {
	var why []string
	if c.unsent > 0 {
		why = append(why, fmt.Sprintf("%d unsent message(s)", c.unsent))
	}
	if c.dead > 0 {
		why = append(why, fmt.Sprintf("%d dead letter(s): replay or discard them", c.dead))
	}
	if c.discarded > 0 && !cfg.IncludeDiscarded {
		why = append(why, fmt.Sprintf("%d DISCARDED message(s), kept for audit without IncludeDiscarded", c.discarded))
	} else if c.lastDiscarded != nil && !c.lastDiscarded.Before(cutoff) {
		why = append(why, "a message discarded after the cutoff, at "+c.lastDiscarded.UTC().Format(time.RFC3339))
	}
	if c.lastPublished != nil && !c.lastPublished.Before(cutoff) {
		why = append(why, "a message published after the cutoff, at "+c.lastPublished.UTC().Format(time.RFC3339))
	}
	return strings.Join(why, "; ")
}

// partitionCheckQuery returns partition_check.sql for p, with its arguments:
// the partition's range of created_at, MINVALUE (the legacy partition) as
// -infinity.
func (o *Ops) partitionCheckQuery(p pgstore.Partition) (string, []any) {
	sql := strings.NewReplacer("{{partition}}", pgx.Identifier{p.Name}.Sanitize()).Replace(o.q.partitionCheck)
	var from any = p.From
	if p.From.IsZero() {
		from = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	return sql, []any{from, p.To}
}

// dropPartition drops p if nothing in it must be kept, or says why not.
func (o *Ops) dropPartition(ctx context.Context, cfg PartitionConfig, cutoff time.Time, p pgstore.Partition) (*KeptPartition, int64, error) {
	render := strings.NewReplacer("{{partition}}", pgx.Identifier{p.Name}.Sanitize())
	checkSQL, checkArgs := o.partitionCheckQuery(p)
	check := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) (partitionCheck, error) {
		var c partitionCheck
		err := q.QueryRow(ctx, checkSQL, checkArgs...).Scan(&c.unsent, &c.dead, &c.discarded, &c.lastDiscarded, &c.lastPublished, &c.rows)
		return c, err
	}
	kept := func(c partitionCheck, reason string) *KeptPartition {
		return &KeptPartition{Partition: p, Reason: reason, Unsent: c.unsent, DeadLetters: c.dead, Discarded: c.discarded}
	}
	// First without locks, to skip what must stay at no cost to others.
	c, err := check(o.pool)
	if err != nil {
		return nil, 0, err
	}
	if why := c.keeps(cfg, cutoff); why != "" {
		return kept(c, why), 0, nil
	}
	if _, err := o.pool.Exec(ctx, render.Replace(o.q.partitionAttempts)); err != nil {
		return nil, 0, fmt.Errorf("delete attempt history: %w", err)
	}
	table := pgx.Identifier{o.Schema(), "outbox_messages"}.Sanitize()
	part := pgx.Identifier{o.Schema(), p.Name}.Sanitize()
	var k *KeptPartition
	err = pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", fmt.Sprintf("%dms", cfg.LockTimeout.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", o.store.PartitionLockKey()); err != nil {
			return err
		}
		// The parent first, as enqueues and claims lock it, so that no
		// one waits for a lock the other holds.
		if _, err := tx.Exec(ctx, "LOCK TABLE "+table+", "+part+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			return err
		}
		c, err = check(tx)
		if err != nil {
			return err
		}
		if why := c.keeps(cfg, cutoff); why != "" {
			k = kept(c, why)
			return nil
		}
		_, err = tx.Exec(ctx, "DROP TABLE "+part)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		return kept(c, fmt.Sprintf("outbox_messages was busy: its lock was not granted within %s; trying again at the next run", cfg.LockTimeout)), 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return k, c.rows, nil
}

// RetentionEvery is the retention loop of a relay: every interval until ctx
// ends, on a partitioned table it runs [Ops.MaintainPartitions] (creating
// partitions ahead and dropping those past cfg.OlderThan; cfg.BatchSize and
// cfg.Pause do not apply), and on a plain table [Ops.Cleanup]. It checks
// which at every run, so it follows a table partitioned while it runs. A
// failed run is logged and retried at the next interval. It returns ctx's
// error.
func (o *Ops) RetentionEvery(ctx context.Context, cfg CleanupConfig, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("%w: interval %s must be positive", ErrInvalidConfig, interval)
	}
	if err := cfg.withDefaults().validate(); err != nil {
		return err
	}
	return o.every(ctx, interval, "retention", func(ctx context.Context) error { return o.retention(ctx, cfg) })
}

func (o *Ops) retention(ctx context.Context, cfg CleanupConfig) error {
	partitioned, err := o.store.PartitionInterval(ctx)
	if err != nil {
		return err
	}
	if partitioned == 0 {
		_, err := o.Cleanup(ctx, cfg)
		return err
	}
	_, err = o.MaintainPartitions(ctx, PartitionConfig{OlderThan: cfg.OlderThan, IncludeDiscarded: cfg.IncludeDiscarded, Actor: cfg.Actor})
	return err
}

// MaintainPartitionsEvery runs [Ops.MaintainPartitions] with cfg now and
// then every interval until ctx ends. A failed run is logged and retried at
// the next interval. It returns ctx's error.
func (o *Ops) MaintainPartitionsEvery(ctx context.Context, cfg PartitionConfig, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("%w: interval %s must be positive", ErrInvalidConfig, interval)
	}
	if err := cfg.withDefaults().validate(); err != nil {
		return err
	}
	return o.every(ctx, interval, "partition maintenance", func(ctx context.Context) error {
		_, err := o.MaintainPartitions(ctx, cfg)
		return err
	})
}
