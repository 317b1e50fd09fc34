package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RelayPingIdle is how long a connection of a pool tuned by
// [ConfigureRelayPool] must have been idle before the pool pings it on
// acquire.
const RelayPingIdle = time.Minute

// ConfigureRelayPool tunes the configuration of a pool that serves a relay
// (the pool passed to [New] for a relay.Relay). Call it after setting
// MaxConns. It changes two things:
//
//   - pgxpool pings a connection that has been idle for a second or more
//     before handing it out, and an idle relay takes a connection once per
//     poll interval (1 s by default), so about every other poll would cost
//     a second round trip. Tuned, the pool pings only connections idle for
//     RelayPingIdle. A connection that died meanwhile fails the relay's next
//     claim, which the relay retries; pgx drops the broken connection.
//   - MinConns is raised to MaxConns, so the pool opens all its connections
//     at once and keeps them. An idle relay uses one connection; when work
//     arrives its other workers need theirs at the same moment, and a new
//     connection (a backend started, authentication, TLS) takes tens of
//     milliseconds, far longer while the application opens connections of
//     its own: every message committed meanwhile would wait. Idle
//     connections cost no queries (pgxpool's health check does not ping
//     them).
func ConfigureRelayPool(c *pgxpool.Config) {
	c.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration >= RelayPingIdle
	}
	c.MinConns = max(c.MinConns, c.MaxConns)
}
