package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Partitioning configures a time-partitioned outbox table (see
// [Config.Partitioning]). The zero value means a plain table.
type Partitioning struct {
	// Interval is the span of created_at one partition holds: 24h for
	// daily partitions, 1h for hourly ones. Partitions start at multiples
	// of Interval since the Unix epoch, in UTC (midnight UTC for 24h). It
	// must be a whole number of hours. Defaults to 0: not partitioned.
	Interval time.Duration
	// Ahead is how many partitions after the current one [Store.Migrate]
	// creates. Defaults to [DefaultPartitionsAhead].
	Ahead int
}

// maxMovePartitions bounds how many partitions one EnsurePartitions
// creates for rows found in the default partition.
const maxMovePartitions = 1000

// DefaultPartitionsAhead is the default of Partitioning.Ahead and of the
// ahead argument of [Store.EnsurePartitions].
const DefaultPartitionsAhead = 3

// Errors of the partitioned table; test for them with errors.Is.
var (
	// ErrNotPartitioned is wrapped by [Store.EnsurePartitions] and
	// [Store.Partitions] when outbox_messages is a plain table.
	ErrNotPartitioned = errors.New("pgstore: outbox_messages is not partitioned")
	// ErrPartitioning is wrapped by [Store.Migrate] when the table cannot
	// be partitioned as configured: it is partitioned with another
	// interval, or a publication (CDC) holds it.
	ErrPartitioning = errors.New("pgstore: cannot partition outbox_messages")
)

// Partition is one partition of a partitioned outbox_messages.
type Partition struct {
	// Name is the table name (without the schema), such as
	// outbox_messages_p20260301 (daily), outbox_messages_p2026030114
	// (hourly), outbox_messages_legacy (the rows of the table before it
	// was partitioned) or outbox_messages_default.
	Name string
	// Default is true for the default partition, which holds rows no
	// other partition covers.
	Default bool
	// From and To are the created_at range [From, To). From is zero for
	// MINVALUE (the legacy partition); both are zero for the default
	// partition.
	From, To time.Time
}

//go:embed partitioning/*.sql
var partitionFiles embed.FS

func partitionSQL(name string) string {
	b, err := partitionFiles.ReadFile("partitioning/" + name)
	if err != nil {
		panic(fmt.Sprintf("pgstore: read embedded partitioning/%s: %v", name, err))
	}
	return string(b)
}

func (p Partitioning) validate() error {
	switch {
	case p.Interval < 0 || p.Interval%time.Hour != 0:
		return fmt.Errorf("%w: Partitioning.Interval %s must be a whole number of hours (0: not partitioned)", ErrInvalidConfig, p.Interval)
	case p.Ahead < 0:
		return fmt.Errorf("%w: Partitioning.Ahead %d must not be negative", ErrInvalidConfig, p.Ahead)
	}
	return nil
}

// partitionName names the partition starting at from.
func partitionName(from time.Time, interval time.Duration) string {
	if interval%(24*time.Hour) == 0 {
		return "outbox_messages_p" + from.UTC().Format("20060102")
	}
	return "outbox_messages_p" + from.UTC().Format("2006010215")
}

// partitionStart is the start of the partition holding t.
func partitionStart(t time.Time, interval time.Duration) time.Time {
	return time.Unix(0, 0).UTC().Add(t.Sub(time.Unix(0, 0)).Truncate(interval))
}

// timestampLiteral renders t as an unambiguous timestamptz literal.
func timestampLiteral(t time.Time) string {
	return "'" + t.UTC().Format("2006-01-02T15:04:05.999999Z07:00") + "'::timestamptz"
}

// withClause renders reloptions ("fillfactor=90") as WITH (...), or "".
func withClause(reloptions []string) string {
	if len(reloptions) == 0 {
		return ""
	}
	return "WITH (" + strings.Join(reloptions, ", ") + ")"
}

// partitionState reports whether outbox_messages is partitioned and, if
// so, by which interval.
func (s *Store) partitionState(ctx context.Context, q pgx.Tx) (partitioned bool, interval time.Duration, reloptions []string, err error) {
	var hasSettings bool
	if err := q.QueryRow(ctx, partitionSQL("state.sql"), s.cfg.Schema).Scan(&partitioned, &hasSettings); err != nil {
		return false, 0, nil, err
	}
	if !hasSettings {
		return partitioned, 0, nil, nil
	}
	var secs int64
	err = q.QueryRow(ctx, s.render("SELECT interval_seconds, reloptions FROM {{schema}}.outbox_partitioning")).Scan(&secs, &reloptions)
	if errors.Is(err, pgx.ErrNoRows) {
		return partitioned, 0, nil, nil
	}
	if err != nil {
		return false, 0, nil, err
	}
	return partitioned, time.Duration(secs) * time.Second, reloptions, nil
}

// PartitionInterval returns the interval outbox_messages is partitioned
// by, or 0 when it is a plain table.
func (s *Store) PartitionInterval(ctx context.Context) (time.Duration, error) {
	var d time.Duration
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		partitioned, interval, _, err := s.partitionState(ctx, tx)
		if partitioned {
			d = interval
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: partition interval: %w", err)
	}
	return d, nil
}

// partition makes outbox_messages a table partitioned by created_at, in
// Migrate's transaction, or checks that it already is with the configured
// interval. A plain table with rows is kept as the partition
// outbox_messages_legacy for everything created before the first new
// partition, so no row is copied.
func (s *Store) partition(ctx context.Context, tx pgx.Tx) error {
	cfg := s.cfg.Partitioning
	partitioned, interval, _, err := s.partitionState(ctx, tx)
	if err != nil {
		return err
	}
	if partitioned {
		if interval != cfg.Interval {
			return fmt.Errorf("%w: it is partitioned by %s, not %s (Partitioning.Interval); the interval cannot be changed",
				ErrPartitioning, interval, cfg.Interval)
		}
		_, err := s.ensurePartitions(ctx, tx, time.Time{}, cfg.Ahead)
		return err
	}
	if err := s.convert(ctx, tx); err != nil {
		return err
	}
	_, err = s.ensurePartitions(ctx, tx, time.Time{}, cfg.Ahead)
	return err
}

// EnsurePartitions creates, if missing, the default partition and the
// partitions from the one holding the current database time to ahead
// intervals after it (ahead 0 means [DefaultPartitionsAhead]; a negative
// ahead creates none after the current one). It returns the names of the
// partitions it created.
//
// Rows that went to the default partition because no partition covered
// their time (maintenance did not run for a while) are moved into
// partitions created for their intervals. Each new
// partition is built on its own and attached, which takes only a SHARE
// UPDATE EXCLUSIVE lock on outbox_messages: enqueues and claims go on.
// Each partition gets a unique index on id: event ids are unique within a
// partition (a duplicate enqueued in the same interval fails as on a plain
// table), and across partitions as unique as the ids are random.
//
// It returns an error wrapping [ErrNotPartitioned] on a plain table. Safe
// to run from several processes at once: an advisory lock serialises them.
func (s *Store) EnsurePartitions(ctx context.Context, ahead int) ([]string, error) {
	var created []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		created, err = s.ensurePartitions(ctx, tx, time.Time{}, ahead)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: ensure partitions: %w", err)
	}
	return created, nil
}

