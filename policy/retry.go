package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// Backoff names how the wait between attempts grows.
type Backoff string

// Backoff kinds.
const (
	BackoffFixed       Backoff = "fixed"       // always Interval
	BackoffLinear      Backoff = "linear"      // Base + (n-1)·Step
	BackoffExponential Backoff = "exponential" // Base·Multiplier^(n-1)
)

// Jitter names how a backoff is randomised so that failed deliveries do not
// come back in lockstep (the thundering herd). See
// https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/.
type Jitter string

// Jitter kinds.
const (
	JitterNone         Jitter = "none"         // the backoff itself
	JitterFull         Jitter = "full"         // uniform in [0, backoff]
	JitterEqual        Jitter = "equal"        // backoff/2 + uniform in [0, backoff/2]
	JitterDecorrelated Jitter = "decorrelated" // min(MaxDelay, uniform in [Base, 3·previous])
)

// Retry is the retry policy of one route: how long to wait between attempts
// and when to give up. Its methods are pure: no clock, no I/O, and the
// randomness comes from a PRNG seeded by the caller's key, so a delay can be
// recomputed after a restart. Parse returns every field set; DefaultRetry
// gives the built-in defaults for a Retry built by hand.
type Retry struct {
	// Kind is the backoff curve (YAML `backoff`), default exponential.
	Kind Backoff
	// Interval is the constant wait of fixed backoff (YAML `delay`),
	// default 30s.
	Interval time.Duration
	// Base is the first wait of linear and exponential backoff and the lower
	// bound of decorrelated jitter, default 2s.
	Base time.Duration
	// Step is the increment of linear backoff, default Base.
	Step time.Duration
	// Multiplier is the growth factor of exponential backoff, default 2,
	// always > 1 for exponential.
	Multiplier float64
	// MaxDelay caps every wait, whatever the kind and jitter, default 1h.
	MaxDelay time.Duration
	// Jitter is the randomisation, default full.
	Jitter Jitter
	// MaxAttempts is the number of attempts after which a delivery is dead
	// lettered, default 12, at least 1.
	MaxAttempts int
	// MaxAge is how long after the event was first received retries may
	// still start, default 48h: a day below the default JETHOOK_RETENTION
	// (72h), which must outlast every retry.
	MaxAge time.Duration
	// RetryAfterMax bounds a backend's Retry-After (RFC 9110 §10.2.3), so a
	// backend can never park an event longer than jethook would; default
	// MaxDelay.
	RetryAfterMax time.Duration
	// RetryOn lists the statuses that are transient and retried; anything
	// else non-2xx is permanent. Default 408, 429 and 5xx.
	RetryOn []StatusMatch
}

// StatusMatch is one entry of retry_on: an exact code (429) or a class
// ("5xx" is Class 5, with Code 0).
type StatusMatch struct {
	Code  int
	Class int
}

// maxAttemptsLimit bounds max_attempts, and so the length of a Schedule.
const maxAttemptsLimit = 10000

// DefaultRetry returns the built-in retry policy that policies.yaml
// overrides: exponential from 2s doubling up to 1h, full jitter, 12 attempts
// within 48h, retrying 408, 429 and 5xx.
func DefaultRetry() Retry {
	return Retry{
		Kind:          BackoffExponential,
		Interval:      30 * time.Second,
		Base:          2 * time.Second,
		Step:          2 * time.Second,
		Multiplier:    2,
		MaxDelay:      time.Hour,
		Jitter:        JitterFull,
		MaxAttempts:   12,
		MaxAge:        48 * time.Hour,
		RetryAfterMax: time.Hour,
		RetryOn:       []StatusMatch{{Code: 408}, {Code: 429}, {Class: 5}},
	}
}

// Backoff returns the deterministic wait after failed attempt n (1-based),
// before jitter, capped by MaxDelay:
//
//	fixed:       Interval
//	linear:      Base + (n-1)·Step
//	exponential: Base·Multiplier^(n-1)
//
// It never overflows, however large n is. An n below 1 counts as 1.
func (r Retry) Backoff(n int) time.Duration {
	n = max(n, 1)
	limit := max(r.MaxDelay, 0)
	var d time.Duration
	switch r.Kind {
	case BackoffFixed:
		d = r.Interval
	case BackoffLinear:
		base, step := max(r.Base, 0), max(r.Step, 0)
		if base >= limit || step > 0 && int64(n-1) > int64((limit-base)/step) {
			return limit
		}
		d = base + time.Duration(n-1)*step
	default: // exponential
		f := float64(r.Base) * math.Pow(r.Multiplier, float64(n-1))
		if math.IsNaN(f) || f >= float64(limit) {
			return limit
		}
		if f <= 0 {
			return 0
		}
		d = time.Duration(f)
	}
	return min(max(d, 0), limit)
}

