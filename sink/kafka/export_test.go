package kafka

// RunClientCounts returns how many of s's PublishRuns clients are idle,
// draining (flushing a call's records after its context ended), and open.
func RunClientCounts(s *Sink) (idle, draining, open int) { return s.runs.counts() }
