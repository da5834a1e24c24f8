package bench

import (
	"context"
	"testing"
	"time"
)

func TestRecoveryDeliversEveryAckedWebhookAfterTheOutage(t *testing.T) {
	t.Parallel()
	r, err := Recovery(context.Background(), RecoveryOptions{
		Arrival:         40,
		Warmup:          200 * time.Millisecond,
		Outage:          time.Second,
		Capacity:        200,
		Rate:            150,
		BreakerFailures: 3,
		BreakerCooldown: 200 * time.Millisecond,
		SlowStart:       200 * time.Millisecond,
		BodySize:        64,
		DrainTimeout:    time.Minute,
		Dir:             t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost != 0 || r.DeadLettered != 0 {
		t.Errorf("lost %d, dead-lettered %d; want 0 and 0", r.Lost, r.DeadLettered)
	}
	if r.Accepted != r.Posted {
		t.Errorf("ingress acked %d of %d posts", r.Accepted, r.Posted)
	}
	if r.Backlog <= 0 || r.OutageRequests <= 0 {
		t.Errorf("backlog %d, attempts while down %d; want both positive after a 1s outage", r.Backlog, r.OutageRequests)
	}
	if r.Drain <= 0 || r.Peak <= 0 || r.MinDrain() <= 0 || len(r.PerSecond) == 0 {
		t.Errorf("drain %s (min %s), peak %d, %d seconds counted; want positive figures", r.Drain, r.MinDrain(), r.Peak, len(r.PerSecond))
	}
}

func TestRecoveryRefusesAnArrivalRateItCannotDrain(t *testing.T) {
	t.Parallel()
	_, err := Recovery(context.Background(), RecoveryOptions{Arrival: 200, Rate: 180, Capacity: 500, Dir: t.TempDir()})
	if err == nil {
		t.Fatal("arrival 200/s with rate 180/s: no error; want one, the backlog would never drain")
	}
}

func TestPeakCountsTheBusiestSlidingWindow(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name string
		at   []time.Duration
		want int
	}{
		{"nothing has a peak of zero", nil, 0},
		{"a window straddling a clock second counts both halves", ms(900, 950, 1000, 1050, 1100, 2500), 5},
		{"an instant a full window later starts a new window", ms(0, 1000), 1},
		{"the busiest window wins over earlier ones", ms(0, 100, 3000, 3001, 3002, 3999), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := peak(tc.at, time.Second); got != tc.want {
				t.Errorf("peak = %d, want %d", got, tc.want)
			}
		})
	}
}
