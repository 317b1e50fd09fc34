package cursor

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// markAndClaim is trip, after the mode check of a claim (p not nil).
func (s *Strategy) markAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams) (int64, store.Claim, error) {
	if p != nil {
		s.cs.claimed.Store(time.Now().UnixNano())
		m, err := s.detectMode(ctx, p)
		if err != nil {
			return 0, store.Claim{}, err
		}
		if m != modeCursor {
			return 0, store.Claim{}, fmt.Errorf("%w: the outbox in schema %s is not in cursor mode: its messages are "+
				"claimed from the table (Store.Claim); run the claim strategy (package relay/modes, which runs the outbox's recorded mode as "+
				"'outbox relay' does, or relay/claim), or switch the outbox with 'outbox mode set cursor'", pgstore.ErrNotCursorMode, s.set.Schema)
		}
	}
	return s.trip(ctx, token, seqs, p)
}

// trip is a Strategy's marks and claims: the marks of seqs under token (in
// memory for cursor messages, in the table for table-path ones) and, if p
// is not nil, a claim: cursor messages from the leader's window (after a
// read if it holds too few) and due table-path messages (every
// FullClaimInterval), in one round trip with whatever the cursor needs to
// write (its position and lease, messages moving to the table path).
func (s *Strategy) trip(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams) (int64, store.Claim, error) {
	var cl store.Claim
	if p != nil {
		if p.Lease < time.Millisecond {
			return 0, cl, fmt.Errorf("ClaimParams.Lease %v must be at least 1ms", p.Lease)
		}
		var err error
		if cl.Token, err = uuid.NewRandom(); err != nil {
			return 0, cl, fmt.Errorf("new token: %w", err)
		}
	}
	cs := &s.cs
	if p == nil {
		// A mark alone: cursor messages are acknowledged in memory, without
		// waiting for a round trip another claim may have under way.
		cs.mu.Lock()
		var marked int64
		s.checkLease(time.Now())
		if cs.leader {
			marked = cs.win.ack(token, seqs)
		}
		done := !cs.holdsTable(token) && (!cs.leader || s.set.SaveInterval >= 0)
		cs.mu.Unlock()
		if done {
			return marked, cl, nil
		}
		// Table-path messages to mark, or a save with every mark: a round
		// trip (which finds the cursor messages acknowledged already).
		cs.db.Lock()
		defer cs.db.Unlock()
		n, cl, _, err := s.roundTrip(ctx, token, seqs, p, cl)
		return marked + n, cl, err
	}
	cs.db.Lock()
	defer cs.db.Unlock()
	marked, cl, won, err := s.roundTrip(ctx, token, seqs, p, cl)
	if err == nil && won {
		// Just became the leader: read at once rather than at the next
		// claim.
		_, cl, _, err = s.roundTrip(ctx, uuid.Nil, nil, p, cl)
	}
	return marked, cl, err
}

// roundTrip is one round trip of trip; it reports whether the Strategy
// became the leader in it. cs.db is held.
func (s *Strategy) roundTrip(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams, cl store.Claim) (int64, store.Claim, bool, error) {
	plan := s.planTrip(token, seqs, p, time.Now())
	return s.runPlan(ctx, &plan, p, cl)
}

// runPlan sends what plan holds, if anything, in one round trip
// ([pgstore.CursorDB.Trip]) and takes its result into the Strategy's
// state, as roundTrip. What the leader writes is fenced by the lead's
// token when planned, in the database, whatever the Strategy learnt since
// it planned. cs.db is held.
func (s *Strategy) runPlan(ctx context.Context, plan *tripPlan, p *store.ClaimParams, cl store.Claim) (int64, store.Claim, bool, error) {
	if !plan.trip.Sends() {
		// Nothing to send: the marks were in memory, and the window holds
		// enough for the claim.
		cs := &s.cs
		cs.mu.Lock()
		defer cs.mu.Unlock()
		marked := cs.ackLeading(plan.trip.LeaderToken, plan.token, plan.seqs)
		return marked, s.handOut(cl, p, plan.trip.LeaderToken, nil), false, nil
	}
	plan.trip.ClaimToken = cl.Token
	r, err := s.db.Trip(ctx, &plan.trip)
	if err != nil {
		// Nothing of the round trip counts, not even the marks of cursor
		// messages (a caller treats the batch as not marked and marks it
		// again). A lost reply may hide a committed save or takeover; the
		// lease then simply runs out.
		return 0, cl, false, err
	}
	marked, cl, won := s.apply(plan, &r, p, cl)
	return marked, cl, won, nil
}

