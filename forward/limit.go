package forward

import (
	"math"
	"time"
)

// The learned limit is a rate, requests per second, kept as TCP keeps its
// congestion window: slow start (doubling each second) up to a threshold,
// the rate the backend last delivered at, then additive increase; a
// multiplicative decrease to what the backend delivered (its goodput) when
// it shows overload. A rate, not a count in flight, because a backend's
// capacity is often a rate (a rate limiter, a queue drained by workers)
// that a fast backend reaches with a single request in flight.
//
// Only overload lowers it: 429s, 503s, 504s or timeouts while the backend
// still delivers other events, for two seconds in a row. A backend that
// delivers nothing is down, which is the breaker's business: the limit
// keeps its value through an outage, and the recovery starts from it.
// Failures that are no sign of overload (connection refused, a poison
// event's 500) never lower it.
//
// Rising latency is overload too: a second whose deliveries took on
// average twice the least the backend has shown lately, and at least
// latencySlack more, lowers the limit as a 503 would (timeouts, where a
// slowing backend ends, already count).
//
// Some backends answer 503 to a share of events whatever the load (each
// event fails a few times, then passes). Each decrease is a trial: if, at
// the lower rate, the backend still shows overload while it delivers,
// the overload answers do not come from the load; the limit goes back to
// where it was and their share becomes the backend's baseline, which later
// answers must exceed (by more than chance) to count as overload.
const (
	limitDecrease = 0.9             // share of the goodput a decrease keeps
	limitIncrease = 0.05            // share of the limit one good second adds above the threshold…
	limitStep     = 0.5             // …but at least this many requests per second
	limitFloor    = 1.0             // the lowest limit, requests per second
	limitStart    = 10.0            // where the limit restarts after an outage, requests per second, at least
	limitUsed     = 0.8             // share of the limit a second must use to earn an increase
	limitHold     = time.Second     // at most one decrease per limitHold, as TCP once per round trip
	limitTick     = time.Second     // how often an increase is considered
	limitBurstDiv = 20              // the bucket holds limit/limitBurstDiv requests, at least 1
	noLimit       = math.MaxFloat64 // no limit learned yet
)

// The overload test: a second's (or a partial second's) answers show
// overload when at least overloadMin of them are 429, 503, 504 or
// timeouts, and their share exceeds the baseline by overloadMargin plus
// two standard errors of the share at the baseline.
const (
	overloadMin    = 1
	overloadMargin = 0.02
)

// A trial judges the attempts started from trialSettle after the decrease
// (a backend that counts its load per second still refuses, for the rest
// of that second, what the higher rate sent it): after a second of them,
// once it has trialMin attempts, or after trialMax whatever it has.
const (
	trialSettle = time.Second
	trialMin    = 5
	trialMax    = 3 * time.Second
)

// outageRun is how many overload answers in a row make a run whose tail
// is not counted: once a delivery ends the run, an overload answer read
// after it to an attempt sent before it is the run's, answered before
// the backend delivered again. A short outage fits in two of the limit's
// seconds, the one it begins in (deliveries, then 503s) and the one it
// ends in (503s, then deliveries); with concurrency, answers are read a
// little out of order, and a 503 read after the first delivery made the
// second look overloaded too, which cut the limit to what the backend
// delivered before the outage began.
const outageRun = 10

// trialHalved is the least number of answers in which a trial's share of
// overload answers halving confirms a decrease that left some: with fewer,
// only their absence does. A handful of answers halve their share by
// chance, and events that fail a few attempts each on their own (right
// after an outage, all of them retries) lower it as they reach their
// passing attempt, whatever the rate.
const trialHalved = 20

// baselineDecay is the share of the gap to a lower observed share of
// overload answers the baseline gives up each second.
const baselineDecay = 0.1

// overloadMemory is how long after a second showed overload an overload
// answer still counts as the load's doing (see overloadedNow).
const overloadMemory = 2 * time.Second

// Latency: a second is slow when its deliveries' mean latency is over
// latencyRise times the floor and over it by latencySlack, which keeps a
// fast backend's jitter (a pause of the collector, a busy machine) from
// counting. The floor is the least mean of a second seen, which drifts up
// by latencyDrift of the gap each second so that a backend that became
// slower for good is accepted as such.
const (
	latencyRise  = 2.0
	latencySlack = 100 * time.Millisecond
	latencyDrift = 0.01
)

// answer is what one attempt says to the learned limit.
type answer int

const (
	answerOther    answer = iota // neither delivered nor overload (another 4xx, a 500, no connection)
	answerGood                   // delivered
	answerOverload               // 429, 503, 504 or a timeout
)

