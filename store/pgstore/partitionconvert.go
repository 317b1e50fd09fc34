package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// convert turns the plain outbox_messages into a partitioned table; see
// partition. It runs in Migrate's transaction, and holds an ACCESS
// EXCLUSIVE lock on the table from its first change on.
func (s *Store) convert(ctx context.Context, tx pgx.Tx) error {
	table := s.qualify("outbox_messages")
	if err := refuseIfPublished(ctx, tx, table); err != nil {
		return err
	}
	if err := execPartitioning(ctx, tx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return err
	}
	old, err := readPlainTable(ctx, tx, table)
	if err != nil {
		return err
	}
	if err := validateChecks(ctx, tx, table); err != nil {
		return err
	}
	if err := s.replaceWithParent(ctx, tx, old.indexNames); err != nil {
		return err
	}
	if err := continueSequence(ctx, tx, table, old.lastSeq); err != nil {
		return err
	}
	if err := s.completeParent(ctx, tx, old.indexDefs); err != nil {
		return err
	}
	if old.hasRows {
		err = s.attachLegacy(ctx, tx, *old.newest)
	} else {
		err = execPartitioning(ctx, tx, "DROP TABLE "+s.qualify("outbox_messages_legacy"))
	}
	if err != nil {
		return err
	}
	return s.recordPartitioning(ctx, tx, old.reloptions)
}

// qualify returns the quoted name of the table or index name in the
// store's schema.
func (s *Store) qualify(name string) string {
	return pgx.Identifier{s.cfg.Schema, name}.Sanitize()
}

// execPartitioning runs one statement of the conversion; its error names
// the statement.
func execPartitioning(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("partition outbox_messages: %w (in %q)", err, firstLine(sql))
	}
	return nil
}

// execAllPartitioning runs the statements in order, up to the first that
// fails.
func execAllPartitioning(ctx context.Context, tx pgx.Tx, statements []string) error {
	for _, st := range statements {
		if err := execPartitioning(ctx, tx, st); err != nil {
			return err
		}
	}
	return nil
}

// refuseIfPublished returns an error wrapping [ErrPartitioning] when a
// publication (CDC mode) holds table: it would stay with the old table,
// which becomes a partition, and the new parent would be published by no
// one.
func refuseIfPublished(ctx context.Context, tx pgx.Tx, table string) error {
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
	return nil
}

// plainTable is what convert reads of the plain outbox_messages before it
// renames it.
type plainTable struct {
	reloptions []string // storage settings, which the partitions get too
	hasRows    bool
	newest     *time.Time // the newest created_at
	lastSeq    *int64     // the highest seq given out or stored
	indexDefs  []string   // the definitions of the indexes that are not unique
	indexNames []string   // the names of all indexes
}

