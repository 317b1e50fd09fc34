package cdc

// Abort stops r like a crash: its replication connection is cut without a
// last status update, publishes are cancelled and nothing more is marked.
func Abort(r *Relay) { r.abort() }

// BatchesInFlight returns how many batches r has checked and added to its
// session's ledger (their messages claimed, publishing, or awaiting their
// record) whose messages the confirmed position has not all passed.
func BatchesInFlight(r *Relay) int64 { return r.batchesInFlight.Load() }

// SetupLockKey is the key of the advisory lock that serialises the setup
// of the relays of schema (a Relay of cfg's).
func SetupLockKey(cfg Config) int64 {
	r := &Relay{cfg: cfg.WithDefaults()}
	return r.setupLockKey()
}
