package store

// Inherited reports whether the message at WEBHOOKS sequence seq was
// stored before this process started the embedded server, so that a run of
// jethook killed before may have attempted and settled it. The embedded
// server writes a consumer's acks and naks to disk at most about every
// tenth of a second, so a kill -9 loses the last ones: the consumer then
// hands such a message out again as if they had never been sent, and only
// the attempt log (LastAttempt), stored as each record arrives, tells what
// became of it. Always false with an external server, which outlives a
// jethook crash with every settle it received.
func (s *Store) Inherited(seq uint64) bool { return seq <= s.inherited.Load() }
