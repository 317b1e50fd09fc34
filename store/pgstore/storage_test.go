package pgstore_test

import (
	"slices"
	"testing"

	"github.com/outbox-dev/outbox/internal/pgstoretest"
)

// Migration 009: the hot table carries the storage settings that keep
// autovacuum and ANALYZE up with it.
func TestMigrate_SetsHotTableStorage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var opts []string
	err := b.Pool.QueryRow(pgstoretest.Context(t), "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass",
		b.Schema+".outbox_messages").Scan(&opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"fillfactor=90",
		"autovacuum_vacuum_threshold=10000", "autovacuum_vacuum_scale_factor=0",
		"autovacuum_vacuum_insert_threshold=10000", "autovacuum_vacuum_insert_scale_factor=0",
		"autovacuum_analyze_threshold=10000", "autovacuum_analyze_scale_factor=0.02",
		"autovacuum_vacuum_cost_limit=2000",
	} {
		if !slices.Contains(opts, want) {
			t.Errorf("outbox_messages reloptions %v lack %s", opts, want)
		}
	}
}
