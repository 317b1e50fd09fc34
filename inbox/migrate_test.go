package inbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

func TestMigrate_IsIdempotentAndSafeWhenRunConcurrently(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	// A schema that does not exist yet: Migrate creates it.
	target := schema + "_ib"
	quoted := pgx.Identifier{target}.Sanitize()
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+quoted+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", target, err)
		}
	})
	ctx := testCtx(t)
	const processes = 4
	errs := make([]error, processes)
	var wg sync.WaitGroup
	for i := range processes {
		wg.Go(func() {
			ib, err := inbox.New(pgtest.Pool(t, schema), inbox.Config{Schema: target})
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = ib.Migrate(ctx)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("concurrent Migrate: %v", err)
		}
	}
	ib, err := inbox.New(pool, inbox.Config{Schema: target})
	if err != nil {
		t.Fatal(err)
	}
	if err := ib.Migrate(ctx); err != nil {
		t.Errorf("Migrate again: %v", err)
	}
	var versions int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+quoted+".inbox_migrations").Scan(&versions); err != nil || versions != 1 {
		t.Errorf("inbox_migrations has %d rows (%v), want 1", versions, err)
	}
	if _, err := ib.Handle(ctx, "billing", msg(), nopHandler); err != nil {
		t.Errorf("Handle on the migrated schema: %v", err)
	}
}

func TestNew_RejectsBadConfigNamingTheField(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t)
	for _, c := range []struct {
		cfg   inbox.Config
		field string
	}{
		{inbox.Config{Schema: "Inbox"}, "Schema"},
		{inbox.Config{Schema: "in-box"}, "Schema"},
		{inbox.Config{Schema: `x"; DROP TABLE y; --`}, "Schema"},
		{inbox.Config{Schema: "pg_inbox"}, "Schema"},
		{inbox.Config{Schema: strings.Repeat("a", 64)}, "Schema"},
		{inbox.Config{Retention: -time.Hour}, "Retention"},
		{inbox.Config{Retention: time.Millisecond}, "Retention"},
		{inbox.Config{CleanupBatchSize: -1}, "CleanupBatchSize"},
	} {
		_, err := inbox.New(pool, c.cfg)
		if !errors.Is(err, inbox.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New(%+v) error = %v, want ErrInvalidConfig naming %s", c.cfg, err, c.field)
		}
	}
	if _, err := inbox.New(nil, inbox.Config{}); err == nil {
		t.Error("New(nil pool) succeeded")
	}
	ib, err := inbox.New(pool, inbox.Config{})
	if err != nil {
		t.Fatalf("New(zero Config): %v", err)
	}
	if ib.Schema() != "inbox" {
		t.Errorf("default schema %q, want inbox", ib.Schema())
	}
}
