package forward_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/store"
)

// limited is the fast retry policy with one destination's extra keys.
func limited(t *testing.T, destKeys, backendURL string) string {
	t.Helper()
	return edit(t, fastRetry, `url: "${BACKEND}/hook"}`, `url: "${BACKEND}/hook", `+destKeys+`}`)
}

func TestInFlightRequestsNeverExceedTheDestinationsConcurrency(t *testing.T) {
	t.Parallel()
	var now, peak atomic.Int64
	b := newBackend(t, func(_ int, w http.ResponseWriter) {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		now.Add(-1)
		w.WriteHeader(http.StatusOK)
	})
	r := newRig(t, parseConfig(t, limited(t, "concurrency: 3", ""), b.URL), store.Options{})
	for i := range 30 {
		r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d}`, i))
	}
	eventually(t, "30 deliveries", func() bool { return b.count() == 30 })
	if p := peak.Load(); p > 3 || p < 1 {
		t.Fatalf("peak concurrency %d, want at most 3", p)
	}
}

// At 20/s with a burst of 1, the 50th request is let go 49/20 s after the
// first, which is let go after the first post: however late a request is
// sent or arrives, none makes the run shorter than that. (Counting
// arrivals per second instead fails when a loaded machine holds a few
// requests back and then sends them together.)
func TestTheRateLimitSpacesDeliveries(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	r := newRig(t, parseConfig(t, limited(t, "rate: 20/s, burst: 1, concurrency: 16", ""), b.URL), store.Options{})
	start := time.Now()
	for i := range 50 {
		r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d}`, i))
	}
	eventually(t, "50 deliveries", func() bool { return b.count() == 50 })
	var last time.Time
	for _, h := range b.all() {
		if h.at.After(last) {
			last = h.at
		}
	}
	if took, least := last.Sub(start), 49*time.Second/20; took < least {
		t.Errorf("50 deliveries at 20/s took %v from the first post, less than %v", took, least)
	}
}

func TestAnOpenBreakerSpendsNoAttemptsAndDeliversEverythingWhenTheBackendReturns(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	var mu sync.Mutex
	okAt := map[int]bool{} // request numbers answered 200
	b := newBackend(t, func(n int, w http.ResponseWriter) {
		if up.Load() {
			mu.Lock()
			okAt[n] = true
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	yaml := limited(t, "concurrency: 1, breaker: {failures: 3, cooldown: 400ms}, slow_start: 200ms", "")
	yaml = edit(t, yaml, "max_attempts: 6", "max_attempts: 50")
	r := newRig(t, parseConfig(t, yaml, b.URL), store.Options{})
	const n = 10
	for i := range n {
		r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d}`, i))
	}
	// Once the breaker is open only its probe reaches the backend, and a
	// failed probe's event probes again. Ten events on a 20–200 ms
	// schedule, one at a time, would take turns instead: the two attempts
	// after it opened would be of two events.
	var opened int
	eventually(t, "the breaker open", func() bool {
		opened = b.count()
		return r.fwd.Status()[0].Gate.Breaker == forward.BreakerOpen
	})
	eventually(t, "two probes", func() bool { return b.count() >= opened+2 })
	hits := b.all()
	if p, q := hits[opened].body, hits[opened+1].body; string(p) != string(q) {
		t.Fatalf("attempts %d and %d, with the breaker open, were of two events (%s, %s): it let more than its probe through", opened+1, opened+2, p, q)
	}
	up.Store(true)
	eventually(t, "every event delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		delivered := map[string]bool{}
		for i, h := range b.all() {
			if okAt[i+1] {
				delivered[string(h.body)] = true
			}
		}
		return len(delivered) == n
	})
	if dls := r.deadLetters(); len(dls) != 0 {
		t.Fatalf("%d dead letters", len(dls))
	}
}

func TestRetryAfterPausesTheWholeDestinationNotJustOneMessage(t *testing.T) {
	t.Parallel()
	b := newBackend(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	r := newRig(t, parseConfig(t, limited(t, "concurrency: 1", ""), b.URL), store.Options{})
	r.post("/hooks/shop", nil, []byte(`{"first":true}`))
	eventually(t, "the first attempt", func() bool { return b.count() == 1 })
	first := b.all()[0].at
	for i := range 3 {
		r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"later":%d}`, i))
	}
	eventually(t, "all four delivered", func() bool { return b.count() == 5 })
	for _, h := range b.all()[1:] {
		if gap := h.at.Sub(first); gap < time.Second {
			t.Fatalf("a request reached the backend %s into its 1 s Retry-After pause", gap)
		}
	}
}

func TestFanOutDeliversToAHealthyDestinationWhileAnotherIsDown(t *testing.T) {
	t.Parallel()
	good := newBackend(t, status(http.StatusOK))
	down := newBackend(t, status(http.StatusBadGateway))
	yaml := edit(t, fastRetry, `      - {name: app, url: "${BACKEND}/hook"}`,
		`      - {name: app, url: "`+good.URL+`/hook"}
      - {name: audit, url: "`+down.URL+`/hook", breaker: {failures: 0}}`)
	yaml = edit(t, yaml, "max_attempts: 6", "max_attempts: 2")
	r := newRig(t, parseConfig(t, yaml, ""), store.Options{})
	for i := range 5 {
		r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d}`, i))
	}
	eventually(t, "the healthy destination got all five", func() bool { return good.count() == 5 })
	eventually(t, "the broken one dead-lettered all five", func() bool { return len(r.deadLetters()) == 5 })
	for _, d := range r.deadLetters() {
		if d.Destination != "audit" {
			t.Fatalf("dead letter for %s", d.Destination)
		}
	}
	if n := good.count(); n != 5 {
		t.Fatalf("healthy destination got %d requests, want exactly 5", n)
	}
}
