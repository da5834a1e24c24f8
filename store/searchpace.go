package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A search yields to ingest: while webhooks arrive, it rests between the
// batches it reads, and before each consumer it makes, as long as it
// worked since its last rest, so that it takes at most half of the time
// it runs, and ingest gets the cores in between. A search that passes
// over most of the stream reads few batches and makes a few consumers:
// its work between batches (the consumers, the index's value filters)
// is what it rests for. What a search worked after its last rest, the
// next search rests for before it starts (searchDebt): a search that
// passes over everything makes no consumer and never rests within
// itself, and searches run one after another (a script, a dashboard's
// refreshes) would take a core from ingest for as long as they go on.
// The evidence is a webhook stored within the last ingestQuiet; the rest
// is bounded by the searches' own working time, so a search always goes
// on at half its speed or more.
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
	if read <= 0 || !i.busy(time.Now()) {
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

// pace is one search's rests.
type pace struct {
	ingest *ingestSeen
	since  time.Time // when the search last started working again
}

// rest rests for as long as the search worked since its last rest, if
// ingest is busy.
func (p *pace) rest(ctx context.Context) error {
	err := p.ingest.yield(ctx, time.Since(p.since))
	p.since = time.Now()
	return err
}

// searchDebt is how long searches still owe ingest a rest for: the work
// each did after its last rest, counted from its end, so that the time
// between two searches counts as rest.
type searchDebt struct {
	mu    sync.Mutex
	until time.Time // searches rest until then, while ingest is busy
}

// maxSearchDebt bounds what one search can make the next wait.
const maxSearchDebt = time.Second

// owe adds worked, a search's work since its last rest, ended at now.
func (d *searchDebt) owe(now time.Time, worked time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.until.Before(now) {
		d.until = now
	}
	d.until = d.until.Add(worked)
	if limit := now.Add(maxSearchDebt); d.until.After(limit) {
		d.until = limit
	}
}

// due is how long a search starting at now rests first, if ingest is
// busy.
func (d *searchDebt) due(now time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(d.until.Sub(now), 0)
}
