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

// convert turns the plain outbox_messages into a partitioned table; see
// partition.
func (s *Store) convert(ctx context.Context, tx pgx.Tx) error {
	schema := s.cfg.Schema
	ident := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	table := ident("outbox_messages")
	exec := func(sql string, args ...any) error {
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("partition outbox_messages: %w (in %q)", err, firstLine(sql))
		}
		return nil
	}

	// A publication (CDC mode) would stay with the old table, which
	// becomes a partition, and the new parent would be published by no one.
	var pubs *string
	if err := tx.QueryRow(ctx, `SELECT string_agg(p.pubname, ', ')
		FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
		WHERE r.prrelid = to_regclass($1)`, table).Scan(&pubs); err != nil {
		return fmt.Errorf("partition outbox_messages: find publications: %w", err)
	}
	if pubs != nil {
		return fmt.Errorf("%w: it is in the publication(s) %s (CDC mode); stop the CDC relays and drop them and "+
			"their slot first, and start the relay again after the migration (see docs/operations.md)", ErrPartitioning, *pubs)
	}
	if err := exec("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE"); err != nil {
		return err
	}

	var (
		reloptions []string
		hasRows    bool
		lastSeq    *int64
		newest     *time.Time
	)
	if err := tx.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = to_regclass($1)`, table).Scan(&reloptions); err != nil {
		return fmt.Errorf("partition outbox_messages: read storage settings: %w", err)
	}
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+`), (SELECT max(created_at) FROM `+table+`),
		greatest(pg_sequence_last_value(pg_get_serial_sequence($1, 'seq')), (SELECT max(seq) FROM `+table+`))`,
		table).Scan(&hasRows, &newest, &lastSeq); err != nil {
		return fmt.Errorf("partition outbox_messages: read the table: %w", err)
	}

	// Every index and constraint that is not unique is re-created on the
	// new parent with the same definition, so that later migrations' (and
	// operators') indexes carry over; their definitions are read before
	// the old table is renamed.
	rows, err := tx.Query(ctx, `SELECT pg_get_indexdef(i.indexrelid)
		FROM pg_index i
		WHERE i.indrelid = to_regclass($1) AND NOT i.indisunique
		ORDER BY i.indexrelid`, table)
	if err != nil {
		return fmt.Errorf("partition outbox_messages: read indexes: %w", err)
	}
	indexDefs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("partition outbox_messages: read indexes: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = to_regclass($1)`, table)
	if err != nil {
		return fmt.Errorf("partition outbox_messages: read indexes: %w", err)
	}
	indexNames, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("partition outbox_messages: read indexes: %w", err)
	}
	// A NOT VALID check (migration 003) conflicts with the parent's valid
	// one when the old table is attached: validate it (one scan).
	rows, err = tx.Query(ctx, `SELECT conname::text FROM pg_constraint
		WHERE conrelid = to_regclass($1) AND contype = 'c' AND NOT convalidated`, table)
	if err != nil {
		return fmt.Errorf("partition outbox_messages: read constraints: %w", err)
	}
	notValid, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("partition outbox_messages: read constraints: %w", err)
	}
	for _, c := range notValid {
		if err := exec("ALTER TABLE " + table + " VALIDATE CONSTRAINT " + pgx.Identifier{c}.Sanitize()); err != nil {
			return err
		}
	}

	legacy := ident("outbox_messages_legacy")
	steps := []string{
		"CREATE TABLE " + ident("outbox_messages_partitioned") + " (LIKE " + table +
			" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY INCLUDING COMMENTS) PARTITION BY RANGE (created_at)",
		"ALTER TABLE " + table + " RENAME TO outbox_messages_legacy",
		"DROP TRIGGER IF EXISTS outbox_messages_notify ON " + legacy,
		"DROP TRIGGER IF EXISTS outbox_messages_xact_id ON " + legacy,
		// A row trigger of the parent is cloned to the partitions,
		// outbox_messages_legacy among them once attached.
		"DROP TRIGGER IF EXISTS outbox_messages_headers_are_strings ON " + legacy,
	}
	for _, name := range indexNames {
		// Renaming an index that backs a constraint renames the
		// constraint too.
		steps = append(steps, "ALTER INDEX "+ident(name)+" RENAME TO "+pgx.Identifier{legacyName(name)}.Sanitize())
	}
	steps = append(steps,
		"ALTER TABLE "+legacy+" ALTER COLUMN seq DROP IDENTITY IF EXISTS",
		"ALTER TABLE "+ident("outbox_messages_partitioned")+" RENAME TO outbox_messages",
		// The identity's sequence gets the name the plain table's had.
		"ALTER SEQUENCE "+ident("outbox_messages_partitioned_seq_seq")+" RENAME TO outbox_messages_seq_seq",
	)
	for _, st := range steps {
		if err := exec(st); err != nil {
			return err
		}
	}
	// The identity's sequence continues after the old one, so seq stays
	// unique and increasing across the old rows and the new.
	if lastSeq != nil {
		if err := exec(`SELECT setval(pg_get_serial_sequence($1, 'seq'), $2)`, table, *lastSeq); err != nil {
			return err
		}
	}
	steps = []string{
		// A primary key of a partitioned table must contain the partition
		// key. seq alone stays unique in practice: it comes from one
		// identity sequence, and nothing else writes it.
		"ALTER TABLE " + table + " ADD CONSTRAINT outbox_messages_pkey PRIMARY KEY (seq, created_at)",
		"CREATE TRIGGER outbox_messages_notify AFTER INSERT ON " + table +
			" FOR EACH STATEMENT EXECUTE FUNCTION " + ident("outbox_notify") + "()",
		"CREATE TRIGGER outbox_messages_xact_id BEFORE INSERT ON " + table +
			" FOR EACH STATEMENT WHEN (pg_current_xact_id_if_assigned() IS NULL) EXECUTE FUNCTION " + ident("outbox_xact_id") + "()",
		// Migration 015's.
		"CREATE TRIGGER outbox_messages_headers_are_strings BEFORE INSERT OR UPDATE OF headers ON " + table +
			" FOR EACH ROW WHEN (NEW.headers <> '{}'::jsonb AND NOT " + ident("outbox_headers_are_strings") + "(NEW.headers))" +
			" EXECUTE FUNCTION " + ident("outbox_refuse_headers") + "()",
	}
	steps = append(steps, indexDefs...)
	for _, st := range steps {
		if err := exec(st); err != nil {
			return err
		}
	}

	interval := s.cfg.Partitioning.Interval
	if hasRows {
		// The old table becomes the partition of everything created
		// before the first partition boundary after its newest row.
		// Indexes equal to the parent's are attached, not rebuilt; the
		// primary key (seq, created_at) is built on it (one pass).
		end := partitionStart(*newest, interval).Add(interval)
		var pkey *string
		if err := tx.QueryRow(ctx, `SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'`,
			legacy).Scan(&pkey); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("partition outbox_messages: read the primary key: %w", err)
		}
		if pkey != nil {
			// The partition gets the parent's key (seq, created_at) instead.
			if err := exec("ALTER TABLE " + legacy + " DROP CONSTRAINT " + pgx.Identifier{*pkey}.Sanitize()); err != nil {
				return err
			}
		}
		if err := exec("ALTER TABLE " + table + " ATTACH PARTITION " + legacy +
			" FOR VALUES FROM (MINVALUE) TO (" + timestampLiteral(end) + ")"); err != nil {
			return err
		}
	} else if err := exec("DROP TABLE " + legacy); err != nil {
		return err
	}
	if err := exec(s.render(partitionSQL("settings.sql"))); err != nil {
		return err
	}
	return exec(s.render(`INSERT INTO {{schema}}.outbox_partitioning (interval_seconds, reloptions) VALUES ($1, $2)
		ON CONFLICT (singleton) DO UPDATE SET interval_seconds = excluded.interval_seconds, reloptions = excluded.reloptions, partitioned_at = now()`),
		int64(interval/time.Second), reloptions)
}

