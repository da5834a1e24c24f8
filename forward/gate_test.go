package forward

import (
	"testing"
	"time"

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

func TestTheBreakerOpensAfterConsecutiveFailuresAndProbesOnce(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	if n, _, _ := g.admit(0); n != 10 {
		t.Fatalf("closed gate admits %d, want 10", n)
	}
	g.record(Transient, 0)
	g.record(Delivered, 0) // a success resets the count
	g.record(Transient, 0)
	g.record(Transient, 0)
	if n, _, _ := g.admit(0); n != 10 {
		t.Fatalf("two consecutive failures closed the gate: admits %d", n)
	}
	if !g.record(Transient, 0) {
		t.Fatal("the third consecutive failure did not open the breaker")
	}
	n, wait, _ := g.admit(0)
	if n != 0 || wait != 30*time.Second {
		t.Fatalf("open breaker admits %d and waits %s, want 0 and 30s", n, wait)
	}
	c.advance(30 * time.Second)
	n, _, probe := g.admit(0)
	if n != 1 || !probe {
		t.Fatalf("after the cooldown: admits %d (probe %v), want one probe", n, probe)
	}
	if n, _, _ := g.admit(1); n != 0 {
		t.Fatalf("a second attempt was admitted while the probe is in flight")
	}
	g.record(Transient, 0)
	if n, wait, _ := g.admit(0); n != 0 || wait != 30*time.Second {
		t.Fatalf("a failed probe must reopen the breaker: admits %d, waits %s", n, wait)
	}
	c.advance(30 * time.Second)
	g.admit(0)
	g.record(Delivered, 0)
	if s := g.status(); s.Breaker != BreakerClosed || !s.SlowStart {
		t.Fatalf("after a good probe: %+v, want closed and slow start", s)
	}
}

func TestAProbeWithNothingToSendIsGivenBack(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	for range 3 {
		g.record(Transient, 0)
	}
	c.advance(time.Minute)
	if n, _, probe := g.admit(0); n != 1 || !probe {
		t.Fatal("no probe admitted")
	}
	g.unprobe()
	if n, _, probe := g.admit(0); n != 1 || !probe {
		t.Fatal("the probe was not given back")
	}
}

func TestSlowStartRampsConcurrencyFromATenthToTheLimit(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	for range 3 {
		g.record(Transient, 0)
	}
	c.advance(30 * time.Second)
	g.admit(0)
	g.record(Delivered, 0)
	want := []int{1, 6, 10} // at 0s, 5s and 10s of a 10s slow start
	for i, w := range want {
		if n, _, _ := g.admit(0); n != w {
			t.Errorf("%ds into slow start: admits %d, want %d", i*5, n, w)
		}
		c.advance(5 * time.Second)
	}
	if g.status().SlowStart {
		t.Error("slow start did not end")
	}
}

func TestRetryAfterPausesTheWholeDestination(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := newTestGate(c)
	g.record(Transient, 20*time.Second)
	n, wait, _ := g.admit(0)
	if n != 0 || wait != 20*time.Second {
		t.Fatalf("paused gate admits %d and waits %s, want 0 and 20s", n, wait)
	}
	g.record(Transient, 5*time.Second) // a shorter Retry-After does not shorten the pause
	if _, wait, _ := g.admit(0); wait != 20*time.Second {
		t.Fatalf("pause shortened to %s", wait)
	}
	c.advance(20 * time.Second)
	if n, _, _ := g.admit(0); n != 1 {
		t.Fatalf("right after the pause admits %d, want 1 (slow start)", n)
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
