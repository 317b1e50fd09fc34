package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/failpoint"
	"github.com/outbox-dev/outbox/internal/rowheaders"
	"github.com/outbox-dev/outbox/internal/statuscount"
	"github.com/outbox-dev/outbox/store"
)

// DefaultFullClaimInterval is the default of Config.FullClaimInterval.
const DefaultFullClaimInterval = time.Second

// markSentFailpoint names the crash point inside the mark's transaction
// (internal/e2e/crash_test.go).
const markSentFailpoint = "pgstore-mark-sent-before-commit"

// Claim leases up to p.Limit due messages to p.Owner for p.Lease under a
// new random token, with the guarantees of [store.Queue]: only due messages,
// of each aggregate its head (and with runs the messages right after it),
// never a message another claim holds. It is one round trip and one short
// transaction; no transaction stays open afterwards. Records are in Seq
// order (so each aggregate's in its order); a row whose headers are not a
// JSON object of string values is among them with Invalid set (see
// [store.Queue]). A Limit below 1 claims nothing; a Lease shorter than a
// millisecond is an error, since such a lease would expire at once.
//
// With p.MaxRun above 1 it claims runs: each head comes with its followers,
// the unsent messages of its aggregate right after it in seq order, taken
// in order while each is due, not held by another transaction and within
// p.MaxRunBytes of payload (the head included; the head comes whatever its
// size), at most p.MaxRun - 1 of them. A run never skips a message: it ends
// before the first it cannot take. The heads fill the batch first, as
// without runs; the followers fill the rest of p.Limit rank by rank (every
// head's first follower before any head's second). Every record is under
// the claim's token, and MarkSent, MarkFailed and Release take any subset
// of them. With p.MaxRun 0 or 1 the claim is of heads only.
//
// The claim scans the due messages in seq order from the claim floor (see
// Config.FullClaimInterval).
//
// Claims are claim mode's (and CDC mode's, whose relays may run beside
// claiming ones). On an outbox in cursor mode Claim returns an error
// wrapping [ErrNotClaimMode] and claims nothing: its messages are read by
// the cursor strategy (package relay/cursor). The Store reads the mode before its first claim, and checks
// it every few seconds in the round trip of a claim.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	_, c, err := s.markAndClaim(ctx, uuid.Nil, nil, &p)
	if err != nil {
		return store.Claim{}, fmt.Errorf("pgstore: claim: %w", s.explain(err))
	}
	return c, nil
}

// MarkSentAndClaim marks seqs SENT like [Store.MarkSent] and claims the
// next batch like [Store.Claim], in one transaction and one round trip
// ([store.MarkClaimer]). The claim sees the mark. With no seqs it is Claim.
// On an outbox in cursor mode it marks nothing and returns an error
// wrapping [ErrNotClaimMode], as Claim does; MarkSent still marks.
func (s *Store) MarkSentAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p store.ClaimParams) (int64, store.Claim, error) {
	n, c, err := s.markAndClaim(ctx, token, seqs, &p)
	if err != nil {
		return 0, store.Claim{}, fmt.Errorf("pgstore: mark sent and claim: %w", s.explain(err))
	}
	return n, c, nil
}

// markAndClaim sends one pgx batch: the relay's session settings, the mark
// of seqs (if any), and the claim floor query and the claim (if p is not
// nil), with the check of the mode when it is due. A batch is one round
// trip and runs in one implicit transaction, committed at its end. A claim
// on an outbox known to be in cursor mode is refused before anything is
// sent.
func (s *Store) markAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams) (int64, store.Claim, error) {
	var c store.Claim
	claiming := p != nil
	if claiming {
		if p.Lease < time.Millisecond {
			return 0, c, fmt.Errorf("pgstore: claim: ClaimParams.Lease %v must be at least 1ms", p.Lease)
		}
		if err := s.claimMode(ctx); err != nil {
			return 0, c, err
		}
		claimToken, err := uuid.NewRandom()
		if err != nil {
			return 0, c, fmt.Errorf("new token: %w", err)
		}
		c.Token = claimToken
		claiming = p.Limit >= 1
	}
	marking := len(seqs) > 0
	if !marking && !claiming {
		return 0, c, nil
	}
	pause := marking && failpoint.Enabled && failpoint.Armed(markSentFailpoint)

	b := s.relayBatch()
	var marked int64
	if marking {
		b.Queue(s.q.markSent, seqs, token).Exec(func(tag pgconn.CommandTag) error {
			marked = tag.RowsAffected()
			return nil
		})
		if pause {
			b.Queue(s.q.failpointWatch)
			b.Queue(s.q.failpointPause)
		}
	}
	var scan *claimScan
	if claiming {
		scan = s.queueClaim(ctx, b, p, c.Token, &c.Records)
		defer scan.done()
	}
	// Now and then, whether cursor mode was turned on (EnableCursor): the
	// next claim then refuses.
	checking := claiming && s.modes.checkDue()
	var active bool
	if checking {
		b.Queue(s.q.cursorMode).QueryRow(func(row pgx.Row) error { return row.Scan(&active) })
	}
	br := s.pool.SendBatch(ctx, b)
	if pause {
		// The batch is on the wire: the server runs the UPDATE and then
		// pauses before the commit. A crash test kills the process now.
		failpoint.Announce(markSentFailpoint)
	}
	// The transaction commits at the batch's end: only then do the results
	// count.
	if err := br.Close(); err != nil {
		return 0, store.Claim{}, err
	}
	if claiming {
		s.floor.end(*scan)
	}
	if checking {
		// A claim that finds cursor mode turned on still counts: it
		// claimed table rows, which its token marks as in claim mode.
		s.modes.checked(active)
	}
	return marked, c, nil
}

