package consumer_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// A consumer on SQLite, through Config.Applier: the broker delivers every
// record twice (the relay published each event twice), on two partitions,
// plus one record without an eventId. Each event is applied exactly once in
// the SQLite database, the copies are reported as duplicates, and the
// malformed record is parked in the SQLite inbox.
func TestRunner_SQLiteInbox_EachRecordDeliveredTwice_IsAppliedOnce(t *testing.T) {
	t.Parallel()
	e := setupBroker(t, 2)
	ctx := testCtx(t)
	db, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "billing.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ib, err := inbox.NewSQLite(db, inbox.SQLiteConfig{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ib.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE effects (
		n INTEGER PRIMARY KEY, message_id TEXT NOT NULL, aggregate TEXT NOT NULL, seq INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	apply := func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		var p payload
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return fmt.Errorf("payload: %v: %w", err, inbox.ErrPermanent)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (message_id, aggregate, seq) VALUES (?, ?, ?)",
			m.ID.String(), m.AggregateID, p.Seq)
		return err
	}

	const events = 60
	var recs, originals []*kgo.Record
	for i := range events {
		r := event(int32(i%2), fmt.Sprint("o-", i%7), i)
		again := event(r.Partition, string(r.Key), i)
		again.Headers = r.Headers // the same event, published again
		recs = append(recs, r, again)
		originals = append(originals, r)
	}
	malformed := event(0, "o-x", 0)
	malformed.Headers = malformed.Headers[1:] // no eventId
	recs = append(recs, malformed)
	e.produce(t, recs...)

	rec := newRecorder()
	e.start(t, consumer.Config{Group: "billing", Applier: ib.Bind(apply), Hooks: rec.hooks()})
	waitFor(t, "every delivery handled or parked", func() bool {
		return rec.handled(0) == 2*events && rec.parkedCount() == 1
	})

	if p, d := rec.handled(inbox.Processed), rec.handled(inbox.Duplicate); p != events || d != events {
		t.Errorf("%d processed, %d duplicates; want %d of each", p, d, events)
	}
	for _, r := range originals {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM effects WHERE message_id = ?", idOf(r).String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("event %s has %d effects, want 1", idOf(r), n)
		}
	}
	parked, err := ib.Parked(ctx, inbox.ParkedFilter{Consumer: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 1 || parked[0].Message.ID != uuid.Nil || parked[0].Message.AggregateID != "o-x" {
		t.Errorf("parked in SQLite: %+v, want the record without eventId", parked)
	}
}

func TestNew_TakesEitherApplierOrInboxAndHandler(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	pgHandler := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	base := consumer.Config{Brokers: e.broker.Addrs(), Group: "g", Topics: []string{topic}}
	for _, c := range []struct {
		name   string
		mutate func(*consumer.Config)
		field  string // "" when the config is valid
	}{
		{"Inbox and Handler", func(c *consumer.Config) { c.Inbox, c.Handler = e.inbox, pgHandler }, ""},
		{"Applier", func(c *consumer.Config) { c.Applier = e.inbox.Bind(pgHandler) }, ""},
		{"nothing", func(c *consumer.Config) {}, "Applier"},
		{"Applier and Inbox", func(c *consumer.Config) { c.Applier, c.Inbox = e.inbox.Bind(pgHandler), e.inbox }, "Applier"},
		{"Applier and Handler", func(c *consumer.Config) { c.Applier, c.Handler = e.inbox.Bind(pgHandler), pgHandler }, "Applier"},
		{"Inbox alone", func(c *consumer.Config) { c.Inbox = e.inbox }, "Handler"},
		{"Handler alone", func(c *consumer.Config) { c.Handler = pgHandler }, "Inbox"},
	} {
		cfg := base
		c.mutate(&cfg)
		_, err := consumer.New(cfg)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: New = %v, want it accepted", c.name, err)
		case c.field != "" && (!errors.Is(err, consumer.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field)):
			t.Errorf("%s: New = %v, want ErrInvalidConfig naming %s", c.name, err, c.field)
		}
	}
}
