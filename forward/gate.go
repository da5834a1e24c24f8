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
	BreakerOpen     BreakerState = "open"      // down: one probe at a time, each after the probe interval
	BreakerHalfOpen BreakerState = "half-open" // a probe is in flight
)

// While a destination is down, one attempt at a time probes it, each a
// probe interval after the last: probeFirst while the probes reach no
// backend at all (a refused connection costs the backend nothing, and a
// backend that restarts should be seen within about a second), and for
// answered or timed-out probes probeFirst growing by probeGrowth of the
// time the destination has been down, up to the breaker's cooldown (a long
// outage costs the backend few requests, a short one a second).
const (
	probeFirst  = time.Second
	probeGrowth = 30 // the interval is the time down ÷ probeGrowth, at least probeFirst
)

// probeStreak is how many attempts in a row one event may make as the
// probe before the next probe takes another event (four: a new event's
// first three and the one after): a backend that fails each event's
// first few attempts (it waits for data another webhook
// brings, or a dependency recovers per request) answers a probe that
// retries the same event, where probes that each take a new event would
// never reach one that passes. After probeStreak the event goes back to
// its own schedule, so a single event's trouble cannot hold the probe.
const probeStreak = 4

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
//
// The breaker acts on one piece of evidence, a destination that delivers
// nothing: no delivery for a while (quietGaps) while first attempts fail,
// or attempts in a row that reach no backend. It never holds back a
// destination that delivers some events. While open it lets one probe
// through each probe interval (about a second; see probeFirst), and lets
// go at the first probe the backend answers with anything but a sign of
// being down: then recovered tells the forwarder to bring the
// destination's waiting retries forward, and the learned limit restarts
// slowly and doubles each second.
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
	downSince   time.Time     // when the breaker last opened
	nextProbe   time.Time     // when an open breaker lets the next probe through
	interval    time.Duration // the latest probe interval
	downRate    float64       // deliveries per second over the health window when the breaker opened
	streak      int           // attempts the current probe event has made in a row
	holding     bool          // a failed probe's event waits to probe again (reprobe)
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
// probe is true when the attempt allowed is the breaker's probe; one not
// started must be given back with unprobe.
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
	g.pausedUntil = time.Time{} // over: fetched need not read the clock for it
	switch g.state {
	case BreakerOpen:
		if g.holding {
			return 0, 0, false // the held probe goes next; its attempt's end wakes the loop
		}
		if now.Before(g.nextProbe) {
			return 0, g.nextProbe.Sub(now), false
		}
		if inflight > 0 {
			return 0, 0, false // one attempt at a time while down
		}
		g.state, g.streak = BreakerHalfOpen, 0
		return 1, 0, true
	case BreakerHalfOpen:
		return 0, 0, false
	}
	if inflight >= g.concurrency {
		g.contended = now
		return 0, 0, false
	}
	return g.concurrency - inflight, 0, false
}

// reprobe says whether the event of a failed probe, held since, may probe
// again now. If not yet, wait is how long until it may; a wait of 0 means
// it may not at all (the breaker closed meanwhile, or the gate no longer
// holds it): the caller settles it on its own schedule.
func (g *gate) reprobe() (ok bool, wait time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != BreakerOpen || !g.holding {
		g.holding = false
		return false, 0
	}
	now := g.now()
	switch {
	case g.held:
		g.holding = false
		return false, 0
	case now.Before(g.pausedUntil):
		return false, g.pausedUntil.Sub(now)
	case now.Before(g.nextProbe):
		return false, g.nextProbe.Sub(now)
	}
	g.state, g.holding = BreakerHalfOpen, false
	return true, 0
}

