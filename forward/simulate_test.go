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
		// The breaker stops attempts during the outage: a handful, not 500 × retries.
		if res.Wasted > 20 {
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
