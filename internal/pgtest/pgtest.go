// Package pgtest gives each test its own PostgreSQL schema on the server at
// TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test). A test
// fails, never skips, when the server cannot be reached.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is used when TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test database URL.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var unsafe = regexp.MustCompile(`[^a-z0-9_]+`)

// NewSchemaName returns a fresh schema name derived from the test's name.
func NewSchemaName(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := unsafe.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return "t_" + name + "_" + hex.EncodeToString(b)
}

// Schema creates an empty schema for the test and drops it when the test
// ends. It returns a pool whose search_path is that schema, and the schema
// name.
func Schema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	schema := NewSchemaName(t)
	admin, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL unreachable at %s (set TEST_DATABASE_URL): %v", URL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, URL())
		if err != nil {
			t.Logf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	pool := Pool(t, schema)
	return pool, schema
}

// Pool opens a new pool on the test database with search_path set to schema
// and closes it when the test ends.
func Pool(t testing.TB, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", URL(), err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 8
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: PostgreSQL unreachable at %s (set TEST_DATABASE_URL): %v", URL(), err)
	}
	t.Cleanup(pool.Close)
	return pool
}
