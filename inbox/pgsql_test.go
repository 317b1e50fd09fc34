package inbox_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/outbox-dev/outbox/inbox"
)

// The behaviour suite runs on Inbox.SQL as "postgres-sql"; these tests
// cover what is particular to it.

func TestSQL_SharesTheRecordsOfThePgxInbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := msg()
	if res, err := b.inbox.Handle(testCtx(t), "billing", m, b.applyEffect); err != nil || res != inbox.Processed {
		t.Fatalf("Inbox.Handle = %v, %v; want processed", res, err)
	}
	var ran bool
	res, err := b.inbox.SQL().Handle(testCtx(t), "billing", m, func(context.Context, *sql.Tx, inbox.Message) error {
		ran = true
		return nil
	})
	if err != nil || res != inbox.Duplicate || ran {
		t.Fatalf("SQLInbox.Handle of a message the pgx face applied = %v, %v (handler ran: %v); want duplicate, not run",
			res, err, ran)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

func TestSQL_ReturnsOneFaceWhoseDBReachesTheInboxDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.inbox.SQL()
	if b.inbox.SQL() != s {
		t.Error("SQL returned a different face on the second call")
	}
	var n int
	if err := s.DB().QueryRowContext(testCtx(t), b.sql("SELECT count(*) FROM {{schema}}.inbox_processed")).Scan(&n); err != nil {
		t.Fatalf("query through DB: %v", err)
	}
}
