package store

import (
	"context"
	"sync/atomic"
	"time"
)

// A search yields to ingest. While webhooks arrive (one stored within
// the last ingestQuiet), it reads a batch of busyBatch at a time and
// then rests, with nothing asked for, as long as that batch took to
// come: the whole read, the server's part included, stops, so the
// search takes at most about half of the time it runs, in stretches
// short enough (under a millisecond on 2 cores) that a webhook being
// stored waits behind one at most. With no ingest it reads batches of
// scanBatch, two asked for at once, and never rests. The evidence is the
// store's own last publish; the rest is bounded by the batch's own
// reading time, so a search always goes on at half its speed or more.
const ingestQuiet = 250 * time.Millisecond

// busyBatch is how many messages one ask of a scan takes while ingest is
// busy.
const busyBatch = 128

// ingestSeen is when the store last stored a webhook, for searches to
// yield to.
type ingestSeen struct {
	at atomic.Int64 // Unix ns; 0 before the first
}

func (i *ingestSeen) stored(now time.Time) { i.at.Store(now.UnixNano()) }

// busy reports whether a webhook was stored within ingestQuiet of now.
func (i *ingestSeen) busy(now time.Time) bool {
	at := i.at.Load()
	return at != 0 && now.UnixNano()-at < int64(ingestQuiet)
}

// rest waits for d, or until ctx ends.
func rest(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
