package bench

import (
	"context"

	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// queue is what a relay of the bench claims from: a Store, or the cursor
// strategy's Queue.
type queue interface {
	store.Queue
	store.MarkClaimer
}

// relayQueue returns what one relay of the bench claims from on st: in
// cursor mode the Queue of a cursor strategy on st, else st.
func (r *runner) relayQueue(st *pgstore.Store) queue {
	if r.cfg.Cursor {
		return cursor.New(st).Queue()
	}
	return st
}

// resign ends q's lead when q is a cursor strategy's Queue, as a relay
// does when it stops, so that the next relay leads at once; on a Store it
// does nothing.
func resign(ctx context.Context, q store.Queue) error {
	if c, ok := q.(*cursor.Queue); ok {
		return c.Resign(ctx)
	}
	return nil
}
