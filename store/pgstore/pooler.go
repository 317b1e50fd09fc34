package pgstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrTransactionPooler is wrapped by an error of a statement that failed
// because a prepared statement pgx made on one server connection was
// missing, or already made, on the one that ran it: the connections go
// through a pooler that hands each transaction a server connection of its
// own choosing (PgBouncer in transaction pooling mode before 1.21, or with
// max_prepared_statements = 0). pgx's default query exec mode,
// cache_statement, names its prepared statements and relies on them; add
// default_query_exec_mode=exec to the database URL.
var ErrTransactionPooler = errors.New("pgstore: the database connection is pooled per transaction (PgBouncer in transaction mode?), " +
	"which keeps none of pgx's prepared statements: add default_query_exec_mode=exec to the database URL")

// ExplainPoolerError returns err wrapped with [ErrTransactionPooler] when
// err is PostgreSQL's "prepared statement does not exist" (26000) or
// "already exists" (42P05) about one of pgx's cached statements (named
// stmtcache_...), and err itself otherwise.
func ExplainPoolerError(err error) error {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok || (pgErr.Code != "26000" && pgErr.Code != "42P05") ||
		!strings.Contains(pgErr.Message, "stmtcache_") || errors.Is(err, ErrTransactionPooler) {
		return err
	}
	return fmt.Errorf("%w: %w", err, ErrTransactionPooler)
}
