package cdc

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// tableQueue is the store behind the table path: a relay.Relay (the polling
// relay's claim-publish-mark loop, with its retries and dead letters) whose
// claim only takes messages of deferred aggregates. Marks, failures and
// releases are pgstore's, fenced by the claim's token as usual.
type tableQueue struct{ r *Relay }

var _ store.Queue = (*tableQueue)(nil)

// Claim releases the aggregates that have nothing unsent left (release)
// and then leases due heads of deferred aggregates (table_claim.sql). A
// Limit below 1 claims nothing; a Lease shorter than a millisecond is an
// error, as in pgstore's Claim, since such a lease would expire at once.
func (t *tableQueue) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	if p.Lease < time.Millisecond {
		return store.Claim{}, fmt.Errorf("cdc: table path claim: ClaimParams.Lease %v must be at least 1ms", p.Lease)
	}
	token, err := uuid.NewRandom()
	if err != nil {
		return store.Claim{}, fmt.Errorf("cdc: table path claim: new token: %w", err)
	}
	c := store.Claim{Token: token}
	if p.Limit < 1 || !t.r.tablesReady.Load() {
		return c, nil
	}
	if err := t.release(ctx); err != nil {
		return store.Claim{}, err
	}
	rows, err := t.r.cfg.Pool.Query(ctx, t.r.q.tableClaim, p.Limit, p.Owner, token, p.Lease.Milliseconds())
	if err != nil {
		return store.Claim{}, fmt.Errorf("cdc: table path claim: %w", err)
	}
	recs, err := pgx.CollectRows(rows, pgstore.ScanRecord) // table_claim.sql returns pgstore.RecordColumns
	if err != nil {
		return store.Claim{}, fmt.Errorf("cdc: table path claim: %w", err)
	}
	slices.SortFunc(recs, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	c.Records = recs
	return c, nil
}

// MarkSent marks the messages SENT, or deletes them with CleanupDelete.
func (t *tableQueue) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if t.r.cfg.Cleanup != CleanupDelete {
		return t.r.store.MarkSent(ctx, token, seqs)
	}
	tag, err := t.r.cfg.Pool.Exec(ctx, t.r.q.tableDeleteSent, seqs, token)
	if err != nil {
		return 0, fmt.Errorf("cdc: table path delete sent: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (t *tableQueue) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	return t.r.store.MarkFailed(ctx, token, failures)
}

func (t *tableQueue) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	return t.r.store.Release(ctx, token, seqs)
}

// release removes from outbox_cdc_deferred the aggregates that have
// nothing unsent left, so that their next messages go through the stream
// again. It is one transaction of two statements: table_release.sql
// deletes the aggregates with nothing unsent in its snapshot, and
// table_release_keep.sql, in a later snapshot, puts back those that have
// an unsent message by then.
//
// One statement would not do. The stream leaves a message to the table
// path when it finds the message's aggregate deferred (check.sql), and
// keeps the aggregate's row as it is (ON CONFLICT DO NOTHING, in check.sql
// and record.sql). A delete judged on a snapshot taken before the message
// committed, and done after the stream's check, would strand the message:
// PENDING, its aggregate no longer deferred, the stream past it, and the
// aggregate's next message published from the stream before it. With the
// second statement, a check that found the row before the delete reached
// it read a message committed before the second statement's snapshot,
// which puts the aggregate back; a check that came to the row after the
// delete waits (its insert conflicts with the deleted row) until the
// release commits, and then finds the aggregate put back or inserts it.
func (t *tableQueue) release(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, t.r.cfg.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, t.r.q.tableRelease)
		if err != nil {
			return err
		}
		var (
			types, ids, reasons []string
			ats                 []time.Time
			typ, id, reason     string
			at                  time.Time
		)
		_, err = pgx.ForEachRow(rows, []any{&typ, &id, &at, &reason}, func() error {
			types, ids, ats, reasons = append(types, typ), append(ids, id), append(ats, at), append(reasons, reason)
			return nil
		})
		if err != nil || len(types) == 0 {
			return err
		}
		_, err = tx.Exec(ctx, t.r.q.tableReleaseKeep, types, ids, ats, reasons)
		return err
	})
	if err != nil {
		return fmt.Errorf("cdc: table path release: %w", err)
	}
	return nil
}
