package pgstore

// ClaimSQL exposes the rendered claim statement to the EXPLAIN test.
func (s *Store) ClaimSQL() string { return s.q.claim }

// ChannelName exposes channelName to tests.
var ChannelName = channelName

// ClaimFloorSQL exposes the rendered claim-floor statement to the EXPLAIN
// tests.
func (s *Store) ClaimFloorSQL() string { return s.q.claimFloor }

// ClaimSpan is claimSpan, for tests.
func ClaimSpan(limit int) int64 { return claimSpan(limit) }
