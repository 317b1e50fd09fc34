package pgstore_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A move to the table path is fenced by the save before it: CursorDB
// refuses a trip, or a record of failures, that would move records
// without that save.
func TestCursorDB_RefusesAMoveWithoutTheSaveThatFencesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.Store.CursorDB()
	ctx := pgstoretest.Context(t)
	_, err := db.Trip(ctx, &pgstore.CursorTrip{LeaderToken: uuid.New(), Table: []int64{1}})
	if !errors.Is(err, pgstore.ErrInvalidConfig) {
		t.Errorf("Trip with Table and no Save = %v; want ErrInvalidConfig", err)
	}
	_, err = db.MarkFailed(ctx, &pgstore.CursorFailure{Token: uuid.New(), LeaderToken: uuid.New(), Behind: []int64{1}})
	if !errors.Is(err, pgstore.ErrInvalidConfig) {
		t.Errorf("MarkFailed with Behind and no Queued = %v; want ErrInvalidConfig", err)
	}
}
