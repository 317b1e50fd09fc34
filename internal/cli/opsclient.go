package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/ops"
)

// openOps connects to --database-url and returns the operations tools for
// --schema, and the pool, which the caller closes.
func (a *app) openOps(ctx context.Context, purpose string, cfg ops.Config) (*ops.Ops, *pgxpool.Pool, error) {
	pool, err := a.newPool(purpose, 4)
	if err != nil {
		return nil, nil, err
	}
	cfg.Schema, cfg.Logger = a.schema, a.logger
	o, err := ops.New(pool, cfg)
	if err != nil {
		pool.Close()
		if errors.Is(err, ops.ErrInvalidConfig) {
			return nil, nil, flagError("schema", "is not usable: %v", err)
		}
		return nil, nil, err
	}
	if err := a.ping(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return o, pool, nil
}

// writeJSON writes v as indented JSON and a newline, safe for a terminal
// (jsonTermSafe).
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	if _, err := w.Write(jsonTermSafe(buf.Bytes())); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// actorFlagUsage is the help of every --actor flag.
const actorFlagUsage = "who runs the operation, for the audit log (default $USER@hostname)"
