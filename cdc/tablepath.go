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

// Claim leases due heads of deferred aggregates (table_claim.sql) and
// releases the aggregates that have nothing unsent left. A Limit below 1
// claims nothing; a Lease shorter than a millisecond is an error, as in
// pgstore's Claim, since such a lease would expire at once.
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
