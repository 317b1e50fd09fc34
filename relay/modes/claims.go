package modes

import (
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
)

// keepAfterLease is how long a claim's owner is remembered after its lease
// ended: a mark that late changes nothing, wherever it goes.
const keepAfterLease = time.Minute

// claimBook remembers which strategy made each claim that holds messages,
// until a while after its lease ended.
type claimBook struct {
	mu       sync.Mutex
	owners   map[uuid.UUID]held
	pruned   int       // the book's size after the last prune
	prunedAt time.Time // when it was pruned last
}

type held struct {
	by    strategy.Strategy
	until time.Time
}

// add records that by made c, leased for lease.
func (b *claimBook) add(c store.Claim, by strategy.Strategy, lease time.Duration) {
	if len(c.Records) == 0 {
		return
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.owners == nil {
		b.owners = map[uuid.UUID]held{}
	}
	b.owners[c.Token] = held{by: by, until: now.Add(lease + keepAfterLease)}
	if len(b.owners) > 2*max(b.pruned, 512) || now.Sub(b.prunedAt) > keepAfterLease {
		b.prune(now)
	}
}

// prune forgets the claims whose time is over: when the book doubled
// since the last prune, or a while after it. b.mu is held.
func (b *claimBook) prune(now time.Time) {
	for t, h := range b.owners {
		if now.After(h.until) {
			delete(b.owners, t)
		}
	}
	b.pruned, b.prunedAt = len(b.owners), now
}

// madeBy returns the strategy that made claim token, or nil.
func (b *claimBook) madeBy(token uuid.UUID) strategy.Strategy {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owners[token].by
}
