package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/relay/cdc"
)

// appName is the application_name of every connection of the component
// name: unique on the server, since the schema is the run's own.
func (h *harness) appName(name string) string {
	return name + "@" + h.schemas.outbox
}

// leader is the name of the relay that leads now (cursor: the cursor's
// lease owner; CDC: the relay streaming from the slot), or "" when none
// does, it cannot be read, or the strategy has no leader (claim).
func (h *harness) leader(ctx context.Context) string {
	switch h.cfg.Strategy {
	case StrategyCursor:
		return h.cursorLeader(ctx)
	case StrategyCDC:
		return h.cdcLeader(ctx)
	}
	return ""
}

// awaitLeader waits up to leaderWait for a relay to lead and returns its
// name: after a fault on the leader, a standby takes over within moments.
func (h *harness) awaitLeader(ctx context.Context) (string, error) {
	deadline := time.Now().Add(leaderWait)
	for {
		if name := h.leader(ctx); name != "" && h.component(name) != nil {
			return name, nil
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no relay led within %s", leaderWait)
		}
		sleep(ctx, followLeaderEvery)
	}
}

// cursorLeader is the relay id of the cursor's leader (cursor mode), or ""
// when no relay leads or it cannot be read.
func (h *harness) cursorLeader(ctx context.Context) string {
	var owner *string
	err := h.pool.QueryRow(ctx, `SELECT lease_owner FROM `+pgx.Identifier{h.schemas.outbox, "outbox_cursor"}.Sanitize()+
		` WHERE lease_expires_at > now()`).Scan(&owner)
	if err != nil || owner == nil {
		return ""
	}
	return *owner
}

// cdcLeader is the name of the relay whose replication connection streams
// from the run's slot (CDC), found by the connection's application_name,
// or "" when none streams or it cannot be read.
func (h *harness) cdcLeader(ctx context.Context) string {
	var app string
	err := h.pool.QueryRow(ctx, `SELECT a.application_name FROM pg_replication_slots s
JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = $1`, cdc.DefaultSlot(h.schemas.outbox)).Scan(&app)
	if err != nil {
		return ""
	}
	for _, r := range h.relays {
		if h.appName(r.name) == app {
			return r.name
		}
	}
	return ""
}

// removeSlot drops the CDC relays' replication slot and publication
// (cdc.Remove), once every relay stopped: a slot left behind would make
// the server keep WAL for it. It runs after a failing run too; the
// schemas kept for inspection do not need it.
func (h *harness) removeSlot() {
	ctx, cancel := context.WithTimeout(context.Background(), cdc.RemoveWait+20*time.Second)
	defer cancel()
	slot := cdc.DefaultSlot(h.schemas.outbox)
	err := cdc.Remove(ctx, h.pool, h.schemas.outbox, "", "")
	if err == nil {
		h.logf("dropped the replication slot %s and its publication", slot)
	} else {
		h.logf("could not drop the replication slot %s (drop it by hand: SELECT pg_drop_replication_slot('%s')): %v", slot, slot, err)
	}
}
