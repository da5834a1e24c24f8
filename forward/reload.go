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
	d.metrics = f.Metrics.Destination(d.route.Name, d.dest.Name)
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

// release gives up the leases of the ordered destinations, once Stop has
// let their attempts end: another replica takes them at once.
func (r *registry) release() {
	r.mu.Lock()
	loops := r.loops
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range loops {
		if l.d.owner != nil {
			wg.Go(func() { l.d.owner.release(context.Background()) })
		}
	}
	wg.Wait()
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
	running := make([]settings, len(old))
	for i, l := range old {
		running[i] = settings{l.d.route, l.d.dest}
	}
	changes := diff(running, cfg)

	// Every new destination first (its consumer is created now), so that
	// an error leaves the old configuration running.
	next := make([]*destination, len(changes))
	for i, c := range changes {
		if c.kind == added || c.kind == changed {
			d, err := f.newDestination(ctx, c.now.route, c.now.dest)
			if err != nil {
				return err
			}
			next[i] = d
		}
	}

	// Stop what goes away or changes; then start the new loops.
	var halt []*loop
	for _, c := range changes {
		switch c.kind {
		case removed:
			halt = append(halt, old[c.was])
			f.Logger.Info("destination removed; its consumer and messages are kept", "route", c.key.route, "destination", c.key.dest)
		case changed:
			halt = append(halt, old[c.was])
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
	for i, c := range changes {
		if c.kind != removed && c.kind != changed {
			continue
		}
		l := old[c.was]
		if l.d.leases != nil && c.kind == removed {
			// Removed: its leased messages come back after their AckWait.
			l.d.leases.close()
		}
		if l.d.owner != nil && (c.kind == removed || next[i].owner == nil) {
			// No longer ordered here: another replica may order it.
			l.d.owner.release(ctx)
		}
		// Its breaker state goes with it: a replacement starts closed.
		l.d.metrics.Remove()
		if f.Alerts != nil {
			f.Alerts.Removed(l.d.route.Name, l.d.dest.Name)
		}
	}

	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	if f.reg.stopped {
		return errors.New("forwarder stopped during reload")
	}
	loops := make([]*loop, 0, len(changes))
	for i, c := range changes {
		switch c.kind {
		case kept:
			loops = append(loops, old[c.was])
		case changed:
			prev := old[c.was].d
			next[i].last.carry(&prev.last)
			next[i].takeLeases(prev)
			f.Logger.Info("destination restarted with new settings", "route", c.key.route, "destination", c.key.dest)
			loops = append(loops, f.reg.launch(f, next[i]))
		case added:
			f.Logger.Info("destination added", "route", c.key.route, "destination", c.key.dest)
			loops = append(loops, f.reg.launch(f, next[i]))
		}
	}
	f.reg.loops = loops
	return nil
}

// settings are what a destination's loop runs with: its route and itself.
type settings struct {
	route policy.Route
	dest  policy.Destination
}

// destKey names a route × destination.
type destKey struct{ route, dest string }

// changeKind is what a reload does to one route × destination.
type changeKind int

const (
	kept    changeKind = iota // unchanged: its loop keeps running
	added                     // new: a loop starts
	changed                   // its settings changed: its loop stops, a new one starts
	removed                   // gone: its loop stops
)

// change is one step of a reload.
type change struct {
	kind changeKind
	key  destKey
	was  int      // its place in the running loops (kept, changed, removed)
	now  settings // its new settings (added, changed)
}

// diff compares the running destinations with cfg's: one change per
// destination of cfg, in cfg's order, then one per running destination
// cfg no longer has, in running order. Only what a loop uses counts as a
// change (sameSettings).
func diff(running []settings, cfg *policy.Config) []change {
	at := make(map[destKey]int, len(running))
	for i, r := range running {
		at[destKey{r.route.Name, r.dest.Name}] = i
	}
	var out []change
	wanted := make(map[destKey]bool)
	for _, r := range cfg.Routes {
		for _, dst := range r.Destinations {
			k := destKey{r.Name, dst.Name}
			wanted[k] = true
			now := settings{r, dst}
			i, ok := at[k]
			switch {
			case !ok:
				out = append(out, change{kind: added, key: k, was: -1, now: now})
			case sameSettings(running[i], now):
				out = append(out, change{kind: kept, key: k, was: i})
			default:
				out = append(out, change{kind: changed, key: k, was: i, now: now})
			}
		}
	}
	for i, r := range running {
		if k := (destKey{r.route.Name, r.dest.Name}); !wanted[k] {
			out = append(out, change{kind: removed, key: k, was: i})
		}
	}
	return out
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

// sameSettings reports whether a loop running with a would run the same
// with b. Only what the loop uses counts: the route's retry policy and
// timeout and the destination itself; a changed path or secret is the
// ingress's business.
func sameSettings(a, b settings) bool {
	return reflect.DeepEqual(a.route.Retry, b.route.Retry) && a.route.Timeout == b.route.Timeout &&
		reflect.DeepEqual(a.dest, b.dest)
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
