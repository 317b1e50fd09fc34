// Package cursor is the relay's cursor strategy ([strategy.Strategy]) for
// an outbox in cursor mode (PostgreSQL, [pgstore.Store.SetMode] to
// [pgstore.ModeCursor], "outbox mode set cursor"): the outbox is read like
// a log instead of claiming and marking each message.
//
//   - One relay at a time, the leader, reads the QUEUED messages in seq
//     order, hands them to the relay's workers, and keeps its place (its
//     position) in the single row of outbox_cursor. A message's row is
//     written only if its publish fails; an acknowledged message is
//     recorded in memory, and the position is saved every
//     pgstore.Config.CursorSaveInterval in the round trip of a read.
//   - The other relays are standbys. The leader holds a lease
//     (pgstore.Config.LeaderLease, 5 s by default) that it renews on its
//     own while it leads; a standby tries to lead at least five times per
//     lease and takes over once the lease ended (a leader that hangs, dies
//     or is cut off), or at once when the leader resigned ([Strategy.Close],
//     called when the relay stops). The lease token fences every write of
//     the leader: one whose lease was taken over changes nothing.
//   - Every relay, leader or standby, also runs the table path: the claims
//     of claim mode over the messages that are not QUEUED. A message whose
//     publish failed becomes FAILED (or DEAD_LETTER) and is retried there;
//     the later messages of its aggregate follow it there, so that order
//     per aggregate holds across both paths.
//
// The guarantees are the relay's: every committed message is published at
// least once, in seq order per aggregate. The position never passes a seq
// that may still commit (see pgstore's package documentation, "Cursor
// mode"), and a new leader publishes again only what its predecessor had
// not saved as handled: what was in flight, and what was acknowledged in
// the last save interval.
//
// A Strategy runs on a [pgstore.Cursor], one per relay ([pgstore.Store.Cursor]).
// On an outbox that is not in cursor mode its claims fail with an error
// wrapping [pgstore.ErrNotCursorMode], which tells a relay that follows the
// recorded mode to switch strategy.
package cursor
