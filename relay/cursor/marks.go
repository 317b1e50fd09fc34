package cursor

import (
	"context"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// markFailed is MarkFailed: failures of cursor messages move them (and the
// later messages of their aggregates) to the table path; failures of
// table-path messages are recorded as in claim mode. One round trip
// ([pgstore.CursorDB.MarkFailed]).
func (s *Strategy) markFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	cs := &s.cs
	cs.db.Lock()
	defer cs.db.Unlock()

	cs.mu.Lock()
	f := pgstore.CursorFailure{Token: token, Failures: failures, LeaderToken: cs.token}
	var save saveArgs
	if cs.leader {
		seqs := make([]int64, len(failures))
		for i, x := range failures {
			seqs[i] = x.Seq
		}
		f.Queued, f.Behind = cs.win.failing(token, seqs)
		save = cs.win.saveArgs()
		save.Lease = cs.lease
		f.Save = save.CursorSave
	}
	table := cs.holdsTable(token)
	cs.mu.Unlock()
	if len(f.Queued) == 0 && !table {
		return 0, nil
	}

	r, err := s.db.MarkFailed(ctx, &f)
	if err != nil {
		return 0, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(f.Queued) > 0 {
		if !r.Saved {
			cs.dropLead()
			return r.Changed, nil
		}
		cs.saved, cs.savedAt, cs.leaseUntil = max(cs.saved, save.Pos), r.Sent, r.Sent.Add(cs.lease)
		cs.savedHandled = save.handled
		if cs.leader && cs.token == f.LeaderToken {
			cs.win.failed(token, f.Queued, f.Behind)
		}
	}
	// The failed messages are the table path's now, maybe due at once.
	cs.tableMore = true
	return r.Changed, nil
}

// release is Release: cursor messages go back to the leader's window,
// table-path ones to the table.
func (s *Strategy) release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	cs := &s.cs
	cs.mu.Lock()
	var n int64
	if cs.leader {
		n = cs.win.release(token, seqs)
	}
	table := cs.holdsTable(token)
	cs.mu.Unlock()
	if !table {
		return n, nil
	}
	m, err := s.db.Release(ctx, token, seqs)
	cs.mu.Lock()
	cs.tableMore = true // due at once
	cs.mu.Unlock()
	return n + m, err
}
