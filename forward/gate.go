package forward

import (
	"net/http"
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
	BreakerHalfOpen BreakerState = "half-open" // a few probe attempts decide
)

// The breaker's cooldown starts at firstCooldown (or the configured
// cooldown, if shorter) and doubles each time the breaker opens again
// without having stayed closed for the configured cooldown, up to it: a
// short outage costs a second, a long one costs few attempts (as Envoy's
// outlier detection lengthens each ejection).
const firstCooldown = time.Second

// probes is how many attempts a half-open breaker lets through, one at a
// time: the first that succeeds closes it. One that fails in a way that
// says the whole backend is down (no answer, 502, 503, 504) opens it again
// at once, as one probe did before; one that fails in a way that may be its
// event's alone (500, another 5xx) lets the next probe go, so that one
// poison event cannot keep a working destination shut.
const probes = 3

// quietGaps is how many of the usual gaps between a destination's
// deliveries must pass without one, while its first attempts fail, before
// the breaker takes it for down; at least quietMin, because a backend that
// takes so many requests a second refuses the rest of each second once it
// has had them, and is not down.
const (
	quietGaps = 10
	quietMin  = time.Second
)

// contendedFor is how long after an attempt last waited for capacity the
// destination counts as busy: while webhooks wait behind them, its retries
// are then parked, whatever their wait, so that they come back behind the
// webhooks already waiting instead of ahead of them (JetStream hands a
// consumer's redeliveries out before its new messages).
const contendedFor = time.Second

// gate decides when one destination may start attempts and how many: it
// holds the Retry-After pause, the circuit breaker, the learned limit and
// the token bucket that enforces it under the configured rate. While it
// says no, the forwarder does not fetch, so no attempt is spent and nothing
// is lost.
type gate struct {
	now         func() time.Time
	concurrency int
	rate        policy.Rate
	breaker     policy.Breaker
	adaptive    bool
	limiter     *rate.Limiter // never nil; rate.Inf while nothing bounds the rate

	mu          sync.Mutex
	held        bool // paused by an operator until resumed
	pausedUntil time.Time
	state       BreakerState
	health      window
	limit       limit
	openUntil   time.Time     // end of the breaker's cooldown
	cooldown    time.Duration // the cooldown of the latest opening
	opens       int           // openings since the breaker last stayed closed for the configured cooldown
	closedAt    time.Time     // when the breaker last closed
	launched    int           // probes admitted in this half-open spell
	probing     int           // of which in flight
	refusals    int           // attempts in a row that reached no backend
	lastGood    time.Time     // the latest delivery
	sinceGood   int           // first attempts failed with a sign of a down backend since lastGood
	contended   time.Time     // when an attempt last waited for a free slot or a token
	credit      int           // rate tokens given back by messages that made no request
}

func newGate(d policy.Destination, now func() time.Time) *gate {
	g := &gate{now: now, concurrency: d.Concurrency, rate: d.Rate, breaker: d.Breaker,
		adaptive: d.SlowStart > 0, state: BreakerClosed, limit: newLimit(d.Rate.PerSecond)}
	g.limiter = rate.NewLimiter(rate.Inf, 1)
	g.setLimiter(now())
	return g
}

// setLimiter makes the token bucket enforce the limit as it is now; tokens
// given back under the earlier limit are dropped.
func (g *gate) setLimiter(now time.Time) {
	g.credit = 0
	r := g.limit.effective()
	switch {
	case r >= noLimit:
		g.limiter.SetLimitAt(now, rate.Inf)
	case r == g.rate.PerSecond:
		g.limiter.SetBurstAt(now, max(1, g.rate.Burst))
		g.limiter.SetLimitAt(now, rate.Limit(r))
	default:
		g.limiter.SetBurstAt(now, burst(r))
		g.limiter.SetLimitAt(now, rate.Limit(r))
	}
}

