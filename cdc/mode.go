package cdc

import (
	"context"
	"fmt"

	"github.com/outbox-dev/outbox/store/pgstore"
)

// checkMode stops the relay, with an error wrapping ErrNotCDCMode, when
// the outbox's recorded relay mode is not cdc. The active relay runs it
// before setup, so that it creates no slot for an outbox in another mode;
// a switch out of CDC mode (pgstore.Store.SetMode) drops the slots only
// while no relay streams from them. An error reading the mode is not
// fatal: the session is tried again.
func (r *Relay) checkMode(ctx context.Context) error {
	st, err := r.store.Mode(ctx)
	if err != nil {
		return fmt.Errorf("cdc: read the relay mode: %w", err)
	}
	if st.Mode != pgstore.ModeCDC {
		return fatal(fmt.Errorf("%w: the outbox in schema %s is in %s mode; run 'outbox mode set cdc' "+
			"(pgstore.Store.SetMode) to switch it, or run the relay of that mode", ErrNotCDCMode, r.cfg.Schema, st.Mode))
	}
	return nil
}
