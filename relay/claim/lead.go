package claim

import (
	"context"

	"github.com/outbox-dev/outbox/store"
)

// markOnly reports whether the queue records MarkSent without a round trip
// now (store.MemoryMarker: pgstore while it leads in cursor mode). MarkSent
// then marks alone, and the relay claims the next batch after the batch's
// Hooks.Published: combining them would save nothing.
func (s *Strategy) markOnly() bool {
	mm, ok := s.q.(store.MemoryMarker)
	return ok && mm.MarksInMemory()
}

// Close ends the strategy when the relay stops, after its last mark. A
// queue in which one relay at a time leads (store.Resigner: pgstore in
// cursor mode) resigns, so that another relay leads at once; for any other
// queue it does nothing and returns nil.
func (s *Strategy) Close(ctx context.Context) error {
	if rs, ok := s.q.(store.Resigner); ok {
		return rs.Resign(ctx)
	}
	return nil
}