// unhold lets go of a failed probe's event that will not probe again: the
// next probe takes whatever the consumer hands out.
func (g *gate) unhold() {
	g.mu.Lock()
	g.holding = false
	g.mu.Unlock()
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

// fetched says whether a message fetched before the gate shut, and
// arrived since, may be attempted now: the gate is open; or the breaker is
// open and the next probe is due, so this message is it. If not, until is
// when to try it again, at the earliest: the next probe, the end of a
// Retry-After pause, or a second from now while an operator holds the
// destination.
func (g *gate) fetched() (ok bool, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held && g.pausedUntil.IsZero() && g.state == BreakerClosed {
		return true, time.Time{} // open: no clock needed
	}
	now := g.now()
	switch {
	case g.held:
		return false, now.Add(time.Second)
	case now.Before(g.pausedUntil):
		return false, g.pausedUntil
	case g.state == BreakerClosed:
		return true, now
	case g.state == BreakerOpen && !g.holding && !now.Before(g.nextProbe):
		g.state, g.streak = BreakerHalfOpen, 0
		return true, now
	}
	return false, latest(g.nextProbe, now.Add(g.interval))
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// unprobe gives back a probe admitted but not started: no message was
// there to probe with, or it could not be sent.
func (g *gate) unprobe() {
	g.mu.Lock()
	if g.state == BreakerHalfOpen {
		g.state = BreakerOpen
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

// verdict is what one attempt's outcome changed at the gate.
type verdict struct {
	opened    bool          // the breaker opened: the destination is down
	recovered bool          // the destination is back after being down: bring its waiting retries forward
	probe     bool          // a probe that found the destination still down
	again     bool          // a failed probe whose event may probe again (reprobe) instead of waiting its own schedule
	wait      time.Duration // with again: the wait before the next probe
	// victim is true for an overload answer (429, 503, 504, a timeout)
	// while the learned limit finds the backend overloaded: the load's
	// doing, not the event's, so its next attempt is due as if it were
	// its first retry, not after the backoff of all its attempts.
	victim bool
}

// record feeds the outcome of one attempt, started at began and ended at
// now (both read from the gate's clock), to the breaker, the learned limit
// and the pause; first is true for an event's first attempt. o.RetryAfter
// is the (already bounded) wait a 429 or 503 asked for.
func (g *gate) record(o Outcome, first bool, began, now time.Time) (v verdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if o.RetryAfter > 0 {
		if until := now.Add(o.RetryAfter); until.After(g.pausedUntil) {
			g.pausedUntil = until
		}
	}
	var t tally
	isDown := down(o)
	if isDown {
		t.down = 1
	} else {
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
	if g.adaptive && g.state == BreakerClosed {
		if g.limit.ended(began, now, answerOf(o), g.health.goodput(now)) {
			g.setLimiter(now)
		}
		v.victim = overload(o) && g.limit.overloadedNow(now)
	}
	switch {
	case g.state != BreakerClosed && !isDown:
		// A probe, or an attempt started before the breaker opened, that
		// the backend answered: it is back.
		g.recover(now)
		v.recovered = true
	case g.state == BreakerHalfOpen:
		v.probe = true
		g.state = BreakerOpen
		g.interval = g.probeInterval(o, now)
		g.nextProbe = now.Add(g.interval)
		g.streak++
		// Only a probe the backend did not answer, or a gateway answered
		// for, is tried again: a 500 is more likely its own event's.
		if unreachable(o) && g.streak < probeStreak {
			g.holding, v.again, v.wait = true, true, g.interval
		}
	case g.state == BreakerClosed && isDown && g.isDown(now):
		g.open(now)
		v.opened = true
	}
	return v
}

// isDown reports whether a closed breaker should open: Failures attempts
// in a row that reached no backend; or Failures first attempts failed since
// the latest delivery, which is quiet for ten times the usual gap between
// deliveries and at least a second. A destination that delivers is never
// down, whatever its share of failures: its failing events retry on their
// own schedule, and overload is the learned limit's business.
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
	return g.refusals >= f || g.sinceGood >= f && now.Sub(g.lastGood) >= quiet
}

// open opens the breaker: the first probe goes after probeFirst (or the
// cooldown, if shorter).
func (g *gate) open(now time.Time) {
	g.state, g.downSince, g.streak, g.holding = BreakerOpen, now, 0, false
	g.downRate = float64(g.health.sum(now).good) / g.health.span(now).Seconds()
	g.interval = min(probeFirst, g.breaker.Cooldown)
	g.nextProbe = now.Add(g.interval)
}

// probeInterval is the wait after failed probe o: probeFirst when it
// reached no backend; otherwise growing with the time the destination has
// been down, up to the cooldown.
func (g *gate) probeInterval(o Outcome, now time.Time) time.Duration {
	if noBackend(o) {
		return min(probeFirst, g.breaker.Cooldown)
	}
	return min(g.breaker.Cooldown, max(probeFirst, now.Sub(g.downSince)/probeGrowth))
}

// recover closes the breaker after an outage. Unless a rate is configured
// (the backend is then trusted to take it at once), the learned limit
// restarts from what the backend delivered before the outage and doubles
// each second, as TCP restarts after a timeout: the backlog goes out at
// the backend's own pace, which it may have lost in the outage.
func (g *gate) recover(now time.Time) {
	g.state, g.holding, g.streak = BreakerClosed, false, 0
	g.health, g.refusals, g.sinceGood = window{}, 0, 0
	if g.adaptive {
		g.limit.restart(now, now.Sub(g.downSince), g.downRate)
		g.setLimiter(now)
	}
}

// GateStatus is a snapshot of a destination's gate, for status reports.
type GateStatus struct {
	Breaker     BreakerState
	Failures    int           // attempts that said the backend is down, over the health window
	Attempts    int           // attempts over the health window
	Cooldown    time.Duration // the wait before the next probe of a down destination; zero while closed
	OpenUntil   time.Time     // when an open breaker lets the next probe through
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
		s.OpenUntil, s.Cooldown = g.nextProbe, g.interval
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

// gauges returns what the destination's gauges show of the gate: whether
// its breaker is open (or half-open), and its learned limit (0: none).
func (g *gate) gauges() (open bool, limit float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.limit.learned() {
		limit = g.limit.rate
	}
	return g.state != BreakerClosed, limit
}

// hold pauses (true) or resumes (false) the destination by an operator's
// hand; a paused destination admits no attempts.
func (g *gate) hold(on bool) {
	g.mu.Lock()
	g.held = on
	g.mu.Unlock()
}
