package forward

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/jethook/jethook/policy"
)

// BreakerState is a destination's circuit breaker state.
type BreakerState string

const (
	BreakerClosed   BreakerState = "closed"    // attempts flow
	BreakerOpen     BreakerState = "open"      // no attempts until the cooldown ends
	BreakerHalfOpen BreakerState = "half-open" // one probe attempt decides
)

// slowStartFloor is the share of a destination's concurrency and rate it
// gets at the start of a slow start.
const slowStartFloor = 0.1

// gate decides when one destination may start attempts and how many: it
// holds the Retry-After pause, the circuit breaker and slow start, and the
// token bucket of the destination's rate. While it says no, the forwarder
// does not fetch, so no attempt is spent and nothing is lost.
type gate struct {
	now         func() time.Time
	concurrency int
	rate        policy.Rate
	breaker     policy.Breaker
	slowStart   time.Duration
	limiter     *rate.Limiter // nil when the rate is unlimited

	mu          sync.Mutex
	held        bool // paused by an operator until resumed
	pausedUntil time.Time
	state       BreakerState
	failures    int       // consecutive transient failures
	openUntil   time.Time // end of the breaker's cooldown
	probing     bool      // the half-open probe is in flight
	rampStart   time.Time // start of the current slow start; zero if none
}

func newGate(d policy.Destination, now func() time.Time) *gate {
	g := &gate{now: now, concurrency: d.Concurrency, rate: d.Rate, breaker: d.Breaker,
		slowStart: d.SlowStart, state: BreakerClosed}
	if d.Rate.PerSecond > 0 {
		g.limiter = rate.NewLimiter(rate.Limit(d.Rate.PerSecond), d.Rate.Burst)
	}
	return g
}

// admit says how many new attempts may start now, given inflight, and if
// none, how long to wait before asking again (0: until an attempt ends).
// probe is true when the one allowed attempt is the breaker's probe.
func (g *gate) admit(inflight int) (n int, wait time.Duration, probe bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if g.held {
		return 0, 0, false // Resume wakes the loop
	}
	if now.Before(g.pausedUntil) {
		return 0, g.pausedUntil.Sub(now), false
	}
	switch g.state {
	case BreakerOpen:
		if now.Before(g.openUntil) {
			return 0, g.openUntil.Sub(now), false
		}
		g.state = BreakerHalfOpen
		fallthrough
	case BreakerHalfOpen:
		if g.probing || inflight > 0 {
			return 0, 0, false
		}
		g.probing = true
		return 1, 0, true
	}
	f := g.rampShare(now)
	if g.limiter != nil {
		g.limiter.SetLimitAt(now, rate.Limit(math.Max(g.rate.PerSecond*f, 0.1)))
	}
	limit := max(1, int(math.Ceil(float64(g.concurrency)*f)))
	if inflight >= limit {
		return 0, 0, false
	}
	return limit - inflight, 0, false
}

// rampShare is the share of the configured limits slow start allows now.
func (g *gate) rampShare(now time.Time) float64 {
	if g.rampStart.IsZero() || g.slowStart <= 0 {
		return 1
	}
	elapsed := now.Sub(g.rampStart)
	if elapsed >= g.slowStart {
		g.rampStart = time.Time{}
		return 1
	}
	if elapsed < 0 {
		elapsed = 0
	}
	return slowStartFloor + (1-slowStartFloor)*float64(elapsed)/float64(g.slowStart)
}

// shut reports whether the gate admits no new attempts for now: the
// breaker is open, a Retry-After pause runs, or an operator holds it.
func (g *gate) shut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held || g.now().Before(g.pausedUntil) || g.state == BreakerOpen
}

// unprobe gives the probe back when no message was there to probe with.
func (g *gate) unprobe() {
	g.mu.Lock()
	g.probing = false
	g.mu.Unlock()
}

// record feeds one attempt's outcome to the breaker and the pause.
// retryAfter is the (already bounded) wait a 429 or 503 asked for.
func (g *gate) record(k Kind, retryAfter time.Duration) (opened bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if retryAfter > 0 {
		if until := now.Add(retryAfter); until.After(g.pausedUntil) {
			g.pausedUntil = until
			g.rampStart = until // ramp up once the pause ends
		}
	}
	switch k {
	case Delivered, Permanent: // the backend answered: it is up
		g.failures = 0
		if g.state == BreakerHalfOpen {
			g.state, g.probing = BreakerClosed, false
			g.rampStart = now
		}
	case Transient:
		g.failures++
		switch {
		case g.state == BreakerHalfOpen:
			g.state, g.probing, g.openUntil = BreakerOpen, false, now.Add(g.breaker.Cooldown)
		case g.state == BreakerClosed && g.breaker.Failures > 0 && g.failures >= g.breaker.Failures:
			g.state, g.openUntil = BreakerOpen, now.Add(g.breaker.Cooldown)
			return true
		}
	}
	return false
}

// GateStatus is a snapshot of a destination's gate, for status reports.
type GateStatus struct {
	Breaker     BreakerState
	Failures    int       // consecutive transient failures
	OpenUntil   time.Time // when an open breaker lets a probe through
	PausedUntil time.Time // end of a Retry-After pause; zero if none
	SlowStart   bool      // ramping back up after a pause or an outage
	Held        bool      // paused by an operator until resumed
}

func (g *gate) status() GateStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := GateStatus{Breaker: g.state, Failures: g.failures, SlowStart: !g.rampStart.IsZero(), Held: g.held}
	if g.state != BreakerClosed {
		s.OpenUntil = g.openUntil
	}
	if g.now().Before(g.pausedUntil) {
		s.PausedUntil = g.pausedUntil
	}
	return s
}

// hold pauses (true) or resumes (false) the destination by an operator's
// hand; a paused destination admits no attempts.
func (g *gate) hold(on bool) {
	g.mu.Lock()
	g.held = on
	g.mu.Unlock()
}
