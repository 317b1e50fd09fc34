package cursor_test

import (
	"testing"

	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/storetest"
)

// TestConformanceCursor runs the suite every store must pass on the cursor
// strategy's Queue, on an outbox in cursor mode (EnableCursor): it leads
// the cursor and claims from its window.
func TestConformanceCursor(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		// Saving the position with every mark, so that Get shows a sent
		// message SENT at once.
		h := pgstoretest.SetupCursor(t, pgstore.Config{CursorSaveInterval: -1}).Harness()
		h.ClaimsInMemory = true
		return h
	})
}