// counts are the attempts that ended in one second, and the total
// latency of its deliveries.
type counts struct {
	sent, good, over int
	latency          time.Duration
	endedGood        bool // the latest answer was a delivery
}

func (c *counts) add(a answer, latency time.Duration) {
	c.sent++
	c.endedGood = a == answerGood
	switch a {
	case answerGood:
		c.good++
		c.latency += latency
	case answerOverload:
		c.over++
	}
}

// meanLatency is the mean latency of the deliveries; 0 if there are too
// few to judge by.
func (c counts) meanLatency() time.Duration {
	if c.good < trialMin {
		return 0
	}
	return c.latency / time.Duration(c.good)
}

// share is the share of overload answers.
func (c counts) share() float64 {
	if c.sent == 0 {
		return 0
	}
	return float64(c.over) / float64(c.sent)
}

// limit is a destination's learned rate. Until the backend first shows
// overload, or its breaker first opens, nothing is learned and only the
// configured concurrency and rate bound the load.
type limit struct {
	rate     float64       // requests per second; noLimit until learned
	ceiling  float64       // the configured rate; noLimit if none
	ssthresh float64       // slow start doubles the rate up to here; additive increase above
	baseline float64       // share of overload answers the backend gives whatever the load
	floor    time.Duration // the least mean latency of a second lately; 0 until one is seen
	lastCut  time.Time
	// refused counts the overload answers read in a row; resumed is when
	// a delivery last ended a run of outageRun or more (see outageRun).
	refused  int
	resumed  time.Time
	seen     time.Time // when a second last showed overload while the backend delivered
	climbing bool      // restarted after an outage, and neither cut nor held back by a lack of work since
	// last is the second before the current one. A decrease needs it to
	// have shown overload while the backend delivered, as the current one
	// does, so that the second in which an outage begins (deliveries, then
	// 503s) or ends (503s, then deliveries) is not taken for overload.
	last        counts
	lastSeconds float64   // its length
	start       time.Time // start of the second being counted
	cur         counts    // attempts ended since start

	// A trial runs from a decrease until its verdict, judging attempts
	// started from trialStart on; before and beforeThresh restore the
	// limit if the decrease was not needed.
	trial        bool
	trialStart   time.Time
	settling     counts // attempts that ended in the trial but started before trialStart
	before       float64
	beforeThresh float64
	beforeShare  float64 // the share of overload answers of the second before the decrease
}

func newLimit(ceiling float64) limit {
	if ceiling <= 0 {
		ceiling = noLimit
	}
	return limit{rate: noLimit, ceiling: ceiling, ssthresh: noLimit}
}

// learned reports whether a limit has been learned.
func (l *limit) learned() bool { return l.rate < noLimit }

// effective is the rate the token bucket enforces: the lower of the learned
// limit and the ceiling.
func (l *limit) effective() float64 { return math.Min(l.rate, l.ceiling) }

// overloaded reports whether c shows overload beyond the baseline.
func (l *limit) overloaded(c counts) bool {
	if c.over < overloadMin {
		return false
	}
	b := l.baseline
	noise := 2 * math.Sqrt(b*(1-b)/float64(c.sent))
	return c.share() > b+overloadMargin+noise
}

// slow reports whether c's deliveries took far longer than the floor.
func (l *limit) slow(c counts) bool {
	m := c.meanLatency()
	return l.floor > 0 && m > time.Duration(latencyRise*float64(l.floor)) && m-l.floor > latencySlack
}

// ended counts one attempt that started at began and ended at now with
// answer a. goodput is the destination's deliveries per second over the
// last second. It reports whether the limit changed.
func (l *limit) ended(began, now time.Time, a answer, goodput float64) bool {
	changed := l.tick(now)
	if a == answerOverload && began.Before(l.resumed) {
		return changed // the tail of a run of refusals that a delivery ended
	}
	switch a {
	case answerOverload:
		l.refused++
	case answerGood:
		if l.refused >= outageRun {
			l.resumed = now
		}
		l.refused = 0
	}
	if l.trial && began.Before(l.trialStart) {
		l.settling.add(a, now.Sub(began)) // not judged by: sent before the lower rate took hold
		return changed
	}
	l.cur.add(a, now.Sub(began))
	if l.flood(a) && goodput > 0 {
		l.cut(now, goodput)
		return true
	}
	// A delivery may complete the evidence too: a backend that counts its
	// load per second delivers first and refuses the rest, and when
	// jethook's seconds begin where its refusals do, each of them is
	// refusals, then deliveries. The last second must then have ended
	// with a delivery as well: one that ended with refusals is the start
	// of an outage, whose end looks the same.
	//
	// Climbing back after an outage, the rate has not yet found where the
	// backend refuses: the first second that shows overload is enough, as
	// a loss ends TCP's slow start.
	evidence := a == answerOverload || a == answerGood && l.last.endedGood
	if !evidence || l.trial || !l.climbing && !l.wasOverloaded() || goodput <= 0 || l.cur.good == 0 || !l.overloaded(l.cur) {
		return changed
	}
	if l.learned() && now.Sub(l.lastCut) < limitHold {
		return changed
	}
	if l.climbing {
		l.endClimb(now, goodput)
		return true
	}
	l.cut(now, math.Min(goodput, float64(l.last.good)/l.lastSeconds))
	return true
}

