package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/store/pgstore"
)

// pingTimeout bounds the first round trip to the database, so that a wrong
// --database-url fails in seconds rather than hanging.
const pingTimeout = 15 * time.Second

// newPool returns a pool for --database-url, without connecting yet.
// purpose becomes the application_name (unless the URL sets one), so that
// pg_stat_activity shows which outbox command holds a connection. maxConns
// is the pool size; 0 keeps pgx's default. tweaks adjust the configuration
// last.
func (a *app) newPool(purpose string, maxConns int32, tweaks ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	if a.databaseURL == "" {
		return nil, flagError("database-url", "is required (or set %s)", EnvName("database-url"))
	}
	cfg, err := pgxpool.ParseConfig(a.databaseURL)
	if err != nil {
		// pgx's parse errors already mask the password; the URL itself is
		// not repeated here.
		return nil, flagError("database-url", "must be a PostgreSQL URL or key=value DSN: %v", err)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "outbox " + purpose
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	for _, tweak := range tweaks {
		tweak(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", RedactURL(a.databaseURL), err)
	}
	return pool, nil
}

// ping makes one round trip to the database, to fail early and clearly when
// it cannot be reached.
func (a *app) ping(ctx context.Context, pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("connect to database %s: %w", RedactURL(a.databaseURL), err)
	}
	return nil
}

// newStore returns the PostgreSQL store in --schema on pool.
func (a *app) newStore(pool *pgxpool.Pool) (*pgstore.Store, error) {
	st, err := pgstore.New(pool, pgstore.Config{Schema: a.schema, Logger: a.logger})
	if err != nil {
		if errors.Is(err, pgstore.ErrInvalidConfig) {
			return nil, flagError("schema", "is not usable: %v", err)
		}
		return nil, err
	}
	return st, nil
}

// openStore connects to --database-url and returns the store in --schema,
// and the pool, which the caller closes.
func (a *app) openStore(ctx context.Context, purpose string, maxConns int32) (*pgstore.Store, *pgxpool.Pool, error) {
	pool, err := a.newPool(purpose, maxConns)
	if err != nil {
		return nil, nil, err
	}
	st, err := a.newStore(pool)
	if err == nil {
		err = a.ping(ctx, pool)
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return st, pool, nil
}
