package pgstore

// ClaimSQL exposes the rendered claim statement to the EXPLAIN test.
func (s *Store) ClaimSQL() string { return s.q.claim }

// ChannelName exposes channelName to tests.
var ChannelName = channelName