// readPlainTable reads the storage settings, rows and indexes of the plain
// table. Every index and constraint that is not unique is re-created on
// the new parent with the same definition, so that later migrations' (and
// operators') indexes carry over; their definitions are read before the
// old table is renamed.
func readPlainTable(ctx context.Context, tx pgx.Tx, table string) (plainTable, error) {
	var t plainTable
	if err := tx.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = to_regclass($1)`, table).Scan(&t.reloptions); err != nil {
		return t, fmt.Errorf("partition outbox_messages: read storage settings: %w", err)
	}
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+`), (SELECT max(created_at) FROM `+table+`),
		greatest(pg_sequence_last_value(pg_get_serial_sequence($1, 'seq')), (SELECT max(seq) FROM `+table+`))`,
		table).Scan(&t.hasRows, &t.newest, &t.lastSeq); err != nil {
		return t, fmt.Errorf("partition outbox_messages: read the table: %w", err)
	}
	var err error
	t.indexDefs, err = queryStrings(ctx, tx, `SELECT pg_get_indexdef(i.indexrelid)
		FROM pg_index i
		WHERE i.indrelid = to_regclass($1) AND NOT i.indisunique
		ORDER BY i.indexrelid`, table)
	if err != nil {
		return t, fmt.Errorf("partition outbox_messages: read indexes: %w", err)
	}
	t.indexNames, err = queryStrings(ctx, tx, `SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = to_regclass($1)`, table)
	if err != nil {
		return t, fmt.Errorf("partition outbox_messages: read indexes: %w", err)
	}
	return t, nil
}

// queryStrings returns the rows of a query of one text column.
func queryStrings(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]string, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// validateChecks validates the NOT VALID checks of table (migration 003):
// such a check conflicts with the parent's valid one when the old table is
// attached. Each is one scan of the table.
func validateChecks(ctx context.Context, tx pgx.Tx, table string) error {
	notValid, err := queryStrings(ctx, tx, `SELECT conname::text FROM pg_constraint
		WHERE conrelid = to_regclass($1) AND contype = 'c' AND NOT convalidated`, table)
	if err != nil {
		return fmt.Errorf("partition outbox_messages: read constraints: %w", err)
	}
	for _, c := range notValid {
		if err := execPartitioning(ctx, tx, "ALTER TABLE "+table+" VALIDATE CONSTRAINT "+pgx.Identifier{c}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// replaceWithParent creates the partitioned parent and gives it the name
// outbox_messages: the plain table becomes outbox_messages_legacy, without
// its triggers and identity, and its indexes (indexNames) get legacy
// names; the parent's identity sequence gets the name the plain table's
// had.
func (s *Store) replaceWithParent(ctx context.Context, tx pgx.Tx, indexNames []string) error {
	table, legacy := s.qualify("outbox_messages"), s.qualify("outbox_messages_legacy")
	steps := []string{
		"CREATE TABLE " + s.qualify("outbox_messages_partitioned") + " (LIKE " + table +
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
		steps = append(steps, "ALTER INDEX "+s.qualify(name)+" RENAME TO "+pgx.Identifier{legacyName(name)}.Sanitize())
	}
	steps = append(steps,
		"ALTER TABLE "+legacy+" ALTER COLUMN seq DROP IDENTITY IF EXISTS",
		"ALTER TABLE "+s.qualify("outbox_messages_partitioned")+" RENAME TO outbox_messages",
		// The identity's sequence gets the name the plain table's had.
		"ALTER SEQUENCE "+s.qualify("outbox_messages_partitioned_seq_seq")+" RENAME TO outbox_messages_seq_seq",
	)
	return execAllPartitioning(ctx, tx, steps)
}

// continueSequence makes the identity's sequence of table continue after
// lastSeq (nil: nothing was given out), so seq stays unique and increasing
// across the old rows and the new.
func continueSequence(ctx context.Context, tx pgx.Tx, table string, lastSeq *int64) error {
	if lastSeq == nil {
		return nil
	}
	return execPartitioning(ctx, tx, `SELECT setval(pg_get_serial_sequence($1, 'seq'), $2)`, table, *lastSeq)
}

// completeParent gives the new parent its primary key, its triggers, and
// the plain table's indexes that are not unique (indexDefs).
func (s *Store) completeParent(ctx context.Context, tx pgx.Tx, indexDefs []string) error {
	table := s.qualify("outbox_messages")
	steps := []string{
		// A primary key of a partitioned table must contain the partition
		// key. seq alone stays unique in practice: it comes from one
		// identity sequence, and nothing else writes it.
		"ALTER TABLE " + table + " ADD CONSTRAINT outbox_messages_pkey PRIMARY KEY (seq, created_at)",
		"CREATE TRIGGER outbox_messages_notify AFTER INSERT ON " + table +
			" FOR EACH STATEMENT EXECUTE FUNCTION " + s.qualify("outbox_notify") + "()",
		"CREATE TRIGGER outbox_messages_xact_id BEFORE INSERT ON " + table +
			" FOR EACH STATEMENT WHEN (pg_current_xact_id_if_assigned() IS NULL) EXECUTE FUNCTION " + s.qualify("outbox_xact_id") + "()",
		// Migration 015's.
		"CREATE TRIGGER outbox_messages_headers_are_strings BEFORE INSERT OR UPDATE OF headers ON " + table +
			" FOR EACH ROW WHEN (NEW.headers <> '{}'::jsonb AND NOT " + s.qualify("outbox_headers_are_strings") + "(NEW.headers))" +
			" EXECUTE FUNCTION " + s.qualify("outbox_refuse_headers") + "()",
	}
	return execAllPartitioning(ctx, tx, append(steps, indexDefs...))
}

// attachLegacy attaches outbox_messages_legacy, the old table with rows,
// as the partition of everything created before the first partition
// boundary after its newest row. Indexes equal to the parent's are
// attached, not rebuilt; the primary key (seq, created_at) is built on it
// (one pass) in place of its own.
func (s *Store) attachLegacy(ctx context.Context, tx pgx.Tx, newest time.Time) error {
	legacy := s.qualify("outbox_messages_legacy")
	interval := s.cfg.Partitioning.Interval
	end := partitionStart(newest, interval).Add(interval)
	var pkey *string
	if err := tx.QueryRow(ctx, `SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'`,
		legacy).Scan(&pkey); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("partition outbox_messages: read the primary key: %w", err)
	}
	if pkey != nil {
		if err := execPartitioning(ctx, tx, "ALTER TABLE "+legacy+" DROP CONSTRAINT "+pgx.Identifier{*pkey}.Sanitize()); err != nil {
			return err
		}
	}
	return execPartitioning(ctx, tx, "ALTER TABLE "+s.qualify("outbox_messages")+" ATTACH PARTITION "+legacy+
		" FOR VALUES FROM (MINVALUE) TO ("+timestampLiteral(end)+")")
}

// recordPartitioning creates the table outbox_partitioning and records in
// it the interval and the storage settings (reloptions) of the partitions.
func (s *Store) recordPartitioning(ctx context.Context, tx pgx.Tx, reloptions []string) error {
	if err := execPartitioning(ctx, tx, s.render(partitionSQL("settings.sql"))); err != nil {
		return err
	}
	return execPartitioning(ctx, tx, s.render(`INSERT INTO {{schema}}.outbox_partitioning (interval_seconds, reloptions) VALUES ($1, $2)
		ON CONFLICT (singleton) DO UPDATE SET interval_seconds = excluded.interval_seconds, reloptions = excluded.reloptions, partitioned_at = now()`),
		int64(s.cfg.Partitioning.Interval/time.Second), reloptions)
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
