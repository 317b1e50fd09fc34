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