// queueClaim queues claim mode's claim with token, from the claim floor,
// and the claim floor query, and returns the floor scan to end once the
// batch committed. The claimed records land in recs, in seq order.
func (s *Store) queueClaim(ctx context.Context, b *pgx.Batch, p *store.ClaimParams, token uuid.UUID, recs *[]outbox.Record) *claimScan {
	if s.floor.needsSeed(s.fullClaimInterval()) {
		s.seedFloor(ctx)
	}
	sc := s.floor.begin(s.fullClaimInterval())
	if sc.probe {
		sc.claimDone = make(chan struct{})
		go s.probeBelowFloor(sc)
	}
	s.queueClaimScan(b, p, token, recs, &sc)
	return &sc
}

// queueTableClaim queues the claim of cursor mode's table path with token,
// like queueClaim but from seq 0 and leaving the floor alone: there the
// scanned index holds only the table path's few messages, and its claims,
// once a second, would always run beside the probe below the floor. It
// claims heads only, whatever p.MaxRun: cursor mode does not lease runs.
func (s *Store) queueTableClaim(b *pgx.Batch, p *store.ClaimParams, token uuid.UUID, recs *[]outbox.Record) *claimScan {
	sc := &claimScan{full: true, interval: -1}
	heads := *p
	heads.MaxRun, heads.MaxRunBytes = 0, 0
	s.queueClaimScan(b, &heads, token, recs, sc)
	return sc
}

// queueClaimScan queues the claim floor query and the claim over the due
// messages from sc.from, which fill in sc and recs.
func (s *Store) queueClaimScan(b *pgx.Batch, p *store.ClaimParams, token uuid.UUID, recs *[]outbox.Record, sc *claimScan) {
	b.Queue(s.q.claimFloor, sc.from, noEnd).QueryRow(func(row pgx.Row) error { return row.Scan(&sc.low, &sc.top) })
	start := s.rotation.get()
	sql, args := s.claimStatement(p, token, sc.from, start)
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		var last aggregateKey
		var lastPos int64
		got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (outbox.Record, error) {
			var pos *int64
			rec, err := scanRecordAnd(row, &pos)
			if err == nil && pos != nil && *pos > lastPos {
				last, lastPos = aggregateKey{rec.AggregateType, rec.AggregateID}, *pos
			}
			return rec, err
		})
		if err != nil {
			return err
		}
		if lastPos > 0 {
			s.rotation.advance(start, last)
		}
		sortBySeq(got)
		*recs = got
		sc.claimed, sc.counted = len(got), true
		return nil
	})
}

// claimStatement returns the claim statement for p and its arguments: the
// claim of runs (queries/claim_run.sql) when p.MaxRun is above 1, else the
// claim of heads only (queries/claim.sql). from is where the scan in seq
// order starts, start where the scan by aggregate does.
func (s *Store) claimStatement(p *store.ClaimParams, token uuid.UUID, from int64, start aggregateKey) (string, []any) {
	args := []any{p.Limit, p.Owner, token, p.Lease.Milliseconds(), from,
		claimSpan(p.Limit), start.aggregateType, start.aggregateID}
	if p.MaxRun <= 1 {
		return s.q.claim, args
	}
	return s.q.claimRun, append(args, int64(p.MaxRun), int64(max(p.MaxRunBytes, 0)))
}

// claimSpan is how many seqs past the first due message the claim's scan
// in seq order looks at before the scan by aggregate takes over
// (claim.sql): enough for a claim of limit when the backlog spreads over
// many aggregates, and a bounded walk when it does not.
func claimSpan(limit int) int64 {
	return int64(max(4*limit, 256))
}

