package forward

import (
	"math"
	"time"
)

// The learned limit is a rate, requests per second, kept by additive
// increase and multiplicative decrease (AIMD, as TCP's congestion
// avoidance): it falls to a share of what the backend answered in the last
// second when the backend shows overload, and climbs a step each second in
// which the destination used most of it and the backend showed none. A
// rate, not a count in flight, because a backend's capacity is often a
// rate (a rate limiter, a queue drained by workers) that a fast backend
// reaches with a single request in flight.
const (
	limitDecrease = 0.9             // share of the goodput the first decrease keeps
	limitBackoff  = 0.8             // share of the limit a later decrease keeps, at least the goodput
	limitIncrease = 0.05            // share of the limit one good second adds…
	limitStep     = 0.5             // …but at least this many requests per second
	limitFloor    = 1.0             // the lowest limit, requests per second
	limitUsed     = 0.8             // share of the limit a second must use to earn an increase
	limitHold     = time.Second     // at most one decrease per limitHold, as TCP once per round trip
	limitTick     = time.Second     // how often an increase is considered
	limitBurstDiv = 20              // the bucket holds limit/limitBurstDiv requests, at least 1
	noLimit       = math.MaxFloat64 // no limit learned yet
)

// limit is a destination's learned rate. Until the backend first shows
// overload, or its breaker first opens, nothing is learned and only the
// configured concurrency and rate bound the load.
type limit struct {
	rate         float64 // requests per second; noLimit until learned
	ceiling      float64 // the configured rate; noLimit if none
	lastDecrease time.Time
	tickStart    time.Time
	done         int  // attempts ended since tickStart
	overloaded   bool // the backend showed overload since tickStart
}

func newLimit(ceiling float64) limit {
	if ceiling <= 0 {
		ceiling = noLimit
	}
	return limit{rate: noLimit, ceiling: ceiling}
}

// learned reports whether a limit has been learned.
func (l *limit) learned() bool { return l.rate < noLimit }

// effective is the rate the token bucket enforces: the lower of the learned
// limit and the ceiling.
func (l *limit) effective() float64 { return math.Min(l.rate, l.ceiling) }

// ended counts one attempt that ended at now; overload is true when its
// answer was a sign of overload (429, 503, 504, a timeout). goodput is the
// destination's answers per second over the last second. It reports
// whether the limit changed.
func (l *limit) ended(now time.Time, overload bool, goodput float64) bool {
	changed := l.tick(now)
	l.done++
	if !overload {
		return changed
	}
	l.overloaded = true
	if l.learned() && now.Sub(l.lastDecrease) < limitHold {
		return changed
	}
	l.lastDecrease = now
	if !l.learned() {
		l.rate = math.Max(limitFloor, limitDecrease*goodput)
		return true
	}
	l.rate = math.Max(limitFloor, math.Max(limitBackoff*l.rate, math.Min(goodput, l.rate)))
	return true
}

// tick closes the second that began at tickStart, if it has passed: one
// without overload that used most of the limit raises it a step.
func (l *limit) tick(now time.Time) bool {
	if l.tickStart.IsZero() {
		l.tickStart = now
		return false
	}
	elapsed := now.Sub(l.tickStart)
	if elapsed < limitTick {
		return false
	}
	used := float64(l.done) >= limitUsed*l.rate*elapsed.Seconds()
	grow := l.learned() && !l.overloaded && used && l.rate < l.ceiling
	if grow {
		l.rate = math.Min(l.ceiling, l.rate+math.Max(limitStep, limitIncrease*l.rate))
	}
	l.tickStart, l.done, l.overloaded = now, 0, false
	return grow
}

// learn sets a limit from goodput when none is learned yet: a breaker that
// opens calls it, so that the recovery starts from what the backend took
// before, not from the whole ceiling.
func (l *limit) learn(goodput float64) {
	if !l.learned() && l.ceiling >= noLimit {
		l.rate = math.Max(limitFloor, goodput)
	}
}

// burst is the token bucket's depth for rate r.
func burst(r float64) int {
	if r >= noLimit {
		return 1
	}
	return max(1, int(math.Min(r/limitBurstDiv, math.MaxInt32)))
}
