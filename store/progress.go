package store

import (
	"context"
	"sync"
	"time"
)

// progress is a count that only grows, and a way to wait for it: how far a
// tailer or the writer has indexed, for lookups that must see a write
// made a moment ago.
type progress struct {
	mu    sync.Mutex
	n     uint64
	moved chan struct{} // closed and replaced whenever n grows
}

func newProgress(n uint64) *progress { return &progress{n: n, moved: make(chan struct{})} }

// set moves the count to n.
func (p *progress) set(n uint64) {
	p.mu.Lock()
	p.n = n
	close(p.moved)
	p.moved = make(chan struct{})
	p.mu.Unlock()
}

func (p *progress) get() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// reach waits until the count is at least n, ctx ends or wait passes; it
// reports whether it got there.
func (p *progress) reach(ctx context.Context, n uint64, wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		p.mu.Lock()
		at, moved := p.n, p.moved
		p.mu.Unlock()
		if at >= n {
			return true
		}
		select {
		case <-moved:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