// admit says how many new attempts may start now, given inflight, and if
// none, how long to wait before asking again (0: until an attempt ends).
// probe is true when the attempts allowed are the breaker's probes; those
// not started must be given back with unprobe.
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
		g.state, g.launched, g.probing = BreakerHalfOpen, 0, 0
		fallthrough
	case BreakerHalfOpen:
		if g.probing > 0 || g.launched >= probes || inflight >= g.concurrency {
			return 0, 0, false
		}
		g.launched++
		g.probing++
		return 1, 0, true
	}
	if inflight >= g.concurrency {
		g.contended = now
		return 0, 0, false
	}
	return g.concurrency - inflight, 0, false
}

// refund gives back the rate token of a fetched message that made no
// request (an event the destination's filter refused), so that filtered
// events do not use up the rate.
func (g *gate) refund() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.credit = min(g.credit+1, g.limiter.Burst())
}

// takeCredit takes up to n of the tokens refund gave back, as many as the
// bucket has room for: with the tokens still in the bucket, which the
// caller may take next, they never exceed the burst. The rest is dropped,
// as a full bucket drops what it would refill.
func (g *gate) takeCredit(n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	room := max(0, int(float64(g.limiter.Burst())-g.limiter.TokensAt(g.now())))
	k := min(n, g.credit, room)
	g.credit = 0
	return k
}

// contend records that an attempt waits for a token of the rate limit.
func (g *gate) contend() {
	g.mu.Lock()
	g.contended = g.now()
	g.mu.Unlock()
}

// busy reports whether attempts waited for a free slot or a token within
// the last contendedFor: the destination's capacity is all in use, and
// what is attempted next takes it from something else.
func (g *gate) busy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.contended.IsZero() && g.now().Sub(g.contended) < contendedFor
}

// shut reports whether the gate admits no new attempts for now: the
// breaker is open, a Retry-After pause runs, or an operator holds it.
func (g *gate) shut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held || g.now().Before(g.pausedUntil) || g.state == BreakerOpen
}

// unprobe gives back n probes admitted but not started: no message was
// there to probe with, or it could not be sent.
func (g *gate) unprobe(n int) {
	g.mu.Lock()
	if g.state == BreakerHalfOpen {
		g.launched = max(0, g.launched-n)
		g.probing = max(0, g.probing-n)
	}
	g.mu.Unlock()
}

// overload reports whether o is a sign that the backend takes more than
// it can: 429, 503, 504 or a timeout.
func overload(o Outcome) bool {
	switch o.Status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return o.Status == 0 && o.Reason == "timeout"
}

// down reports whether o is a sign that the backend is down: a network
// error, a timeout, or a transient status other than 429 (which comes from
// a backend that is up and asks for less).
func down(o Outcome) bool {
	return o.Kind == Transient && o.Status != http.StatusTooManyRequests
}

// noBackend reports whether o reached no backend at all: a connection
// refused or reset, a DNS or TLS error. No event can cause that, so a
// streak of them opens the breaker without waiting for a share over the
// health window.
func noBackend(o Outcome) bool {
	return o.Kind == Transient && o.Status == 0 && o.Reason != "timeout"
}

// unreachable reports whether o says the whole backend is down, not just
// this event's handler: no answer at all, or a gateway's 502, 503 or 504.
func unreachable(o Outcome) bool {
	switch o.Status {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return o.Kind == Transient
	}
	return false
}

// answerOf is what o says to the learned limit.
func answerOf(o Outcome) answer {
	switch {
	case o.Kind == Delivered:
		return answerGood
	case overload(o):
		return answerOverload
	}
	return answerOther
}

