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
// (the pool passed to [New] for a relay.Relay). It changes one thing:
// pgxpool pings a connection that has been idle for a second or more
// before handing it out, and an idle relay takes a connection once per
// poll interval (1 s by default), so about every other poll would cost a
// second round trip. Tuned, the pool pings only connections idle for
// RelayPingIdle. A connection that died meanwhile fails the relay's next
// claim, which the relay retries; pgx drops the broken connection.
func ConfigureRelayPool(c *pgxpool.Config) {
	c.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration >= RelayPingIdle
	}
}