// aggregateKey names an aggregate.
type aggregateKey struct{ aggregateType, aggregateID string }

// claimRotation is where the claim's scan by aggregate starts: after the
// last aggregate the previous one claimed from, so that successive claims
// go round the aggregates instead of always serving the first ones in key
// order (claim.sql). It only spreads the work: any start is correct.
type claimRotation struct {
	mu    sync.Mutex
	start aggregateKey // the zero key: from the first aggregate
}

func (r *claimRotation) get() aggregateKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start
}

// advance moves the start to last, the last aggregate a claim that started
// at from claimed from in its scan by aggregate, unless another claim moved
// the start meanwhile.
func (r *claimRotation) advance(from, last aggregateKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.start == from {
		r.start = last
	}
}

func sortBySeq(recs []outbox.Record) {
	slices.SortFunc(recs, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) })
}

// relayBatch returns a batch that starts with the relay's session settings
// (queries/relay_settings.sql); every statement of the relay travels in one,
// so that it runs, and is planned, with them.
func (s *Store) relayBatch() *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(s.q.relaySettings, s.synchronousCommit())
	return b
}

// synchronousCommit is the synchronous_commit of the relay's transactions.
func (s *Store) synchronousCommit() string {
	if s.cfg.SynchronousRelayCommits {
		return "on"
	}
	return "off"
}

func (s *Store) fullClaimInterval() time.Duration {
	if s.cfg.FullClaimInterval == 0 {
		return DefaultFullClaimInterval
	}
	return s.cfg.FullClaimInterval
}

// Get returns the message with the event id, whatever its status. It
// returns an error wrapping [ErrNotFound] when there is none. A row whose
// headers are not a JSON object of string values (written before migration
// 015) is returned with Invalid set and no Headers, not as an error.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (outbox.Record, error) {
	rows, err := s.pool.Query(ctx, s.q.get, id)
	if err != nil {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, s.explain(err))
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanRecord)
	if errors.Is(err, pgx.ErrNoRows) {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, s.explain(err))
	}
	return rec, nil
}

// Counts returns the number of messages in each status. Every status is in
// the map, with 0 when no message has it. It reads the whole table.
func (s *Store) Counts(ctx context.Context) (map[outbox.Status]int64, error) {
	counts := statuscount.Zero()
	rows, err := s.pool.Query(ctx, s.q.counts)
	if err != nil {
		return nil, fmt.Errorf("pgstore: counts: %w", s.explain(err))
	}
	var (
		status string
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		counts[outbox.Status(status)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: counts: %w", s.explain(err))
	}
	return counts, nil
}

// scanRecord scans the columns that claim.sql returns and get.sql selects,
// in that order. A row whose headers are not a JSON object of string values
// is returned with Invalid set and no Headers, not as an error, so that it
// fails no read of the rows beside it (see outbox.Record.Invalid).
func scanRecord(row pgx.CollectableRow) (outbox.Record, error) {
	return scanRecordAnd(row)
}

// scanRecordAnd scans a record followed by the columns extra points to.
func scanRecordAnd(row pgx.CollectableRow, extra ...any) (outbox.Record, error) {
	var (
		r                                            outbox.Record
		id                                           pgtype.UUID // a uuid.UUID would be scanned through a string pgx formats and it parses
		aggregateType, aggregateID, eventType, ctype *string
		eventVersion                                 *int32
		status                                       string
		leaseOwner                                   *string
		leaseExpiresAt, publishedAt                  *time.Time
		headers                                      []byte // the JSON text, decoded by rowheaders
	)
	dest := append([]any{
		&r.Seq, &id, &aggregateType, &aggregateID, &eventType, &eventVersion,
		&r.Topic, &r.Payload, &ctype, &headers, &r.CorrelationID, &r.CausationID,
		&r.TraceParent, &r.CreatedAt, &status, &r.Attempts, &r.NextAttemptAt, &r.LastError,
		&leaseOwner, &leaseExpiresAt, &publishedAt,
	}, extra...)
	err := row.Scan(dest...)
	if err != nil {
		return outbox.Record{}, err
	}
	r.ID = id.Bytes
	r.AggregateType = deref(aggregateType)
	r.AggregateID = deref(aggregateID)
	r.EventType = deref(eventType)
	r.ContentType = deref(ctype)
	if eventVersion != nil {
		r.EventVersion = int(*eventVersion)
	}
	r.Status = outbox.Status(status)
	r.LeaseOwner = deref(leaseOwner)
	if leaseExpiresAt != nil {
		r.LeaseExpiresAt = *leaseExpiresAt
	}
	if publishedAt != nil {
		r.PublishedAt = *publishedAt
	}
	r.Headers, r.Invalid = rowheaders.Decode(headers)
	return r, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
