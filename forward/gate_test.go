package forward

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/jethook/jethook/policy"
)

// clock is a settable time for the pure gate logic.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestGate(c *clock) *gate {
	return newGate(policy.Destination{Concurrency: 10, Breaker: policy.Breaker{Failures: 3, Cooldown: 30 * time.Second},
		SlowStart: 10 * time.Second}, c.now)
}

var (
	ok       = Outcome{Kind: Delivered, Status: 200}
	refused  = Outcome{Kind: Transient, Err: errors.New("connection refused"), Reason: "network error"}
	err500   = Outcome{Kind: Transient, Status: 500, Reason: "status 500"}
	err503   = Outcome{Kind: Transient, Status: 503, Reason: "status 503"}
	rejected = Outcome{Kind: Permanent, Status: 422, Reason: "status 422"}
)

func TestTheBreakerOpensWhenNearlyEveryAttemptSaysTheBackendIsDown(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	if n, _, _ := g.admit(0); n != 10 {
		t.Fatalf("closed gate admits %d, want 10", n)
	}
	g.record(refused, true, c.now(), c.now())
	g.record(refused, true, c.now(), c.now())
	if n, _, _ := g.admit(0); n != 10 {
		t.Fatalf("two failures, under the minimum of 3, closed the gate: admits %d", n)
	}
	if !g.record(refused, true, c.now(), c.now()).opened {
		t.Fatal("three failures out of three did not open the breaker")
	}
	n, wait, _ := g.admit(0)
	if n != 0 || wait != time.Second {
		t.Fatalf("open breaker admits %d and waits %s, want 0 and the first probe's wait, 1s", n, wait)
	}
}

func TestRefusedConnectionsInARowOpenTheBreakerWhateverWasDeliveredBefore(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	for range 100 {
		g.record(ok, true, c.now(), c.now())
	}
	g.record(refused, true, c.now(), c.now())
	g.record(err500, false, c.now(), c.now()) // an answer ends the streak
	g.record(refused, true, c.now(), c.now())
	g.record(refused, true, c.now(), c.now())
	if s := g.status(); s.Breaker != BreakerClosed {
		t.Fatalf("breaker %s after two refusals in a row", s.Breaker)
	}
	if !g.record(refused, true, c.now(), c.now()).opened {
		t.Fatal("three refused connections in a row, after 100 deliveries, did not open the breaker")
	}
}

func TestAnOutageAfterDeliveriesOpensTheBreakerOnceDeliveriesStopForASecond(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	// 10 s of 100 deliveries a second: the usual gap is 10 ms.
	for range 1000 {
		g.record(ok, true, c.now(), c.now())
		c.advance(10 * time.Millisecond)
	}
	// Then every first attempt gets 503; the window still holds 1,000
	// deliveries, but none came for a second, a hundred gaps.
	opened := 0
	for i := range 200 {
		if g.record(err503, true, c.now(), c.now()).opened {
			opened = i + 1
			break
		}
		c.advance(10 * time.Millisecond)
	}
	if opened == 0 || opened > 101 {
		t.Fatalf("breaker opened at the %d-th 503 (0: never); want by the 101st, a second with no delivery", opened)
	}
}

func TestFlakyFirstAttemptsAmongDeliveriesDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	// Three first attempts in four get 503; their retries deliver.
	for i := range 2000 {
		if i%4 == 0 {
			g.record(ok, true, c.now(), c.now())
		} else {
			g.record(err503, true, c.now(), c.now())
			g.record(ok, false, c.now(), c.now())
		}
		c.advance(10 * time.Millisecond)
	}
	if s := g.status(); s.Breaker != BreakerClosed {
		t.Fatalf("breaker %s with 75 %% of first attempts failing and their retries delivered", s.Breaker)
	}
}

func TestFailingRetriesAloneNeverOpenTheBreaker(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	// New webhooks have stopped; only events that fail a few times (or
	// always) are left, retrying.
	for range 10 {
		for range 20 {
			g.record(err503, false, c.now(), c.now())
			g.record(err500, false, c.now(), c.now())
		}
		c.advance(time.Second)
	}
	if s := g.status(); s.Breaker != BreakerClosed {
		t.Fatalf("breaker %s after 10 s of failing retries alone", s.Breaker)
	}
}

func TestPoisonEventsAmongDeliveriesDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	// Each second: 7 events delivered, 3 first attempts and 20 retries of
	// poison events failing; retries outnumber deliveries, first attempts
	// say the destination is up.
	for range 30 {
		for i := range 30 {
			switch {
			case i < 7:
				g.record(ok, true, c.now(), c.now())
			case i < 10:
				g.record(err500, true, c.now(), c.now())
			default:
				g.record(err500, false, c.now(), c.now())
			}
		}
		c.advance(time.Second)
	}
	if s := g.status(); s.Breaker != BreakerClosed {
		t.Fatalf("breaker %s after 30 s of 30%% poison events", s.Breaker)
	}
}