// A flood is overload the current second shows on its own beyond doubt,
// before any limit is learned: at least floodMin answers, deliveries
// among them, and a share of overload answers floodShare above the
// baseline. A backlog sent at full concurrency to a fast backend that
// refuses what it cannot take gets thousands of refusals in the second
// the usual evidence needs.
const (
	floodMin   = 200
	floodShare = 0.8
)

// flood reports whether a, just counted, makes the current second a
// flood: see floodMin. The second before must have ended with a delivery,
// or held nothing: one that ended with refusals may be an outage that
// this second ends. A flood at an outage's start is undone by the trial,
// as the backend then delivers nothing.
func (l *limit) flood(a answer) bool {
	return !l.learned() && a == answerOverload && !l.trial && l.cur.sent >= floodMin && l.cur.good > 0 &&
		l.cur.share() >= l.baseline+floodShare && (l.last.sent == 0 || l.last.endedGood)
}

// wasOverloaded reports whether the last second showed overload while the
// backend delivered.
func (l *limit) wasOverloaded() bool {
	return l.lastSeconds > 0 && l.last.good > 0 && l.overloaded(l.last)
}

// overloadedNow reports whether an overload answer now is the load's
// doing: a second that ended within the last overloadMemory showed
// overload while the backend delivered, or the current one does so far; a
// decrease is on trial; the limit is above where the backend last
// delivered; or it is climbing back after an outage and has not yet found
// where the backend refuses.
func (l *limit) overloadedNow(now time.Time) bool {
	if l.cur.good > 0 && l.overloaded(l.cur) {
		l.seen = now
	}
	return l.climbing || l.trial || l.probing() || !l.seen.IsZero() && now.Sub(l.seen) <= overloadMemory
}

// probing reports whether the limit is above where the backend last
// delivered, looking for more: an overload answer there is the probe's.
func (l *limit) probing() bool { return l.learned() && l.rate > l.ssthresh }

// cut lowers the limit to what the backend delivers (the lower of the
// last second's deliveries and goodput), and starts a trial.
func (l *limit) cut(now time.Time, goodput float64) {
	l.climbing, l.seen = false, now
	l.trial, l.trialStart = true, now.Add(trialSettle)
	l.before, l.beforeThresh = l.rate, l.ssthresh
	l.ssthresh = math.Max(limitFloor, goodput)
	l.rate = math.Max(limitFloor, limitDecrease*math.Min(l.rate, goodput))
	l.lastCut, l.beforeShare = now, math.Max(l.last.share(), l.cur.share())
	l.start, l.cur, l.settling, l.last, l.lastSeconds = l.trialStart, counts{}, counts{}, counts{}, 0
}

// endClimb ends the climb after an outage at its first overload, as a
// loss ends TCP's slow start: the rate falls back to half, where the last
// second had no overload, or to 90 % of what the backend delivered over
// the last second (goodput) or so far in this one, if more, and grows
// additively from there. There is no trial: the backend has just
// delivered at that rate; if it is still too high, overload cuts it as
// usual.
func (l *limit) endClimb(now time.Time, goodput float64) {
	l.climbing, l.seen, l.lastCut = false, now, now
	l.rate = math.Max(limitFloor, math.Max(l.rate/2, limitDecrease*math.Max(goodput, float64(l.cur.good))))
	l.ssthresh = l.rate
	l.start, l.cur, l.last, l.lastSeconds = now, counts{}, counts{}, 0
}

