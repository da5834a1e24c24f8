package store

import (
	"context"
	"sync/atomic"
	"time"
)

// A search yields to ingest: while webhooks arrive, it rests between the
// batches it reads as long as it took to read the last, so that it takes
// at most half of the time it runs, and ingest gets the cores in between.
// The evidence is a webhook stored within the last ingestQuiet; the rest
// is bounded by the batch's own reading time, so a search always goes on
// at half its speed or more.
const ingestQuiet = 250 * time.Millisecond

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

// yield rests after a batch that took read, when ingest is busy: for as
// long as read, or until ctx ends.
func (i *ingestSeen) yield(ctx context.Context, read time.Duration) error {
	if !i.busy(time.Now()) {
		return nil
	}
	t := time.NewTimer(read)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