func TestEveryFirstAttemptFailingDoesNotHoldBackADestinationWhoseRetriesDeliver(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	// Each event fails its first attempts and passes later: after the
	// first second, every first attempt fails and retries deliver.
	for range 2 {
		g.record(err503, true, c.now(), c.now())
	}
	for range 30 {
		for range 10 {
			g.record(err503, true, c.now(), c.now())
			g.record(ok, false, c.now(), c.now())
		}
		c.advance(time.Second)
	}
	if s := g.status(); s.Breaker != BreakerClosed {
		t.Fatalf("breaker %s although retries deliver every second", s.Breaker)
	}
}

// takeDown opens the test gate's breaker with refused connections.
func takeDown(t *testing.T, c *clock, g *gate) {
	t.Helper()
	for range 3 {
		g.record(refused, true, c.now(), c.now())
	}
	if s := g.status(); s.Breaker != BreakerOpen {
		t.Fatalf("breaker %s after three refused connections", s.Breaker)
	}
}

func TestProbesGoAboutEachSecondAndAnsweredOnesSlowDownWithTheOutageUpToTheCooldown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		probe Outcome
		after time.Duration // how long the destination has been down
		want  time.Duration
	}{
		{"refused: a second, however long it has been down", refused, time.Hour, time.Second},
		{"answered 503 early in an outage: a second", err503, 10 * time.Second, time.Second},
		{"answered 503 after a minute: a thirtieth of the time down", err503, time.Minute, 2 * time.Second},
		{"answered 503 after an hour: the cooldown", err503, time.Hour, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &clock{t: time.Unix(1_700_000_000, 0)}
			g := newTestGate(c)
			takeDown(t, c, g)
			c.advance(tc.after)
			if n, _, probe := g.admit(0); n != 1 || !probe {
				t.Fatalf("after %s down: admits %d (probe %v), want one probe", tc.after, n, probe)
			}
			if n, _, _ := g.admit(1); n != 0 {
				t.Fatal("a second attempt admitted while the probe is in flight")
			}
			v := g.record(tc.probe, false, c.now(), c.now())
			if v.opened || v.recovered {
				t.Fatalf("a failed probe: %+v", v)
			}
			g.unhold()
			if _, wait, _ := g.admit(0); wait != tc.want {
				t.Fatalf("next probe in %s, want %s", wait, tc.want)
			}
		})
	}
}

func TestAProbeTheBackendAnswersEndsTheOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		probe     Outcome
		recovered bool
		again     bool // the probe's event probes again
	}{
		{"a success closes it", ok, true, false},
		{"a 4xx answer closes it: the backend is up", rejected, true, false},
		{"a refused connection keeps it open; the event probes again", refused, false, true},
		{"a 503 keeps it open; the event probes again", err503, false, true},
		{"a 500 keeps it open; the next probe takes another event", err500, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &clock{t: time.Unix(1_700_000_000, 0)}
			g := newTestGate(c)
			takeDown(t, c, g)
			c.advance(time.Second)
			if n, _, probe := g.admit(0); n != 1 || !probe {
				t.Fatalf("admits %d (probe %v), want one probe", n, probe)
			}
			v := g.record(tc.probe, false, c.now(), c.now())
			if v.recovered != tc.recovered || v.again != tc.again {
				t.Fatalf("verdict %+v, want recovered %v, again %v", v, tc.recovered, tc.again)
			}
			want := BreakerOpen
			if tc.recovered {
				want = BreakerClosed
			}
			if s := g.status(); s.Breaker != want {
				t.Fatalf("breaker %s, want %s", s.Breaker, want)
			}
		})
	}
}

func TestAFailedProbesEventProbesAgainUpToTheStreakThenLetsAnotherEventProbe(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	takeDown(t, c, g)
	c.advance(time.Second)
	if n, _, _ := g.admit(0); n != 1 {
		t.Fatal("no probe admitted")
	}
	for i := 1; i < probeStreak; i++ {
		if v := g.record(err503, false, c.now(), c.now()); !v.again || v.wait != time.Second {
			t.Fatalf("probe %d failed: verdict %+v, want its event to probe again in 1s", i, v)
		}
		if n, _, _ := g.admit(0); n != 0 {
			t.Fatalf("probe %d failed: the loop was admitted a new probe while the event is held", i)
		}
		if ok, wait := g.reprobe(); ok || wait != time.Second {
			t.Fatalf("probe %d failed: reprobe %v in %s, want not yet, in 1s", i, ok, wait)
		}
		c.advance(time.Second)
		if ok, _ := g.reprobe(); !ok {
			t.Fatalf("probe %d failed: the held event may not probe again after the wait", i)
		}
	}
	if v := g.record(err503, false, c.now(), c.now()); v.again {
		t.Fatalf("the event probed %d times in a row and probes again", probeStreak+1)
	}
	c.advance(time.Second)
	if n, _, probe := g.admit(0); n != 1 || !probe {
		t.Fatalf("after the streak: admits %d (probe %v), want a probe with another event", n, probe)
	}
}

