package sqlitestore

// ClaimSQL and CleanupSQL expose rendered statements to the query plan tests.
func (s *Store) ClaimSQL() string   { return s.q.claim }
func (s *Store) CleanupSQL() string { return s.q.cleanup }
