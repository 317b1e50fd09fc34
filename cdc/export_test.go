package cdc

// Abort stops r like a crash: its replication connection is cut without a
// last status update, publishes are cancelled and nothing more is marked.
func Abort(r *Relay) { r.abort() }
