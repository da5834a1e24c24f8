package policy

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestBackoffFormulas(t *testing.T) {
	t.Parallel()
	fixed := DefaultRetry()
	fixed.Kind, fixed.Interval = BackoffFixed, 30*time.Second
	linear := DefaultRetry()
	linear.Kind, linear.Base, linear.Step, linear.MaxDelay = BackoffLinear, 10*time.Second, 5*time.Second, time.Minute
	exp := DefaultRetry() // 2s doubling, capped at 1h
	exp3 := DefaultRetry()
	exp3.Base, exp3.Multiplier, exp3.MaxDelay = time.Second, 3, 100*time.Second
	uncapped := DefaultRetry()
	uncapped.MaxDelay = math.MaxInt64

	tests := []struct {
		name string
		r    Retry
		n    int
		want time.Duration
	}{
		{"fixed waits the interval after the first attempt", fixed, 1, 30 * time.Second},
		{"fixed waits the interval after the hundredth attempt", fixed, 100, 30 * time.Second},
		{"linear starts at base", linear, 1, 10 * time.Second},
		{"linear adds one step per attempt", linear, 3, 20 * time.Second},
		{"linear reaches the cap exactly", linear, 11, time.Minute},
		{"linear is capped by max_delay", linear, 12, time.Minute},
		{"linear does not overflow for huge n", linear, math.MaxInt, time.Minute},
		{"exponential starts at base", exp, 1, 2 * time.Second},
		{"exponential doubles", exp, 2, 4 * time.Second},
		{"exponential after ten attempts", exp, 10, 1024 * time.Second},
		{"exponential is capped by max_delay", exp, 12, time.Hour},
		{"exponential with multiplier 3", exp3, 4, 27 * time.Second},
		{"exponential with multiplier 3 is capped", exp3, 6, 100 * time.Second},
		{"exponential does not overflow for huge n", exp, math.MaxInt, time.Hour},
		{"exponential without a real cap saturates, never wraps", uncapped, 1000, math.MaxInt64},
		{"attempt numbers below 1 count as 1", exp, 0, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.r.Backoff(tt.n); got != tt.want {
				t.Errorf("Backoff(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

// jittered returns a retry policy with each jitter kind over exponential
// backoff from 1s, capped at 5m.
func jittered() map[Jitter]Retry {
	out := map[Jitter]Retry{}
	for _, j := range []Jitter{JitterNone, JitterFull, JitterEqual, JitterDecorrelated} {
		r := DefaultRetry()
		r.Base, r.MaxDelay, r.Jitter, r.MaxAttempts = time.Second, 5*time.Minute, j, 30
		out[j] = r
	}
	return out
}

func TestDelayBounds(t *testing.T) {
	t.Parallel()
	const keys = 300
	for j, r := range jittered() {
		t.Run(fmt.Sprintf("%s jitter stays within its bounds", j), func(t *testing.T) {
			t.Parallel()
			for k := range keys {
				key := fmt.Sprintf("evt_%d/app", k)
				prev := r.Base
				for n := 1; n <= r.MaxAttempts; n++ {
					got, b := r.Delay(n, key), r.Backoff(n)
					lo, hi := r.Range(n)
					if got < lo || got > hi {
						t.Fatalf("Delay(%d, %q) = %v outside Range [%v, %v]", n, key, got, lo, hi)
					}
					switch j {
					case JitterNone:
						if got != b {
							t.Fatalf("Delay(%d) = %v, want the backoff %v", n, got, b)
						}
					case JitterFull:
						if got < 0 || got > b {
							t.Fatalf("Delay(%d) = %v outside [0, %v]", n, got, b)
						}
					case JitterEqual:
						if got < b/2 || got > b {
							t.Fatalf("Delay(%d) = %v outside [%v, %v]", n, got, b/2, b)
						}
					case JitterDecorrelated:
						if got < r.Base || got > r.MaxDelay || got > 3*prev {
							t.Fatalf("Delay(%d) = %v outside [%v, min(%v, 3×%v)]", n, got, r.Base, r.MaxDelay, prev)
						}
					}
					prev = got
				}
			}
		})
	}
}

func TestRangeBounds(t *testing.T) {
	t.Parallel()
	js := jittered()
	tests := []struct {
		name   string
		r      Retry
		n      int
		lo, hi time.Duration
	}{
		{"none is the backoff itself", js[JitterNone], 3, 4 * time.Second, 4 * time.Second},
		{"full spans zero to the backoff", js[JitterFull], 3, 0, 4 * time.Second},
		{"equal spans half the backoff to the backoff", js[JitterEqual], 3, 2 * time.Second, 4 * time.Second},
		{"decorrelated first wait is up to three bases", js[JitterDecorrelated], 1, time.Second, 3 * time.Second},
		{"decorrelated upper bound triples each attempt", js[JitterDecorrelated], 3, time.Second, 27 * time.Second},
		{"decorrelated upper bound is capped", js[JitterDecorrelated], 30, time.Second, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lo, hi := tt.r.Range(tt.n)
			if lo != tt.lo || hi != tt.hi {
				t.Errorf("Range(%d) = [%v, %v], want [%v, %v]", tt.n, lo, hi, tt.lo, tt.hi)
			}
		})
	}
}

func TestDelayIsReproduciblePerKey(t *testing.T) {
	t.Parallel()
	for j := range jittered() {
		t.Run(fmt.Sprintf("%s jitter gives the same delays after a restart", j), func(t *testing.T) {
			t.Parallel()
			// Two separately built values stand for two processes.
			before, after := jittered()[j], jittered()[j]
			for n := 1; n <= before.MaxAttempts; n++ {
				if a, b := before.Delay(n, "evt_1/app"), after.Delay(n, "evt_1/app"); a != b {
					t.Fatalf("Delay(%d) = %v before and %v after", n, a, b)
				}
			}
		})
	}
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterDecorrelated} {
		t.Run(fmt.Sprintf("%s jitter spreads different keys apart", j), func(t *testing.T) {
			t.Parallel()
			r := jittered()[j]
			const keys = 200
			seen := map[time.Duration]bool{}
			for k := range keys {
				seen[r.Delay(5, fmt.Sprintf("evt_%d/app", k))] = true
			}
			// Nanosecond-resolution draws over a range of seconds collide
			// only by accident; a constant would give one value.
			if len(seen) < keys*9/10 {
				t.Errorf("%d keys gave only %d distinct delays", keys, len(seen))
			}
			if r.Delay(5, "evt_1/app") == r.Delay(5, "evt_1/audit") {
				t.Error("the same event for two destinations got the same delay")
			}
		})
	}
}

func TestExhausted(t *testing.T) {
	t.Parallel()
	r := DefaultRetry()
	r.MaxAttempts, r.MaxAge = 5, time.Hour
	tests := []struct {
		name      string
		n         int
		age, next time.Duration
		want      bool
	}{
		{"an early failure is retried", 1, 0, time.Second, false},
		{"the attempt before the last is retried", 4, time.Minute, time.Minute, false},
		{"the last attempt is not retried", 5, time.Minute, time.Second, true},
		{"past the last attempt is not retried", 6, 0, 0, true},
		{"a retry landing exactly at max_age is allowed", 2, 50 * time.Minute, 10 * time.Minute, false},
		{"a retry landing after max_age is not", 2, 50 * time.Minute, 10*time.Minute + 1, true},
		{"an event already older than max_age is not retried", 1, 2 * time.Hour, 0, true},
		{"huge durations saturate instead of wrapping", 1, math.MaxInt64, math.MaxInt64, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := r.Exhausted(tt.n, tt.age, tt.next); got != tt.want {
				t.Errorf("Exhausted(%d, %v, %v) = %v, want %v", tt.n, tt.age, tt.next, got, tt.want)
			}
		})
	}
}

func TestTransient(t *testing.T) {
	t.Parallel()
	custom := DefaultRetry()
	custom.RetryOn = []StatusMatch{{Code: 409}, {Class: 4}}
	only503 := DefaultRetry()
	only503.RetryOn = []StatusMatch{{Code: 503}}
	tests := []struct {
		name   string
		r      Retry
		status int
		want   bool
	}{
		{"request timeout is transient", DefaultRetry(), 408, true},
		{"too many requests is transient", DefaultRetry(), 429, true},
		{"internal server error is transient", DefaultRetry(), 500, true},
		{"service unavailable is transient", DefaultRetry(), 503, true},
		{"bad request is permanent", DefaultRetry(), 400, false},
		{"unauthorized is permanent", DefaultRetry(), 401, false},
		{"forbidden is permanent", DefaultRetry(), 403, false},
		{"not found is permanent", DefaultRetry(), 404, false},
		{"gone is permanent", DefaultRetry(), 410, false},
		{"unprocessable is permanent", DefaultRetry(), 422, false},
		{"a redirect is permanent", DefaultRetry(), 301, false},
		{"a custom 4xx class makes 404 transient", custom, 404, true},
		{"a custom list without 5xx makes 500 permanent", custom, 500, false},
		{"a custom exact code is honoured", only503, 503, true},
		{"a custom exact code excludes its class", only503, 502, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.r.Transient(tt.status); got != tt.want {
				t.Errorf("Transient(%d) = %v, want %v", tt.status, got, tt.want)
			}
		})
	}
}

func TestClampRetryAfter(t *testing.T) {
	t.Parallel()
	r := DefaultRetry()
	r.RetryAfterMax = 10 * time.Minute
	tests := []struct {
		name    string
		in, out time.Duration
	}{
		{"a short Retry-After is kept", 30 * time.Second, 30 * time.Second},
		{"a long Retry-After is cut to the ceiling", 2 * time.Hour, 10 * time.Minute},
		{"a date in the past means now", -time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := r.ClampRetryAfter(tt.in); got != tt.out {
				t.Errorf("ClampRetryAfter(%v) = %v, want %v", tt.in, got, tt.out)
			}
		})
	}
}