// Delay returns the jittered wait after failed attempt n (1-based). The
// random draws come from a PCG generator seeded by a SHA-256 of key, replayed
// from the first attempt, so the same key always yields the same delays, even
// in another process. Callers pass eventID + "/" + destination. Decorrelated
// jitter needs the previous delay; replaying the chain gives it without
// storing anything.
func (r Retry) Delay(n int, key string) time.Duration {
	n = max(n, 1)
	src := newDraws(key)
	if r.Jitter == JitterDecorrelated {
		lo, limit := r.decorrelatedBounds()
		d := lo
		for range n {
			d = min(limit, uniform(src.Uint64(), lo, mulSat(d, 3)))
		}
		return d
	}
	for range n - 1 {
		src.Uint64()
	}
	u := src.Uint64()
	b := r.Backoff(n)
	switch r.Jitter {
	case JitterNone:
		return b
	case JitterEqual:
		half := b / 2
		return half + uniform(u, 0, b-half)
	default: // full
		return uniform(u, 0, b)
	}
}

// Range returns the bounds of Delay(n, key) over every key. For decorrelated
// jitter the upper bound is chained: min(MaxDelay, 3·Base·3^(n-1)).
func (r Retry) Range(n int) (lo, hi time.Duration) {
	n = max(n, 1)
	switch r.Jitter {
	case JitterNone:
		b := r.Backoff(n)
		return b, b
	case JitterEqual:
		b := r.Backoff(n)
		return b / 2, b
	case JitterDecorrelated:
		lo, limit := r.decorrelatedBounds()
		hi = lo
		for range n {
			hi = min(limit, max(lo, mulSat(hi, 3)))
			if hi == limit {
				break
			}
		}
		return min(lo, limit), hi
	default: // full
		return 0, r.Backoff(n)
	}
}

// decorrelatedBounds returns the lower bound and cap of decorrelated jitter,
// with negative settings read as zero.
func (r Retry) decorrelatedBounds() (lo, limit time.Duration) {
	return max(r.Base, 0), max(r.MaxDelay, 0)
}

// Exhausted reports whether no attempt should follow failed attempt n: when
// n has reached MaxAttempts, or when the next attempt would start more than
// MaxAge after the event was first received. age is the time from first
// receipt to now; next is the wait planned before attempt n+1.
func (r Retry) Exhausted(n int, age, next time.Duration) bool {
	return n >= r.MaxAttempts || addSat(age, next) > r.MaxAge
}

// Transient reports whether an HTTP status is worth retrying, per RetryOn.
// Everything else that is not a success is permanent and dead-lettered at
// once.
func (r Retry) Transient(status int) bool {
	for _, m := range r.RetryOn {
		if m.Code != 0 && m.Code == status || m.Code == 0 && m.Class != 0 && status/100 == m.Class {
			return true
		}
	}
	return false
}

// ClampRetryAfter bounds a backend's Retry-After (RFC 9110 §10.2.3) to
// [0, RetryAfterMax].
func (r Retry) ClampRetryAfter(d time.Duration) time.Duration {
	return min(max(d, 0), max(r.RetryAfterMax, 0))
}

// newDraws returns the PRNG for key: PCG seeded with the first 16 bytes of
// SHA-256(key). It is never shared, so it needs no lock.
func newDraws(key string) *rand.Rand {
	sum := sha256.Sum256([]byte(key))
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
}

// uniform maps the random word u onto [lo, hi], inclusive, with one draw and
// no rejection loop, so every attempt consumes exactly one word. If hi <= lo
// it returns lo.
func uniform(u uint64, lo, hi time.Duration) time.Duration {
	lo = max(lo, 0)
	if hi <= lo {
		return lo
	}
	off, _ := bits.Mul64(u, uint64(hi-lo)+1)
	return lo + time.Duration(off)
}

// mulSat returns d·k, saturating at the largest Duration.
func mulSat(d time.Duration, k int64) time.Duration {
	if d > math.MaxInt64/time.Duration(k) {
		return math.MaxInt64
	}
	return d * time.Duration(k)
}

// addSat returns a+b for non-negative durations, saturating at the largest
// Duration.
func addSat(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
