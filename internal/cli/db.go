package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/backoff"
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
	if a.poolHook != nil {
		a.poolHook(purpose, cfg)
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

// A relay that cannot reach its database at start waits for it: the first
// retry after about dbWaitBase, the wait doubling up to dbWaitMax, with
// jitter.
const (
	dbWaitBase = time.Second
	dbWaitMax  = 30 * time.Second
)

// errDatabaseRefuses is wrapped by waitForDatabase's error for a refusal
// that waiting does not mend.
var errDatabaseRefuses = errors.New("not a passing outage, so the relay does not wait for it")

// refusals are the SQLSTATEs of a connection attempt that waiting does not
// mend, with what to do about each. A database that does not exist counts:
// it is nearly always a wrong name in the URL, and exiting shows that in
// the orchestrator at once, where waiting would only show a relay that is
// not ready.
var refusals = map[string]string{
	"28P01": "the password is wrong: fix it in --database-url (or PGPASSWORD)",
	"28000": "the role does not exist or pg_hba.conf rejects it: fix the user in --database-url or the server's pg_hba.conf",
	"3D000": "the database does not exist: fix its name in --database-url, or create it",
	"42501": "the role may not connect to this database: GRANT CONNECT, or use another role",
}

// waitForDatabase returns once the database answers. While it cannot be
// reached it tries again with backoff (capped at dbWaitMax), logging each
// failed attempt with its reason. It returns at once an error wrapping
// errDatabaseRefuses for a refusal that waiting does not mend (wrong
// password, unknown role or database), and ctx's error when ctx ends.
func (a *app) waitForDatabase(ctx context.Context, pool *pgxpool.Pool) error {
	for attempt := 0; ; attempt++ {
		err := a.ping(ctx, pool)
		if err == nil {
			if attempt > 0 {
				a.logger.Info("database reachable", slog.Int("attempts", attempt+1))
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && refusals[pgErr.Code] != "" {
			return fmt.Errorf("%w\n%s (%w)", err, refusals[pgErr.Code], errDatabaseRefuses)
		}
		delay := backoff.Delay(dbWaitBase, dbWaitMax, attempt)
		a.logger.Warn("database not reachable; waiting for it, not ready until it answers",
			slog.Any("error", err), slog.Int("attempt", attempt+1), slog.Duration("retry_in", delay.Round(time.Millisecond)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
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
