package cursor

import (
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// tripPlan is what one round trip of trip sends, decided from the
// Strategy's state before it is sent (planTrip).
type tripPlan struct {
	// trip is what the database side sends; its LeaderToken is the lead's
	// token when planned.
	trip  pgstore.CursorTrip
	token uuid.UUID // the claim whose seqs are marked
	seqs  []int64   // the seqs to mark (cursor messages: in memory)
	save  saveArgs  // the save, when trip.Save is set
}

// planTrip decides what a round trip of trip sends: the marks of table-path
// messages under token; with a claim (p.Limit at least 1), a read of the
// leader's window or a standby's attempt to lead, and the table path's
// claim when due; and the leader's save when due. It takes cs.mu.
func (s *Strategy) planTrip(token uuid.UUID, seqs []int64, p *store.ClaimParams, now time.Time) tripPlan {
	cs := &s.cs
	cs.mu.Lock()
	defer cs.mu.Unlock()
	plan := tripPlan{token: token, seqs: seqs}
	plan.trip.LeaderToken = cs.token
	if p != nil {
		cs.lease = s.set.LeaderLease
	}
	if cs.owner == "" && p != nil {
		cs.owner = p.Owner
	}
	s.checkLease(now)
	if cs.holdsTable(token) {
		// Table-path messages were claimed under token: mark seqs in the
		// table too.
		plan.trip.MarkToken, plan.trip.MarkSeqs = token, seqs
	}
	if p != nil && p.Limit >= 1 {
		if cs.leader {
			s.planRead(&plan, claimLimitsOf(p), now)
		} else if now.Sub(cs.checkedAt) >= s.standbyInterval() {
			plan.trip.Lead = &pgstore.CursorLeadAttempt{Owner: p.Owner, Token: uuid.New(), Lease: cs.lease}
			cs.checkedAt = now
		}
		if cs.tableMore || now.Sub(cs.lastTable) >= s.set.FullClaimInterval {
			plan.trip.Claim = p
		}
	}
	if cs.leader {
		s.planSave(&plan, now)
	}
	return plan
}

// planRead plans the leader's read when its window holds fewer eligible
// records than a claim within l: above the head only while the window has
// room, the gaps in any case, so that they can close. cs.mu is held.
func (s *Strategy) planRead(plan *tripPlan, l claimLimits, now time.Time) {
	w := s.cs.win
	w.expire(now)
	if w.eligible(l) >= l.limit {
		return
	}
	headLimit := 0
	if w.open() < s.set.ReadAhead && len(w.gaps) < cursorMaxGaps {
		headLimit = l.limit
	}
	if headLimit == 0 && len(w.gaps) == 0 {
		return
	}
	lo, hi := w.gapRanges()
	plan.trip.Read = &pgstore.CursorReadRequest{From: w.head, HeadLimit: headLimit, GapLo: lo, GapHi: hi, GapLimit: 4 * l.limit}
}

// planSave plans the leader's save of its position, which also renews its
// lease. A save is due when records of the window move to the table path,
// when less than two thirds of the lease remain, or when the position
// moved or anything was handled since the last save and
// Config.CursorSaveInterval has passed since it (a negative interval: at
// once). cs.mu is held.
func (s *Strategy) planSave(plan *tripPlan, now time.Time) {
	cs := &s.cs
	plan.trip.Table = cs.win.tablingSeqs()
	due := len(plan.trip.Table) > 0 || cs.leaseUntil.Sub(now) < cs.lease*2/3 ||
		((cs.win.pos > cs.saved || cs.win.handled != cs.savedHandled) &&
			(s.set.SaveInterval < 0 || now.Sub(cs.savedAt) >= s.set.SaveInterval))
	if due {
		plan.save = cs.win.saveArgs()
		plan.save.Lease = cs.lease
		save := plan.save.CursorSave
		plan.trip.Save = &save
	}
}