func TestAHeldProbeLetGoDuringAPauseFreesTheNextProbe(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	takeDown(t, c, g)
	c.advance(time.Second)
	g.admit(0)
	if v := g.record(err503, false, c.now(), c.now()); !v.again {
		t.Fatal("a failed 503 probe's event does not probe again")
	}
	g.hold(true)
	if ok, wait := g.reprobe(); ok || wait != 0 {
		t.Fatalf("paused by an operator: reprobe %v, %s; want to let go (0)", ok, wait)
	}
	g.hold(false)
	c.advance(time.Second)
	if n, _, probe := g.admit(0); n != 1 || !probe {
		t.Fatalf("after letting go: admits %d (probe %v), want the next probe", n, probe)
	}
}

func TestRecoveryRestartsTheLimitFromWhatTheBackendDeliveredAndDoublesIt(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	// 10 deliveries a second for 10 s, then an outage.
	for range 100 {
		g.record(ok, true, c.now(), c.now())
		c.advance(100 * time.Millisecond)
	}
	for range 20 {
		g.record(refused, true, c.now(), c.now())
	}
	if s := g.status(); s.Breaker != BreakerOpen || s.Limit != 0 {
		t.Fatalf("after the outage began: %+v, want open with no limit", s)
	}
	c.advance(time.Minute)
	g.admit(0)
	if v := g.record(ok, false, c.now(), c.now()); !v.recovered {
		t.Fatalf("a delivered probe: %+v, want recovered", v)
	}
	l := g.status().Limit
	if l < 9 || l > 11 {
		t.Fatalf("limit after the outage %g/s, want about the 10/s delivered before it", l)
	}
	for range 3 {
		for range int(l) {
			g.record(ok, false, c.now(), c.now())
		}
		c.advance(time.Second)
		g.record(ok, false, c.now(), c.now()) // ends the second
		l = g.status().Limit
	}
	if l < 70 || l > 90 {
		t.Fatalf("limit after three full seconds %g/s, want about 10 doubled three times", l)
	}
}

func TestAnOverloadAnswerWhileTheBackendShowsOverloadIsTheLoads(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	if v := g.record(err503, true, c.now(), c.now()); v.victim {
		t.Fatal("a lone 503 with no sign of overload counted as the load's")
	}
	for i := range 2 {
		if i > 0 {
			c.advance(time.Second)
		}
		for range 40 {
			g.record(ok, true, c.now(), c.now())
		}
		g.record(err503, true, c.now(), c.now())
		g.record(err503, true, c.now(), c.now())
	}
	if v := g.record(err503, true, c.now(), c.now()); !v.victim {
		t.Fatal("a 503 while the limit finds overload is not counted as the load's")
	}
	if v := g.record(err500, true, c.now(), c.now()); v.victim {
		t.Fatal("a 500 counted as the load's")
	}
}

func TestAProbeWithNothingToSendIsGivenBack(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	takeDown(t, c, g)
	c.advance(time.Minute)
	if n, _, probe := g.admit(0); n != 1 || !probe {
		t.Fatal("no probe admitted")
	}
	g.unprobe()
	if n, _, probe := g.admit(0); n != 1 || !probe {
		t.Fatal("the probe was not given back")
	}
}

func TestOverloadTeachesALimitThatGoodSecondsRaise(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	if s := g.status(); s.Limit != 0 || g.limiter.Limit() != rate.Inf {
		t.Fatalf("a new destination has a limit: %+v", s)
	}
	// Two seconds of 40 deliveries and a 503: overload.
	for i := range 2 {
		if l := g.status().Limit; l != 0 {
			t.Fatalf("after %d second(s) of overload: limit %g/s, want none yet", i, l)
		}
		if i > 0 {
			c.advance(time.Second)
		}
		for range 40 {
			g.record(ok, true, c.now(), c.now())
		}
		g.record(err503, true, c.now(), c.now())
	}
	if l := g.status().Limit; l != 36 {
		t.Fatalf("after two seconds of 40 deliveries and a 503: limit %g/s, want 0.9 × 40", l)
	}
	// A trial second confirms it; seconds that use the limit and see no
	// overload bring it back to the goodput it fell from.
	for range 3 {
		c.advance(time.Second)
		for range 36 {
			g.record(ok, true, c.now(), c.now())
		}
	}
	if l := g.status().Limit; l < 39 || l > 42 {
		t.Fatalf("after three good seconds: limit %g/s, want 40, the goodput before the 503", l)
	}
	if float64(g.limiter.Limit()) != g.status().Limit {
		t.Fatalf("the token bucket enforces %g/s, the limit is %g/s", g.limiter.Limit(), g.status().Limit)
	}
}