// apply takes what a committed round trip returned into the Strategy's
// state and fills claim cl. It returns how many messages were marked and
// whether the Strategy became the leader. It takes cs.mu.
func (s *Strategy) apply(plan *tripPlan, r *pgstore.CursorTripResult, p *store.ClaimParams, cl store.Claim) (int64, store.Claim, bool) {
	cs := &s.cs
	cs.mu.Lock()
	defer cs.mu.Unlock()
	leaderTok := plan.trip.LeaderToken
	// The marks of cursor messages count once the round trip did: then the
	// read below may hand out the next message of their aggregates.
	marked := r.Marked + cs.ackLeading(leaderTok, plan.token, plan.seqs)
	s.applyTablePath(plan, r)
	if plan.trip.Save != nil && !s.applySave(plan, r) {
		return marked, s.handOut(cl, p, uuid.Nil, r.Claimed), false
	}
	if plan.trip.Read != nil && cs.leader && cs.token == leaderTok {
		// The read came first in the round trip, before the save moved
		// the tabling records to the table path, so its blocked flags do
		// not know of that move. Applied while those records are still in
		// the window (as on their way to the table path), a later message
		// of their aggregates that the read found follows them there.
		// Applied after tabled, it would stay a cursor message and be
		// published before them (chaos --cursor --seed 12).
		cs.win.apply(r.Read)
	}
	if len(plan.trip.Table) > 0 && cs.leader && cs.token == leaderTok {
		// A lead dropped meanwhile (checkLease, on another goroutine) took
		// its window with it: nothing is left to update.
		cs.win.tabled(plan.trip.Table)
	}
	won := plan.trip.Lead != nil && s.applyLeadAttempt(plan.trip.Lead.Token, p.Owner, r.Lead, r.Sent)
	return marked, s.handOut(cl, p, cs.token, r.Claimed), won
}

// applyTablePath takes the table path's part of a committed round trip:
// its claim, and its marks, after which the next message of each marked
// message's aggregate is the head. cs.mu is held.
func (s *Strategy) applyTablePath(plan *tripPlan, r *pgstore.CursorTripResult) {
	cs := &s.cs
	if plan.trip.Claim != nil {
		cs.lastTable = r.Sent
		cs.tableMore = len(r.Claimed) > 0
	}
	if len(plan.trip.MarkSeqs) > 0 {
		// Marking table-path messages sent makes the next message of each
		// of their aggregates the head: claim again at once. (A claim of
		// the table path that found nothing meanwhile, because those
		// messages were still in flight, must not hold it back for a
		// FullClaimInterval.)
		cs.tableMore = true
	}
}

// applySave takes the result of a committed save: the saved position and
// the renewed lease, or, when the save changed no row because another
// relay took the lease over, the end of the lead. It reports whether the
// Strategy still leads. cs.mu is held.
func (s *Strategy) applySave(plan *tripPlan, r *pgstore.CursorTripResult) bool {
	cs := &s.cs
	if !r.Saved {
		s.set.Logger.Warn("cursor: lease taken over; no longer leading", slog.String("schema", s.set.Schema))
		cs.dropLead()
		return false
	}
	cs.saved = max(cs.saved, plan.save.Pos)
	cs.savedAt = r.Sent
	cs.savedHandled = plan.save.handled
	cs.leaseUntil = r.Sent.Add(cs.lease)
	return true
}

// handOut fills claim cl (p nil: no claim) with the table-path messages
// claimed and as many cursor messages as fit: the eligible ones, each with
// its run when p.MaxRun is above 1 (cursorWindow.handOut). It remembers
// which claims hold table-path messages. cs.mu is held.
func (s *Strategy) handOut(cl store.Claim, p *store.ClaimParams, leaderTok uuid.UUID, tableRecs []outbox.Record) store.Claim {
	cs := &s.cs
	if p == nil || p.Limit < 1 {
		return cl
	}
	recs := cl.Records // from an earlier round trip of the same claim
	for _, r := range tableRecs {
		if cs.leader && cs.win.holds(r.AggregateType, r.AggregateID) {
			// An earlier message of the aggregate is still the leader's to
			// publish. It should not happen (the table path is entered
			// only behind a failure); if it does, the lease of this claim
			// runs out and a later claim takes it in order.
			s.set.Logger.Warn("cursor: table-path message held back behind a cursor message of its aggregate",
				slog.Int64("seq", r.Seq), slog.String("aggregate_id", r.AggregateID))
			continue
		}
		recs = append(recs, r)
	}
	if len(tableRecs) > 0 {
		cs.rememberTableClaim(cl.Token, time.Now().Add(p.Lease))
	}
	if cs.leader && cs.token == leaderTok && len(recs) < p.Limit {
		l := claimLimitsOf(p)
		l.limit -= len(recs)
		recs = append(recs, cs.win.handOut(l, cl.Token, p.Owner, time.Now().Add(p.Lease))...)
	}
	slices.SortFunc(recs, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	cl.Records = recs
	return cl
}
