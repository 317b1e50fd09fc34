package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// historyChunk is the number of rows per statement when the claim phase
// loads or marks its history.
const historyChunk = 100_000

// claimTable is how a claim scenario prepares its table.
type claimTable int

const (
	// tableEmpty holds only the claimable rows, with fresh statistics.
	tableEmpty claimTable = iota
	// tableHistory also holds HistoryRows rows inserted as SENT.
	tableHistory
	// tableJustMarked also holds HistoryRows rows inserted PENDING,
	// analyzed, and then marked SENT: their dead tuples are still in the
	// table and its indexes, and the statistics are from before the mark.
	tableJustMarked
	// tableStaleStats was analyzed while empty; then a backlog of Backlog
	// messages arrived (as after a broker outage), before the next ANALYZE.
	tableStaleStats
)

// runClaim times cfg.Claims consecutive claims of Relay.BatchSize in four
// tables (see claimTable) and compares each with the empty table.
func (r *runner) runClaim(ctx context.Context, rep *Report) error {
	cr := &ClaimReport{BatchSize: r.cfg.Relay.BatchSize}
	for _, sc := range []struct {
		tag   string
		table claimTable
		dst   *ClaimTimes
		what  string
	}{
		{"claim_empty", tableEmpty, &cr.Empty, "empty table"},
		{"claim_history", tableHistory, &cr.History, "table with history"},
		{"claim_marked", tableJustMarked, &cr.JustMarked, "table right after a mass mark"},
		{"claim_stale", tableStaleStats, &cr.StaleStats, "backlog with statistics of an empty table"},
	} {
		ct, err := r.claimScenario(ctx, sc.tag, sc.table)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.what, err)
		}
		*sc.dst = ct
		if ct.CheckpointError != "" {
			rep.Notes = append(rep.Notes, fmt.Sprintf("claim: no CHECKPOINT after loading the %s (%s): its claims ran beside the checkpoints the load set off", sc.what, ct.CheckpointError))
		}
	}
	cr.HistoryP99Ratio = ratio(cr.History.P99Ms, cr.Empty.P99Ms)
	cr.JustMarkedP99Ratio = ratio(cr.JustMarked.P99Ms, cr.Empty.P99Ms)
	cr.JustMarkedFirstToFirstRatio = ratio(cr.JustMarked.FirstMs, cr.Empty.FirstMs)
	cr.StaleStatsP99Ratio = ratio(cr.StaleStats.P99Ms, cr.Empty.P99Ms)
	cr.StaleStatsFirstToFirstRatio = ratio(cr.StaleStats.FirstMs, cr.Empty.FirstMs)
	rep.Claim = cr
	return nil
}

// claimScenario prepares a table and times the claims, each followed by an
// untimed MarkSent as the relay would do. Autovacuum is off for the table
// in every scenario. The claimable rows come last (highest seq), one per
// aggregate, so that every claim is full.
func (r *runner) claimScenario(ctx context.Context, tag string, table claimTable) (ClaimTimes, error) {
	history, pending := 0, r.cfg.Claims*r.cfg.Relay.BatchSize
	switch table {
	case tableHistory, tableJustMarked:
		history = r.cfg.HistoryRows
	case tableStaleStats:
		pending = max(pending, r.cfg.Backlog)
	}
	ct := ClaimTimes{HistoryRows: history, Claimable: pending, Claims: r.cfg.Claims}
	s, err := r.newScenario(ctx, tag, 2)
	if err != nil {
		return ct, err
	}
	defer s.close()
	if _, err := s.exec(ctx, "no_autovacuum.sql"); err != nil {
		return ct, err
	}
	// The timed claims run on a pool of two connections (one for the
	// claims, one for the store's probe below its claim floor, which runs
	// beside them), whose statements are prepared by claims on the still
	// empty table, so that no timed claim pays for preparing or connecting.
	// It is tuned as the relay's pool is (pgstore.ConfigureRelayPool): no
	// ping before a claim on a connection idle during the load.
	tp, err := r.newPool(ctx, tag+" claims", 2, pgstore.ConfigureRelayPool)
	if err != nil {
		return ct, err
	}
	defer tp.Close()
	p := store.ClaimParams{Owner: "bench-claim", Limit: r.cfg.Relay.BatchSize, Lease: r.cfg.Relay.Lease}
	if err := r.warmClaims(ctx, tp, s.schema, p); err != nil {
		return ct, err
	}

	loadStart := time.Now()
	if table == tableStaleStats {
		if err := s.analyze(ctx); err != nil {
			return ct, err
		}
	}
	if err := r.loadHistory(ctx, s, tag, table, history); err != nil {
		return ct, err
	}
	if err := s.loadBacklog(ctx, pending, pending, tag); err != nil {
		return ct, err
	}
	if table == tableEmpty || table == tableHistory {
		if err := s.analyze(ctx); err != nil {
			return ct, err
		}
	}
	ct.LoadSeconds = time.Since(loadStart).Seconds()
	cpStart := time.Now()
	if _, err := s.exec(ctx, "checkpoint.sql"); err != nil {
		ct.CheckpointError = err.Error()
		r.prog.printf("%s: no checkpoint before the claims: %v", tag, err)
	} else {
		ct.CheckpointSeconds = time.Since(cpStart).Seconds()
	}

	// The claims are those of a relay started now on this table: a new
	// Store, which knows no claim floor yet (pgx's statement cache is per
	// connection, so the statements stay prepared).
	st, err := r.newStore(tp, s.schema)
	if err != nil {
		return ct, err
	}
	ts := r.relayQueue(st)

	times, err := r.timeClaims(ctx, ts, p, tag)
	if err != nil {
		return ct, err
	}
	ct.FirstMs = ms(times[0])
	lat := latencyOf(times)
	ct.P50Ms, ct.P99Ms, ct.MaxMs = lat.P50Ms, lat.P99Ms, lat.MaxMs
	return ct, nil
}