// tick closes the second that began at start, if it has passed.
func (l *limit) tick(now time.Time) bool {
	if l.start.IsZero() {
		l.start = now
		return false
	}
	elapsed := now.Sub(l.start)
	if elapsed < limitTick {
		return false
	}
	if l.trial {
		if l.cur.sent < trialMin && now.Sub(l.trialStart) < trialMax {
			return false
		}
		changed := l.verdict()
		l.start, l.cur = now, counts{}
		return changed
	}
	c := l.cur
	l.start, l.cur, l.last, l.lastSeconds = now, counts{}, c, elapsed.Seconds()
	if c.good > 0 && l.overloaded(c) {
		l.seen = now
	}
	if c.sent >= trialMin && c.share() < l.baseline {
		l.baseline -= baselineDecay * (l.baseline - c.share())
	}
	if l.slow(c) && now.Sub(l.lastCut) >= limitHold {
		l.cut(now, float64(c.good)/elapsed.Seconds())
		l.beforeShare = c.share()
		return true
	}
	if m := c.meanLatency(); m > 0 && (l.floor == 0 || m < l.floor) {
		l.floor = m
	} else if m > 0 {
		l.floor += time.Duration(latencyDrift * float64(m-l.floor))
	}
	used := float64(c.sent) >= limitUsed*l.rate*elapsed.Seconds()
	if !used {
		l.climbing = false
	}
	if !l.learned() || l.rate >= l.ceiling || !used || c.good == 0 || l.overloaded(c) {
		return false
	}
	if l.rate < l.ssthresh {
		l.rate = math.Min(l.ssthresh, 2*l.rate)
	} else {
		l.rate = math.Min(l.ceiling, l.rate+math.Max(limitStep, limitIncrease*l.rate))
	}
	return true
}

// verdict ends a trial. If the backend delivered nothing in the trial, or
// in trialMin attempts or more while the lower rate took hold, it went
// down (the breaker's business): the limit goes back to where it was.
// Otherwise the decrease stands if at the lower rate the backend shows no
// overload, or half the share of overload answers it showed before in
// trialHalved answers or more (or was sent nothing to judge by); else the
// limit goes back and that share becomes the baseline, as a latency that
// stayed high becomes the floor.
func (l *limit) verdict() bool {
	l.trial = false
	c := l.cur
	eased := !l.overloaded(c) || c.sent >= trialHalved && c.share() < l.beforeShare/2
	switch {
	case l.settling.sent >= trialMin && l.settling.good == 0 || c.sent > 0 && c.good == 0:
		// down: undone, nothing learned
	case c.sent == 0 || eased && !l.slow(c):
		return false
	default:
		if !eased {
			l.baseline = math.Max(l.baseline, math.Min(0.95, c.share()))
		}
		if l.slow(c) {
			l.floor = c.meanLatency()
		}
	}
	l.rate, l.ssthresh = l.before, l.beforeThresh
	return true
}

// coldAfter is how long an outage must last for a backend that never
// showed what it takes to be restarted in slow start: long enough to be
// more than a deploy or a few failing attempts, so that the backend may
// have come back cold and a backlog has piled up.
const coldAfter = 30 * time.Second

// restart begins the recovery from an outage that lasted down, when no
// rate is configured: the backend's capacity after the outage is unknown
// (it may have restarted cold), so the limit starts at limitStart or at
// what the backend delivered before the outage (goodput), if more, and
// slow start doubles it each second up to the threshold learned before,
// or without bound if none was: a backlog of thousands reaches a fast
// backend's pace within seconds, and the first second that shows
// overload cuts it. A backend that never showed what it takes (no limit
// learned, nothing delivered before the outage) and was down for less
// than coldAfter gets its backlog at concurrency, and its first overload
// answers teach the limit. A trial running when the outage began is
// undone.
func (l *limit) restart(now time.Time, down time.Duration, goodput float64) {
	if l.ceiling < noLimit {
		return
	}
	if l.trial {
		l.trial, l.rate, l.ssthresh = false, l.before, l.beforeThresh
	}
	// The seconds of the outage say nothing about the recovery: the first
	// second after it may show a flood on its own.
	l.start, l.cur, l.settling, l.last, l.lastSeconds = now, counts{}, counts{}, counts{}, 0
	if !l.learned() && goodput <= 0 && down < coldAfter {
		return
	}
	if !l.learned() {
		l.ssthresh = noLimit
	}
	l.rate, l.climbing = math.Min(l.ssthresh, math.Max(limitStart, goodput)), true
}

// burst is the token bucket's depth for rate r.
func burst(r float64) int {
	if r >= noLimit {
		return 1
	}
	return max(1, int(math.Min(r/limitBurstDiv, math.MaxInt32)))
}
