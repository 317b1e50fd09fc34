package cursor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// cursorGapGrace is the shortest time a gap stays open (see the package
// documentation).
const cursorGapGrace = time.Second

// cursorMaxGaps bounds the gaps the leader tracks: beyond it, it reads no
// further until some closed (a long transaction holds xmin back while many
// seqs are rolled back).
const cursorMaxGaps = 10000

// mode is what a Strategy knows about the outbox's relay mode.
type mode uint8

const (
	modeUnknown mode = iota
	modeClaim
	modeCursor
)

// cursorState is a Strategy's state. db serialises the round trips that
// read or change the cursor's messages, so that each sees the effects of
// the one before (a read after a failure sees the failed message in the
// table path); mu guards the fields, and is never held during a round
// trip.
type cursorState struct {
	db sync.Mutex
	mu sync.Mutex

	mode      mode
	checkedAt time.Time // when the mode was last read (claim mode), or leading last tried (standby)

	leader     bool
	owner      string
	token      uuid.UUID // the lease token of the cursor row
	leaseUntil time.Time // the lease ends no earlier than this
	lease      time.Duration
	win        *cursorWindow
	saved      int64
	savedAt    time.Time
	// savedHandled is the window's handled count at the last save.
	savedHandled uint64
	// keepStop ends the goroutine that renews the lead's lease (nil when
	// none runs); keepDone is closed when the last one started returned
	// (lease.go).
	keepStop context.CancelFunc
	keepDone chan struct{}
	// claimed is when a claim last came in (UnixNano): a lead whose
	// Strategy gets no claim for leadIdleLimit is given up (lease.go).
	claimed atomic.Int64

	lastTable time.Time // the last claim of the table path
	tableMore bool      // it found messages: claim again at once
	// tableTok holds the claims that hold table-path messages, with the end
	// of their lease: marks under other tokens need no round trip.
	tableTok map[uuid.UUID]time.Time
}

// rememberTableClaim records that claim token holds table-path messages
// until leaseEnd, and forgets claims whose lease ended a while ago (their
// marks change nothing in the table any more). cs.mu is held.
func (cs *cursorState) rememberTableClaim(token uuid.UUID, leaseEnd time.Time) {
	if cs.tableTok == nil {
		cs.tableTok = map[uuid.UUID]time.Time{}
	}
	now := time.Now()
	for t, end := range cs.tableTok {
		if now.Sub(end) > time.Minute {
			delete(cs.tableTok, t)
		}
	}
	cs.tableTok[token] = leaseEnd
}

// holdsTable reports whether claim token may hold table-path messages.
// cs.mu is held.
func (cs *cursorState) holdsTable(token uuid.UUID) bool {
	_, ok := cs.tableTok[token]
	return ok
}

// ackLeading acknowledges seqs under token in the window, if the Strategy
// still leads under leaderTok, and returns how many. cs.mu is held.
func (cs *cursorState) ackLeading(leaderTok, token uuid.UUID, seqs []int64) int64 {
	if len(seqs) == 0 || !cs.leader || cs.token != leaderTok {
		return 0
	}
	return cs.win.ack(token, seqs)
}

// dropLead forgets the lead and everything in the window: claims that hold
// cursor messages are fenced from now on (their marks change nothing), and
// the lease is no longer renewed. cs.mu is held.
func (cs *cursorState) dropLead() {
	cs.stopKeeper()
	cs.leader = false
	cs.token = uuid.Nil
	cs.win = nil
	cs.checkedAt = time.Time{}
}

// stopKeeper tells the lead's keeper, if one runs, to stop, without waiting
// for it (keepDone is closed when it returned). cs.mu is held.
func (cs *cursorState) stopKeeper() {
	if cs.keepStop != nil {
		cs.keepStop()
		cs.keepStop = nil
	}
}

// knownMode returns the mode the Strategy knows, unless it should read it
// again: claim mode is read again once known for recheck (see
// detectMode).
func (cs *cursorState) knownMode(recheck time.Duration) (mode, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch cs.mode {
	case modeCursor:
		return cs.mode, true
	case modeClaim:
		return cs.mode, time.Since(cs.checkedAt) < recheck
	}
	return modeUnknown, false
}

// standby reports whether the Strategy is in cursor mode without leading.
func (cs *cursorState) standby() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mode == modeCursor && !cs.leader
}