// legacyName is the name an index of the old table gets once the table is
// the partition outbox_messages_legacy.
func legacyName(name string) string {
	var out string
	if rest, ok := strings.CutPrefix(name, "outbox_messages"); ok {
		out = "outbox_messages_legacy" + rest
	} else {
		out = name + "_legacy"
	}
	if len(out) > 63 {
		out = out[:63]
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
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
	hasDefault := false
	for _, p := range existing {
		hasDefault = hasDefault || p.Default
	}
	if !hasDefault {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(s.render(partitionSQL("create_default.sql")), "{{with}}", with)); err != nil {
			return nil, fmt.Errorf("create the default partition: %w", err)
		}
		created = append(created, "outbox_messages_default")
	}
	// The current partition, those ahead, and any for rows that went to
	// the default partition while no partition covered them.
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
	for _, from := range starts {
		to := from.Add(interval)
		if covered(existing, from, to) {
			continue
		}
		name := partitionName(from, interval)
		sql := strings.NewReplacer(
			"{{partition}}", pgx.Identifier{name}.Sanitize(),
			"{{id_index}}", pgx.Identifier{name + "_id_key"}.Sanitize(),
			"{{from}}", timestampLiteral(from),
			"{{to}}", timestampLiteral(to),
			"{{with}}", with,
		).Replace(s.render(partitionSQL("create.sql")))
		if _, err := tx.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("create partition %s: %w", name, err)
		}
		created = append(created, name)
		existing = append(existing, Partition{Name: name, From: from, To: to})
	}
	return created, nil
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
