package cdc

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/storetest"
)

// TestConformanceTablePath runs the suite every store passes on the table
// path's queue (tableQueue): every message the harness enqueues has its
// aggregate deferred, as the stream defers it when it hands the aggregate
// to the table path, so the table path's claim is the store's claim.
func TestConformanceTablePath(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return tablePathHarness(t, CleanupMarkSent)
	})
}

// TestConformanceTablePathCleanupDelete runs the suite on the table path
// of a relay with Cleanup "delete", whose MarkSent deletes the rows
// (table_delete_sent.sql) instead of marking them SENT.
func TestConformanceTablePathCleanupDelete(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		h := tablePathHarness(t, CleanupDelete)
		h.SentDeleted = true
		return h
	})
}

// tablePathHarness is the suite's view of the table path of a relay with
// cleanup, on an outbox of its own in CDC mode (relayFixture: the relay
// holds the slot's lease, so that the stream's record, record.sql, defers
// aggregates).
func tablePathHarness(t *testing.T, cleanup Cleanup) storetest.Harness {
	t.Helper()
	pool, st, r := relayFixture(t, Config{Cleanup: cleanup})
	return storetest.Harness{
		Queue: &tableQueue{r: r},
		Enqueue: func(ctx context.Context, msgs ...outbox.Message) error {
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
				return err
			}
			return deferAggregates(r, msgs)
		},
		EnqueueRollback: func(ctx context.Context, msgs ...outbox.Message) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			return errors.Join(st.Enqueue(ctx, tx, msgs...), tx.Rollback(ctx))
		},
		Get:         st.Get,
		ErrNotFound: pgstore.ErrNotFound,
		Counts:      st.Counts,
		InsertUnchecked: func(ctx context.Context, m outbox.Message, headers string) error {
			if err := insertUnchecked(ctx, pool, m, headers); err != nil {
				return err
			}
			return deferAggregates(r, []outbox.Message{m})
		},
		Concurrent: true,
	}
}

// deferAggregates hands the aggregates of msgs, committed, to the table
// path as the stream does when it cannot publish them in order: it records
// them deferred (record.sql, under the relay's lease).
func deferAggregates(r *Relay, msgs []outbox.Message) error {
	var out toRecord
	for _, m := range msgs {
		out.deferred = append(out.deferred, entryOf(outbox.Record{Message: m}))
	}
	return r.record(out, r.leaseToken())
}

// entryOf is rec as an entry of the ledger, for a record.
func entryOf(rec outbox.Record) *entry { return &entry{rec: rec, agg: aggOf(rec)} }

// failedEntry is rec as an entry whose publish failed with err, decided
// by r's policy.
func failedEntry(r *Relay, rec outbox.Record, err error) *entry {
	e := entryOf(rec)
	e.failure, e.err = r.decide(rec, err), err
	return e
}

// insertUnchecked writes m with plain SQL, with headers (JSON text) as
// given, in a transaction that runs with session_replication_role =
// replica, which switches off the table's triggers for it (a superuser's
// setting, as the tests run): migration 015's rule that headers are a JSON
// object of string values does not see the row, as for a row written
// before that migration. It takes its transaction id first, as migration
// 012's trigger (switched off too) would have it do. m.Headers is ignored.
func insertUnchecked(ctx context.Context, pool *pgxpool.Pool, m outbox.Message, headers string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, st := range []string{"SELECT pg_current_xact_id()", "SET LOCAL session_replication_role = replica"} {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO outbox_messages
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
			VALUES ($1, $2, $3, $4, 1, $5, 'application/json', $6::jsonb)`,
			m.ID, m.AggregateType, m.AggregateID, m.EventType, m.Payload, headers)
		return err
	})
}
