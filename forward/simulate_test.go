package forward

import (
	"testing"
	"time"

	"github.com/jethook/jethook/policy"
)

func simRetry(k policy.Backoff, j policy.Jitter) policy.Retry {
	r := policy.DefaultRetry()
	r.Kind, r.Jitter, r.Interval = k, j, 30*time.Second
	return r
}

// The seed's second scenario: 500 deliveries fail at the same moment.
var herd = Scenario{Burst: 500, Outage: 30 * time.Second, Capacity: 50}

func TestWithoutJitterOrLimitsFailedDeliveriesRetryInOneStampede(t *testing.T) {
	t.Parallel()
	unlimited := policy.Destination{Name: "app", Concurrency: 1 << 20}
	res := Simulate(herd, simRetry(policy.BackoffFixed, policy.JitterNone), unlimited)
	if res.PeakRPS != 500 {
		t.Fatalf("peak %d req/s, want all 500 retries in the same second", res.PeakRPS)
	}
	jittered := Simulate(herd, simRetry(policy.BackoffFixed, policy.JitterFull), unlimited)
	if jittered.Wasted >= res.Wasted {
		t.Fatalf("full jitter wasted %d attempts, no jitter %d: jitter should spread the herd", jittered.Wasted, res.Wasted)
	}
}

func TestARateLimitKeepsTheRecoveringBackendUnderItsCapacity(t *testing.T) {
	t.Parallel()
	d := policy.Destination{Name: "app", Concurrency: 8, Rate: policy.Rate{PerSecond: 40, Burst: 2},
		Breaker: policy.Breaker{Failures: 5, Cooldown: 10 * time.Second}, SlowStart: 10 * time.Second}
	for _, j := range []policy.Jitter{policy.JitterNone, policy.JitterFull, policy.JitterEqual, policy.JitterDecorrelated} {
		res := Simulate(herd, simRetry(policy.BackoffExponential, j), d)
		if res.PeakRPS > 42 {
			t.Errorf("%s jitter: peak %d req/s over a 40/s rate with burst 2", j, res.PeakRPS)
		}
		if res.Delivered != 500 || res.DeadLettered != 0 || res.Left != 0 {
			t.Errorf("%s jitter: %+v, want all 500 delivered", j, res)
		}
		// The breaker stops attempts during the outage: the failures that
		// opened it and a probe a second, not 500 × retries.
		if res.Wasted > 8+30+2 {
			t.Errorf("%s jitter: %d attempts wasted during the outage", j, res.Wasted)
		}
	}
}

func TestTheSimulationIsReproducible(t *testing.T) {
	t.Parallel()
	sc := Scenario{Arrival: 100.0 / 60, Events: 600, OutageStart: time.Minute, Outage: 3 * time.Minute, Capacity: 10}
	d := policy.Destination{Name: "app", Concurrency: 1 << 20}
	a := Simulate(sc, simRetry(policy.BackoffExponential, policy.JitterFull), d)
	b := Simulate(sc, simRetry(policy.BackoffExponential, policy.JitterFull), d)
	if a.Requests != b.Requests || a.Drain != b.Drain || a.P99 != b.P99 {
		t.Fatalf("two runs differ: %+v vs %+v", a, b)
	}
}

// defaults is a destination with the policy's defaults: no rate.
var defaults = policy.Destination{Name: "app", Concurrency: 8,
	Breaker: policy.Breaker{Failures: 5, Cooldown: 30 * time.Second}, SlowStart: 30 * time.Second}

func TestWithTheDefaultsTroubledBackendsDrainNearTheirCapacity(t *testing.T) {
	t.Parallel()
	r := policy.DefaultRetry()
	t.Run("poison events do not hold back the others", func(t *testing.T) {
		t.Parallel()
		res := Simulate(Scenario{Arrival: 20, Events: 400, Poison: 0.3}, r, defaults)
		if res.Delivered*100 < res.Healthy*95 || res.P95 > 10*time.Second {
			t.Fatalf("%d of %d healthy events delivered, p95 %s; want ≥ 95 %% and ≤ 10s", res.Delivered, res.Healthy, res.P95)
		}
	})
	t.Run("a backend that answers 503 above 50/s gets about 50/s", func(t *testing.T) {
		t.Parallel()
		res := Simulate(Scenario{Burst: 1500, Capacity: 50}, r, defaults)
		if res.Delivered != 1500 || res.P99 > 45*time.Second || res.Requests*10 > 1500*13 {
			t.Fatalf("%d delivered, last after %s, %d requests; want all within 1.5 × 30s and ≤ 1.3 requests each",
				res.Delivered, res.P99, res.Requests)
		}
	})
	t.Run("a dead backend gets few attempts and its events go soon after it returns", func(t *testing.T) {
		t.Parallel()
		res := Simulate(Scenario{Arrival: 100.0 / 60, Events: 100, Outage: time.Minute}, r, defaults)
		if res.InOutage > 150 || res.Delivered != 100 || res.Drain > 30*time.Second {
			t.Fatalf("%d attempts during the outage, %d delivered, drained %s after it; want ≤ 150, 100, ≤ 30s",
				res.InOutage, res.Delivered, res.Drain)
		}
	})
	t.Run("with a rate, a short outage drains at the rate", func(t *testing.T) {
		t.Parallel()
		d := defaults
		d.Rate = policy.Rate{PerSecond: 20, Burst: 1}
		res := Simulate(Scenario{Arrival: 200.0 / 3, Events: 200, Outage: 3 * time.Second}, r, d)
		if res.Delivered != 200 || res.Drain > 12*time.Second {
			t.Fatalf("%d delivered, drained %s after the outage; want 200 within 1.2 × 10s", res.Delivered, res.Drain)
		}
	})
	t.Run("the seed's outage drains near the backend's capacity and never above it", func(t *testing.T) {
		t.Parallel()
		res := Simulate(Scenario{Arrival: 100.0 / 60, Events: 3100, OutageStart: time.Minute, Outage: 15 * time.Minute, Capacity: 10}, r, defaults)
		// 1,500 events at the 10/s the backend takes, less the 1.67/s still
		// arriving: 180 s. The limit restarts from what the backend
		// delivered before and doubles each second, so it passes the
		// capacity by less than twice, once, before the 503s cut it.
		if res.Delivered != 3100 || res.Drain > 270*time.Second || res.PeakAfter > 20 {
			t.Fatalf("%d delivered, drained %s, peak %d/s after; want all, ≤ 1.5 × 180s, ≤ 20/s", res.Delivered, res.Drain, res.PeakAfter)
		}
		// Refused connections cost the backend nothing: the failures that
		// opened the breaker, then a probe a second.
		if res.InOutage > 8+900+1 {
			t.Fatalf("%d attempts during the 15-minute outage; want at most one a second", res.InOutage)
		}
	})
	t.Run("events that fail their first few attempts with 503 are not taken for overload", func(t *testing.T) {
		t.Parallel()
		res := Simulate(Scenario{Arrival: 20, Events: 400, Flaky: 3}, r, defaults)
		if res.Delivered != 400 || res.MaxDelay > 30*time.Second {
			t.Fatalf("%d delivered, the last %s after it arrived; want all 400, each within 30s", res.Delivered, res.MaxDelay)
		}
	})
}
