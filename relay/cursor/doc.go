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
//     pgstore.Config.CursorSaveInterval in the round trip of a claim (or
//     of a failure's record; with a negative interval, of every mark).
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
// that may still commit, and a new leader publishes again only what its
// predecessor had not saved as handled: what was in flight, and what was
// acknowledged in the last save interval.
//
// Make a [Strategy] per relay with [New] on a [pgstore.Store]: it shares
// the Store's pool and Config. This package holds the logic of cursor
// mode, all in memory (the window, the lead, the marks); its database
// side, [pgstore.CursorDB], runs the round trips it plans, one per claim
// (with the mark before it, when they travel together; the first claim
// reads the mode first, and a standby that just won the lead reads at
// once in a second one), and answers what the database returned. [Strategy.Queue] shows the Strategy as a
// [store.Queue], [store.MarkClaimer] and [store.Notifier], for code that
// claims without a relay. On an outbox that is not in cursor mode its
// claims fail with an error wrapping [pgstore.ErrNotCursorMode], which
// tells a relay that follows the recorded mode to switch strategy.
//
// # Runs
//
// With store.ClaimParams.MaxRun above 1 (relay.Config.MaxRun), the leader
// hands out runs: with the first unsent message of an aggregate (its
// head), the next messages of that aggregate it has read, in seq order,
// up to MaxRun messages whose payload, the head's included, stays within
// MaxRunBytes (0: no bound; the head goes whatever its size). A run stops
// before a message that is not read yet, before one on its way to the
// table path, and before a seq between two messages of the aggregate that
// is not visible yet (it may still commit as a message of the aggregate).
// A claim takes the heads first, in seq order, then the second message of
// each run, then the third, and so on within its Limit, so that one
// aggregate with a backlog does not crowd out the others. MaxRun 0 and 1
// hand out heads only.
//
// An aggregate with a message handed out gets nothing more until each
// message of its run is acknowledged, failed, or given back: what is given
// back (Release, or a claim whose lease ended, which gives back all it
// holds) is handed out again from the aggregate's lowest unsent message,
// in order. A failed message enters the table path with every later
// message of its aggregate the leader holds, including those of its run
// that its claim still holds (the relay gives them back first), whose
// later marks under that claim then change nothing. The position and what
// a save records as handled move only over acknowledged messages, so a new
// leader publishes again the part of a run that was not acknowledged.
//
// # How the guarantees hold
//
// Not passing a message that is still committing: seqs are taken at INSERT
// but become visible at COMMIT, so a reader can see seq 11 while seq 10 is
// still uncommitted. The leader therefore keeps a window over the seqs
// between its saved position and the highest seq it read, with the gaps it
// saw there, and reads the gaps again with every read. A gap is closed (its
// seqs will never commit: the transaction rolled back, or the seq was
// never used) only when
//
//  1. a read's snapshot has an xmin at least the bound of the read that
//     found the gap: a transaction id that read took after its snapshot.
//     Every seq of the gap was taken before that snapshot (a higher seq was
//     already visible in it), by a transaction that had an id then, because
//     [pgstore.Store.Enqueue] takes the transaction id before the seqs. Such a
//     transaction was either finished then, so its rows were visible, or
//     running, so its id was below the bound; once a snapshot's xmin reached
//     the bound, it has ended (every transaction running in that snapshot
//     has an id at or above xmin), and a read after that sees its rows if it
//     committed. The snapshot's own xmax is not such a bound: it is the
//     newest ended id plus one, and a transaction running with a newer id is
//     counted neither there nor in xmin.
//  2. at least a second passed since the gap was found, for writers that
//     insert rows in other ways than Enqueue (their first INSERT may take a
//     seq a few microseconds before the transaction gets its id).
//
// The position only moves over handled messages and closed gaps. A long
// transaction anywhere on the server holds xmin back, and with it the
// saved position, but not publishing: messages are published as soon as
// they are visible.
//
// What a new leader publishes again: with the position, a save records the
// leader's head and the ranges at or below it that it has not handled
// (open records and gaps, migration 011); every other seq above the
// position was handled. A new leader starts with those ranges as gaps, so
// it publishes again only what its predecessor had not had acknowledged at
// its last save: what was in flight, and what was acknowledged in the last
// Config.CursorSaveInterval. A save is due when the position moved or
// anything was handled since the last one.
//
// One leader, and the table path: the leader holds a lease on the cursor
// row (its token fences every write it makes, as claims are fenced):
// Config.LeaderLease, 5 s by default, of its own and not the claims'
// lease. Its saves renew it, and so does the Strategy itself, on a goroutine
// of its own, every third of the lease from the moment it leads until it
// resigns, loses the lead or the pool is closed, whatever its caller does:
// an idle leader, or one whose publishes wait for a broker that does not
// answer, keeps the lead, with relay.Relay or without it, and behind any
// wrapper of the Strategy (a program that drives a Strategy itself calls
// Close when it stops using it; a leading Strategy that gets no claim for
// two minutes gives the lead up by itself). Other relays are standbys:
// they try to lead at least five times per lease and take over when the
// lease has expired (a leader that hangs, is stopped or cut off renews
// nothing), or at once when the leader resigned ([Strategy.Close], called
// when the relay stops). A leader that resumes after its lease ran out
// finds that before anything it does, and a write already under way
// changes nothing once another relay took the lease (its token is not the
// cursor row's): it saves no position, moves no message to the table
// path, and its acknowledgements in memory are dropped with its window. The next
// leader publishes again what the old one had not saved as handled, and
// the old one's publishes that were in flight when it hung may still reach
// the broker: duplicates, which at-least-once allows; each of those was
// published after the earlier messages of its aggregate were acknowledged,
// so the first copies stay in order. Any relay, leader or standby, also
// runs the table path: the claim of claim mode, over the
// messages that are not QUEUED (PENDING, FAILED, IN_FLIGHT, whatever was in
// the table before cursor mode was turned on, and replayed dead letters).
// A cursor message whose publish failed becomes FAILED (or DEAD_LETTER)
// and enters the table path, which retries it; the later messages of its
// aggregate follow it there as PENDING, and so does every message read
// later while an earlier message of its aggregate is in the table path.
// Order per aggregate holds across both paths.
package cursor