func TestTheConfiguredRateIsACeilingTheLimitNeverPasses(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newGate(policy.Destination{Concurrency: 10, Rate: policy.Rate{PerSecond: 20, Burst: 1},
		Breaker: policy.Breaker{Failures: 3, Cooldown: 30 * time.Second}, SlowStart: time.Second}, c.now)
	for range 20 {
		g.record(ok, true, c.now(), c.now())
	}
	g.record(err503, true, c.now(), c.now())
	for range 20 {
		c.advance(time.Second)
		for range 20 {
			g.record(ok, true, c.now(), c.now())
		}
	}
	if l := float64(g.limiter.Limit()); l != 20 {
		t.Fatalf("the token bucket enforces %g/s, want the configured 20/s", l)
	}
}

func TestRetryAfterPausesTheWholeDestination(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	o := err503
	o.RetryAfter = 20 * time.Second
	g.record(o, true, c.now(), c.now())
	n, wait, _ := g.admit(0)
	if n != 0 || wait != 20*time.Second {
		t.Fatalf("paused gate admits %d and waits %s, want 0 and 20s", n, wait)
	}
	o.RetryAfter = 5 * time.Second // a shorter Retry-After does not shorten the pause
	g.record(o, true, c.now(), c.now())
	if _, wait, _ := g.admit(0); wait != 20*time.Second {
		t.Fatalf("pause shortened to %s", wait)
	}
	c.advance(20 * time.Second)
	if n, _, _ := g.admit(0); n != 10 {
		t.Fatalf("right after the pause admits %d, want 10", n)
	}
}

func TestConcurrencyCountsAttemptsInFlight(t *testing.T) {
	t.Parallel()
	g := newTestGate(&clock{t: time.Unix(1_700_000_000, 0)})
	if n, _, _ := g.admit(7); n != 3 {
		t.Fatalf("with 7 in flight admits %d, want 3", n)
	}
	if n, wait, _ := g.admit(10); n != 0 || wait != 0 {
		t.Fatalf("full: admits %d, waits %s; want 0 until an attempt ends", n, wait)
	}
}

// A filtered event gives its rate token back, but never beyond the burst:
// the tokens in the bucket and those given back stay within it.
func TestARefusedEventsRateTokenIsGivenBackWithinTheBurst(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newGate(policy.Destination{Concurrency: 10, Rate: policy.Rate{PerSecond: 2, Burst: 2}}, c.now)
	c.advance(time.Second) // the bucket fills
	if !g.limiter.AllowN(c.now(), 2) {
		t.Fatal("a full bucket of 2 refused 2 tokens")
	}
	for range 3 {
		g.refund()
	}
	if got := g.takeCredit(5); got != 2 {
		t.Errorf("an empty bucket of 2 took back %d tokens; want 2", got)
	}
	if got := g.takeCredit(5); got != 0 {
		t.Errorf("credit taken twice: %d", got)
	}
	c.advance(time.Second) // the bucket is full again
	g.refund()
	if got := g.takeCredit(1); got != 0 {
		t.Errorf("a full bucket took back %d tokens; want none", got)
	}
}

func TestAProbeThatFindsTheDestinationDownDoesNotUseUpItsEventsAttempts(t *testing.T) {
	t.Parallel()
	r := policy.DefaultRetry()
	if !exhausted(r, r.MaxAttempts, time.Minute, time.Second, verdict{}) {
		t.Error("an ordinary attempt at max_attempts is not the last")
	}
	if exhausted(r, r.MaxAttempts, time.Minute, time.Second, verdict{probe: true}) {
		t.Error("a failed probe at max_attempts dead-letters its event")
	}
	if !exhausted(r, 3, r.MaxAge, time.Second, verdict{probe: true}) {
		t.Error("a failed probe past max_age is not the last")
	}
}

func TestAnOverloadAnswerThatWasTheLoadsDoesNotUseUpItsEventsAttempts(t *testing.T) {
	t.Parallel()
	r := policy.DefaultRetry()
	if exhausted(r, r.MaxAttempts, time.Minute, time.Second, verdict{victim: true}) {
		t.Error("an overload answer that was the load's, at max_attempts, dead-letters its event")
	}
	seen := map[time.Duration]bool{}
	for n := 1; n <= 10; n++ {
		d := victimDelay(r, "evt/app", n)
		if d < 0 || d > r.Base {
			t.Fatalf("attempt %d: wait %s, want the first step, 0 to %s", n, d, r.Base)
		}
		seen[d] = true
	}
	if len(seen) < 5 {
		t.Errorf("ten attempts' waits took %d values: the jitter is not drawn anew", len(seen))
	}
}
