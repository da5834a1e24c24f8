package forward

import "time"

// A destination's health is judged from the attempts of the last
// healthWindow, counted in one-second buckets (a time-based sliding window,
// as resilience4j's breaker keeps), not from a streak: a destination that
// still delivers some events is up, and its failing events retry and
// dead-letter on their own schedule without holding the others back.
const (
	healthBucket  = time.Second
	healthBuckets = 10
	healthWindow  = healthBucket * healthBuckets
)

// tally counts attempts by what they say about the destination. ok is an
// answer (2xx, another 4xx, 429); down is a sign of a down backend
// (network error, timeout, 5xx); good, deliveries.
type tally struct {
	ok, down, good int
}

func (t *tally) add(u tally) {
	t.good += u.good
	t.ok += u.ok
	t.down += u.down
}

// window is a ring of per-second tallies covering healthWindow.
type window struct {
	start   time.Time // start of buckets[head]
	began   time.Time // when the oldest tally began, if less than healthWindow ago
	head    int
	buckets [healthBuckets]tally
}

// advance rotates the ring so that its head bucket holds now.
func (w *window) advance(now time.Time) {
	if w.start.IsZero() || now.Sub(w.start) >= healthWindow+healthBucket {
		*w = window{start: now, began: now}
		return
	}
	for now.Sub(w.start) >= healthBucket {
		w.head = (w.head + 1) % healthBuckets
		w.buckets[w.head] = tally{}
		w.start = w.start.Add(healthBucket)
	}
}

func (w *window) add(now time.Time, t tally) {
	w.advance(now)
	w.buckets[w.head].add(t)
}

// sum is the tally of the whole window.
func (w *window) sum(now time.Time) tally {
	w.advance(now)
	var s tally
	for _, b := range w.buckets {
		s.add(b)
	}
	return s
}

// goodput estimates the deliveries per second over the last second: the
// head bucket and the part of the one before that the last second still
// covers.
func (w *window) goodput(now time.Time) float64 {
	w.advance(now)
	prev := w.buckets[(w.head+healthBuckets-1)%healthBuckets]
	f := 1 - float64(now.Sub(w.start))/float64(healthBucket)
	return float64(w.buckets[w.head].good) + f*float64(prev.good)
}

// span is how long the window has counted, at most healthWindow.
func (w *window) span(now time.Time) time.Duration {
	return min(healthWindow, max(healthBucket, now.Sub(w.began)))
}
