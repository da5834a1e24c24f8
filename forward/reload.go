package forward

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/jethook/jethook/policy"
)

// registry holds the running delivery loops, so a reload can stop and start
// them one by one.
type registry struct {
	reload sync.Mutex // one reload at a time

	mu         sync.Mutex
	fetchCtx   context.Context // parent of every loop's fetch context
	attemptCtx context.Context
	stopped    bool
	loops      []*loop // in configuration order
}

// loop is one running destination loop.
type loop struct {
	d    *destination
	stop context.CancelFunc // stops fetching
	done chan struct{}      // closed when the loop has returned
}

// start records the shared contexts and starts a loop for each destination.
func (r *registry) start(f *Forwarder, fetchCtx, attemptCtx context.Context, dests []*destination) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetchCtx, r.attemptCtx = fetchCtx, attemptCtx
	for _, d := range dests {
		r.loops = append(r.loops, r.launch(f, d))
	}
}

// launch starts d's loop; r.mu is held. A consumer an operator paused
// (in JetStream, so the pause outlives restarts) starts held.
func (r *registry) launch(f *Forwarder, d *destination) *loop {
	if info := d.cons.CachedInfo(); info != nil && info.Paused {
		d.gate.hold(true)
	}
	ctx, stop := context.WithCancel(r.fetchCtx)
	l := &loop{d: d, stop: stop, done: make(chan struct{})}
	if d.leases != nil {
		// A pull destination's clients fetch; nothing runs here.
		close(l.done)
		return l
	}
	f.loops.Add(1)
	go func() {
		defer f.loops.Done()
		defer close(l.done)
		d.run(ctx, r.attemptCtx)
	}()
	return l
}

// close keeps Reload from starting loops once Stop has begun.
func (r *registry) close() {
	r.mu.Lock()
	r.stopped = true
	for _, l := range r.loops {
		if l.d.leases != nil {
			l.d.leases.close()
		}
	}
	r.mu.Unlock()
}

// Reload applies a new configuration to the running forwarder: it starts
// loops for added destinations, stops the loops of removed ones, and
// restarts changed ones with their new settings. Unchanged destinations
// keep running untouched.
//
// Nothing is lost or delivered twice: a stopped loop stops fetching and its
// attempts in flight finish (for up to the destination's timeout, bounded by
// ctx) before the new loop starts on the same durable consumer; a message
// settled by neither stays in the consumer. A removed destination's
// consumer is kept, so re-adding it resumes where it stopped. Every new
// consumer is created before anything stops, so an error (the store is
// down) leaves the old configuration running.
func (f *Forwarder) Reload(ctx context.Context, cfg *policy.Config) error {
	f.reg.reload.Lock()
	defer f.reg.reload.Unlock()
	f.reg.mu.Lock()
	started, stopped := f.reg.fetchCtx != nil, f.reg.stopped
	old := append([]*loop(nil), f.reg.loops...)
	f.reg.mu.Unlock()
	if !started || stopped {
		return errors.New("forwarder not running")
	}
	byKey := make(map[[2]string]*loop, len(old))
	for _, l := range old {
		byKey[[2]string{l.d.route.Name, l.d.dest.Name}] = l
	}

	type step struct {
		keep *loop        // unchanged: keeps running
		prev *loop        // changed: stopped, then replaced by next
		next *destination // added or changed
	}
	var steps []step
	wanted := make(map[[2]string]bool)
	for _, r := range cfg.Routes {
		for _, dst := range r.Destinations {
			k := [2]string{r.Name, dst.Name}
			wanted[k] = true
			prev := byKey[k]
			if prev != nil && sameSettings(prev.d, r, dst) {
				steps = append(steps, step{keep: prev})
				continue
			}
			d, err := f.newDestination(ctx, r, dst)
			if err != nil {
				return err
			}
			steps = append(steps, step{prev: prev, next: d})
		}
	}

	// Stop what goes away or changes; then start the new loops.
	var halt []*loop
	for _, l := range old {
		if !wanted[[2]string{l.d.route.Name, l.d.dest.Name}] {
			halt = append(halt, l)
			f.Logger.Info("destination removed; its consumer and messages are kept", "route", l.d.route.Name, "destination", l.d.dest.Name)
		}
	}
	for _, s := range steps {
		if s.prev != nil {
			halt = append(halt, s.prev)
		}
	}
	var wg sync.WaitGroup
	for _, l := range halt {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.halt(ctx)
		}()
	}
	wg.Wait()
	for _, l := range halt {
		if l.d.leases != nil && !wanted[[2]string{l.d.route.Name, l.d.dest.Name}] {
			// Removed: its leased messages come back after their AckWait.
			l.d.leases.close()
		}
		// Its breaker state goes with it: a replacement starts closed.
		f.Metrics.Removed(l.d.route.Name, l.d.dest.Name)
		if f.Alerts != nil {
			f.Alerts.Removed(l.d.route.Name, l.d.dest.Name)
		}
	}

	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	if f.reg.stopped {
		return errors.New("forwarder stopped during reload")
	}
	loops := make([]*loop, 0, len(steps))
	for _, s := range steps {
		if s.keep != nil {
			loops = append(loops, s.keep)
			continue
		}
		if s.prev != nil {
			s.next.last.carry(&s.prev.d.last)
			s.next.takeLeases(s.prev.d)
			f.Logger.Info("destination restarted with new settings", "route", s.next.route.Name, "destination", s.next.dest.Name)
		} else {
			f.Logger.Info("destination added", "route", s.next.route.Name, "destination", s.next.dest.Name)
		}
		loops = append(loops, f.reg.launch(f, s.next))
	}
	f.reg.loops = loops
	return nil
}

// halt stops the loop's fetching, waits for the loop to return, then waits
// for its attempts in flight to finish, for up to the destination's timeout
// or until ctx ends. An attempt still running after that settles its
// message itself; the message is not fetched again meanwhile (it is
// pending an ack), so it is not delivered twice.
func (l *loop) halt(ctx context.Context) {
	l.stop()
	select {
	case <-l.done:
	case <-ctx.Done():
		return
	}
	deadline := time.NewTimer(l.d.dest.Timeout + time.Second)
	defer deadline.Stop()
	for l.d.inflight.Load() > 0 {
		select {
		case <-l.d.ended:
		case <-time.After(10 * time.Millisecond):
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// sameSettings reports whether d runs with route r's destination dst as
// they are now. Only what the loop uses counts: the route's retry policy
// and timeout and the destination itself; a changed path or secret is the
// ingress's business.
func sameSettings(d *destination, r policy.Route, dst policy.Destination) bool {
	return reflect.DeepEqual(d.route.Retry, r.Retry) && d.route.Timeout == r.Timeout &&
		reflect.DeepEqual(d.dest, dst)
}

// takeLeases hands the leases of prev, which d replaces, to d: a client's
// leases outlive a reload. A destination that stops being pulled drops
// them, and their messages come back after their AckWait.
func (d *destination) takeLeases(prev *destination) {
	switch {
	case prev.leases == nil:
	case d.leases == nil:
		prev.leases.close()
	default:
		prev.leases.mu.Lock()
		prev.leases.d = d
		prev.leases.mu.Unlock()
		d.leases = prev.leases
	}
}