// loadHistory loads history rows (none when history is 0) into s's table
// as table needs them: SENT, or in cursor mode QUEUED rows the cursor
// passed; for tableJustMarked PENDING rows then marked SENT at once.
func (r *runner) loadHistory(ctx context.Context, s *scenario, tag string, table claimTable, history int) error {
	if history == 0 {
		return nil
	}
	status := "SENT"
	switch {
	case r.cfg.Cursor:
		// Sent history in cursor mode: QUEUED rows the cursor passed.
		status = "QUEUED"
	case table == tableJustMarked:
		status = "PENDING"
	}
	payload := r.message([16]byte{}, "history").Payload
	for from := 1; from <= history; from += historyChunk {
		to := min(from+historyChunk-1, history)
		if _, err := s.exec(ctx, "load_rows.sql", from, to, status, r.cfg.Topic, payload); err != nil {
			return err
		}
		r.prog.printf("%s: loaded %d of %d history rows as %s", tag, to, history, status)
	}
	if err := s.analyze(ctx); err != nil {
		return err
	}
	switch {
	case r.cfg.Cursor:
		// "Just marked" in cursor mode: the position moved past the
		// history in one statement, which leaves no dead row versions.
		if _, err := s.exec(ctx, "cursor_pass.sql"); err != nil {
			return err
		}
	case table == tableJustMarked:
		if err := r.markAll(ctx, s, tag); err != nil {
			return err
		}
	}
	return nil
}

// timeClaims times r.cfg.Claims claims from q, marking each batch sent
// before the next claim, and returns the claims' times.
func (r *runner) timeClaims(ctx context.Context, q queue, p store.ClaimParams, tag string) ([]time.Duration, error) {
	times := make([]time.Duration, 0, r.cfg.Claims)
	seqs := make([]int64, 0, r.cfg.Relay.BatchSize)
	for i := range r.cfg.Claims {
		t0 := time.Now()
		c, err := q.Claim(ctx, p)
		d := time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("claim %d: %w", i+1, err)
		}
		if len(c.Records) == 0 {
			return nil, fmt.Errorf("claim %d of %d found nothing to claim", i+1, r.cfg.Claims)
		}
		times = append(times, d)
		seqs = seqs[:0]
		for _, rec := range c.Records {
			seqs = append(seqs, rec.Seq)
		}
		if _, err := q.MarkSent(ctx, c.Token, seqs); err != nil {
			return nil, fmt.Errorf("mark after claim %d: %w", i+1, err)
		}
		if i%20 == 0 {
			r.prog.printf("%s: claim %d of %d took %.1f ms", tag, i+1, r.cfg.Claims, ms(d))
		}
	}
	return times, nil
}

// warmClaims prepares the relay's statements on both connections of pool
// with a claim on each (the table is empty: they claim nothing).
func (r *runner) warmClaims(ctx context.Context, pool *pgxpool.Pool, schema string, p store.ClaimParams) error {
	st, err := r.newStore(pool, schema)
	if err != nil {
		return err
	}
	ws := r.relayQueue(st)
	held, err := pool.Acquire(ctx) // the claim runs on the other connection
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	_, _, err = ws.MarkSentAndClaim(ctx, uuid.New(), []int64{0}, p)
	if err == nil {
		var other *pgxpool.Conn
		if other, err = pool.Acquire(ctx); err == nil {
			held.Release()
			held = other
			_, _, err = ws.MarkSentAndClaim(ctx, uuid.New(), []int64{0}, p)
		}
	}
	held.Release()
	if err != nil {
		return fmt.Errorf("warm-up claim: %w", err)
	}
	// In cursor mode the warm-up Cursor led: let the timed one lead at
	// once.
	if err := resign(ctx, ws); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// markAll marks every PENDING row SENT, historyChunk rows per statement.
func (r *runner) markAll(ctx context.Context, s *scenario, tag string) error {
	var lo, hi int64
	if err := s.pool.QueryRow(ctx, s.sql("seq_range.sql")).Scan(&lo, &hi); err != nil {
		return fmt.Errorf("seq range: %w", err)
	}
	for from := lo; from <= hi; from += historyChunk {
		if _, err := s.exec(ctx, "mark_range.sql", from, from+historyChunk); err != nil {
			return err
		}
		r.prog.printf("%s: marked SENT up to seq %d of %d", tag, min(from+historyChunk-1, hi), hi)
	}
	return nil
}