// ensurePartitions is EnsurePartitions in tx. A zero now means the
// database's clock.
func (s *Store) ensurePartitions(ctx context.Context, tx pgx.Tx, now time.Time, ahead int) ([]string, error) {
	if ahead == 0 {
		ahead = DefaultPartitionsAhead
	}
	if ahead < 0 {
		ahead = 0
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.partitionLockKey()); err != nil {
		return nil, fmt.Errorf("take advisory lock: %w", err)
	}
	partitioned, interval, reloptions, err := s.partitionState(ctx, tx)
	if err != nil {
		return nil, err
	}
	if !partitioned || interval <= 0 {
		return nil, ErrNotPartitioned
	}
	if now.IsZero() {
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			return nil, err
		}
	}
	with := withClause(reloptions)
	var created []string
	existing, err := s.partitions(ctx, tx)
	if err != nil {
		return nil, err
	}
	if !hasDefaultPartition(existing) {
		if err := s.createDefaultPartition(ctx, tx, with); err != nil {
			return nil, err
		}
		created = append(created, "outbox_messages_default")
	}
	starts, err := s.wantedPartitions(ctx, tx, now, interval, ahead)
	if err != nil {
		return nil, err
	}
	for _, from := range starts {
		to := from.Add(interval)
		if covered(existing, from, to) {
			continue
		}
		name := partitionName(from, interval)
		if err := s.createPartition(ctx, tx, name, from, to, with); err != nil {
			return nil, err
		}
		created = append(created, name)
		existing = append(existing, Partition{Name: name, From: from, To: to})
	}
	return created, nil
}

// hasDefaultPartition reports whether ps holds the default partition.
func hasDefaultPartition(ps []Partition) bool {
	for _, p := range ps {
		if p.Default {
			return true
		}
	}
	return false
}