// record feeds the outcome of one attempt, started at began, to the
// breaker, the learned limit and the pause; first is true for an event's
// first attempt. o.RetryAfter is
// the (already bounded) wait a 429 or 503 asked for. opened is true when
// this outcome opened the breaker.
func (g *gate) record(o Outcome, first bool, began time.Time) (opened bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if o.RetryAfter > 0 {
		if until := now.Add(o.RetryAfter); until.After(g.pausedUntil) {
			g.pausedUntil = until
		}
	}
	var t tally
	isDown := down(o)
	switch {
	case isDown && first:
		t.down, t.freshDown = 1, 1
	case isDown:
		t.down = 1
	case first:
		t.ok, t.freshOK = 1, 1
	default:
		t.ok = 1
	}
	if o.Kind == Delivered {
		t.good = 1
	}
	g.health.add(now, t)
	switch {
	case noBackend(o):
		g.refusals++
	case o.Status != 0:
		g.refusals = 0
	}
	switch {
	case o.Kind == Delivered:
		g.lastGood, g.sinceGood = now, 0
	case isDown && first:
		g.sinceGood++
	}
	if g.adaptive && g.limit.ended(began, now, answerOf(o), g.health.goodput(now)) {
		g.setLimiter(now)
	}
	switch {
	case g.state == BreakerHalfOpen && !isDown:
		g.state, g.closedAt, g.health, g.refusals, g.sinceGood = BreakerClosed, now, window{}, 0, 0
	case g.state == BreakerHalfOpen:
		g.probing = max(0, g.probing-1)
		if unreachable(o) || g.launched >= probes {
			g.open(now)
		}
	case g.state == BreakerClosed && isDown && g.isDown(now):
		// Only a backend that did not answer, or a gateway's answer for it,
		// teaches a limit for the recovery: 500s come from a backend that is
		// up, and its failing events (when nothing else is left to send).
		if g.adaptive && unreachable(o) {
			g.limit.learn(float64(g.health.sum(now).good) / healthWindow.Seconds())
			g.setLimiter(now)
		}
		g.open(now)
		return true
	}
	return false
}

// isDown reports whether a closed breaker should open: Failures attempts
// in a row that reached no backend; Failures first attempts failed since
// the latest delivery, which is quiet for ten times the usual gap between
// deliveries and at least a second (an outage has begun: the health window
// still remembers the deliveries before it); or the health window's share
// of failures.
func (g *gate) isDown(now time.Time) bool {
	f := g.breaker.Failures
	if f <= 0 {
		return false
	}
	sum := g.health.sum(now)
	quiet := healthWindow
	if sum.good > 0 {
		quiet = min(quiet, max(quietMin, quietGaps*g.health.span(now)/time.Duration(sum.good)))
	}
	return g.refusals >= f || g.sinceGood >= f && now.Sub(g.lastGood) >= quiet || sum.isDown(f)
}

// open opens the breaker for a cooldown that doubles with each opening
// since it last stayed closed for the configured cooldown.
func (g *gate) open(now time.Time) {
	if g.state == BreakerClosed && now.Sub(g.closedAt) >= g.breaker.Cooldown {
		g.opens = 0
	}
	first := min(firstCooldown, g.breaker.Cooldown)
	g.cooldown = g.breaker.Cooldown
	if g.opens < 32 {
		g.cooldown = min(g.breaker.Cooldown, first<<g.opens)
	}
	g.opens++
	g.state, g.openUntil = BreakerOpen, now.Add(g.cooldown)
}

// GateStatus is a snapshot of a destination's gate, for status reports.
type GateStatus struct {
	Breaker     BreakerState
	Failures    int           // attempts that said the backend is down, over the health window
	Attempts    int           // attempts over the health window
	Cooldown    time.Duration // the cooldown of the latest opening; zero while closed
	OpenUntil   time.Time     // when an open breaker lets probes through
	PausedUntil time.Time     // end of a Retry-After pause; zero if none
	// Limit is the learned limit in requests per second; 0 while none is
	// learned (only the configured concurrency and rate bound the load).
	Limit float64
	// SlowStart is true while the learned limit holds the destination
	// under its configured rate (or under no rate at all).
	SlowStart bool
	Held      bool // paused by an operator until resumed
}

func (g *gate) status() GateStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	sum := g.health.sum(now)
	s := GateStatus{Breaker: g.state, Failures: sum.down, Attempts: sum.ok + sum.down, Held: g.held}
	if g.state != BreakerClosed {
		s.OpenUntil, s.Cooldown = g.openUntil, g.cooldown
	}
	if now.Before(g.pausedUntil) {
		s.PausedUntil = g.pausedUntil
	}
	if g.limit.learned() {
		s.Limit = g.limit.rate
		s.SlowStart = g.limit.rate < g.limit.ceiling
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