// createDefaultPartition creates outbox_messages_default with the storage
// settings with (a WITH clause, or "").
func (s *Store) createDefaultPartition(ctx context.Context, tx pgx.Tx, with string) error {
	if _, err := tx.Exec(ctx, strings.ReplaceAll(s.render(partitionSQL("create_default.sql")), "{{with}}", with)); err != nil {
		return fmt.Errorf("create the default partition: %w", err)
	}
	return nil
}

// wantedPartitions returns, oldest first, the starts of the partitions
// that should exist at now: the current one, ahead after it, and one for
// every interval of the rows that went to the default partition while no
// partition covered them.
func (s *Store) wantedPartitions(ctx context.Context, tx pgx.Tx, now time.Time, interval time.Duration, ahead int) ([]time.Time, error) {
	start := partitionStart(now, interval)
	wanted := map[time.Time]bool{}
	for i := 0; i <= ahead; i++ {
		wanted[start.Add(time.Duration(i)*interval)] = true
	}
	rows, err := tx.Query(ctx, s.render(`SELECT DISTINCT floor(extract(epoch FROM created_at) / $1)::bigint
		FROM {{schema}}.outbox_messages_default`), int64(interval/time.Second))
	if err != nil {
		return nil, fmt.Errorf("read the default partition: %w", err)
	}
	slots, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read the default partition: %w", err)
	}
	if len(slots) > maxMovePartitions {
		return nil, fmt.Errorf("the default partition holds rows of %d intervals (more than %d): move them by hand", len(slots), maxMovePartitions)
	}
	for _, n := range slots {
		wanted[time.Unix(n*int64(interval/time.Second), 0).UTC()] = true
	}
	starts := make([]time.Time, 0, len(wanted))
	for t := range wanted {
		starts = append(starts, t)
	}
	slices.SortFunc(starts, time.Time.Compare)
	return starts, nil
}

// createPartition creates the partition name for [from, to) with the
// storage settings with (partitioning/create.sql), which moves
// the rows of that range out of the default partition.
func (s *Store) createPartition(ctx context.Context, tx pgx.Tx, name string, from, to time.Time, with string) error {
	sql := strings.NewReplacer(
		"{{partition}}", pgx.Identifier{name}.Sanitize(),
		"{{id_index}}", pgx.Identifier{name + "_id_key"}.Sanitize(),
		"{{from}}", timestampLiteral(from),
		"{{to}}", timestampLiteral(to),
		"{{with}}", with,
	).Replace(s.render(partitionSQL("create.sql")))
	if _, err := tx.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create partition %s: %w", name, err)
	}
	return nil
}

// covered reports whether [from, to) overlaps a range partition in ps.
func covered(ps []Partition, from, to time.Time) bool {
	for _, p := range ps {
		if p.Default {
			continue
		}
		if (p.From.IsZero() || p.From.Before(to)) && (p.To.IsZero() || p.To.After(from)) {
			return true
		}
	}
	return false
}

// Partitions lists the partitions of outbox_messages, oldest first, the
// default partition first of all. It returns an error wrapping
// [ErrNotPartitioned] on a plain table.
func (s *Store) Partitions(ctx context.Context) ([]Partition, error) {
	var ps []Partition
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		partitioned, _, _, err := s.partitionState(ctx, tx)
		if err != nil {
			return err
		}
		if !partitioned {
			return ErrNotPartitioned
		}
		ps, err = s.partitions(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: partitions: %w", err)
	}
	return ps, nil
}

func (s *Store) partitions(ctx context.Context, tx pgx.Tx) ([]Partition, error) {
	rows, err := tx.Query(ctx, partitionSQL("list.sql"), s.cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	var out []Partition
	var (
		p        Partition
		from, to *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&p.Name, &p.Default, &from, &to}, func() error {
		q := p
		if from != nil {
			q.From = from.UTC()
		}
		if to != nil {
			q.To = to.UTC()
		}
		out = append(out, q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	return out, nil
}

// partitionLockKey is the advisory lock key that serialises partition
// maintenance for this store's schema. [Store.PartitionLockKey] exposes it
// to package ops, which drops partitions under the same lock.
func (s *Store) partitionLockKey() int64 {
	return s.lockKey("outbox.pgstore.partitions:")
}

// PartitionLockKey is the transaction-level advisory lock key under which
// partitions of this store's schema are created and dropped. Package ops
// takes it (pg_advisory_xact_lock) around dropping a partition.
func (s *Store) PartitionLockKey() int64 { return s.partitionLockKey() }
