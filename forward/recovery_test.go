package forward_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/store"
)

// attemptsByBody groups a backend's requests by body and returns each
// body's X-Webhook-Attempt headers in order.
func attemptsByBody(b *backend) map[string][]int {
	out := map[string][]int{}
	for _, h := range b.all() {
		n, _ := strconv.Atoi(h.header.Get("X-Webhook-Attempt"))
		out[string(h.body)] = append(out[string(h.body)], n)
	}
	return out
}

// consecutive reports whether ns is 1, 2, 3, …: every attempt counted,
// none twice.
func consecutive(ns []int) bool {
	for i, n := range ns {
		if n != i+1 {
			return false
		}
	}
	return true
}

// Webhooks that failed while the destination was down wait an hour for
// their next attempt; when a probe finds it back, they are released and
// delivered at once instead.
func TestARecoveredDestinationGetsItsParkedRetriesAtOnce(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	var mu sync.Mutex
	delivered := map[string]bool{}
	b := newBackend(t, nil)
	b.reply = func(n int, w http.ResponseWriter) {
		if up.Load() {
			mu.Lock()
			delivered[string(b.all()[n-1].body)] = true
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	r := newRig(t, parseConfig(t, slowRetry(t, "concurrency: 2, breaker: {failures: 3, cooldown: 300ms}"), b.URL), store.Options{})
	const n = 8
	for i := range n {
		r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d}`, i))
	}
	eventually(t, "the destination down, webhooks parked for an hour", func() bool {
		return r.gate().Breaker != forward.BreakerClosed && r.store.ParkedCount("shop", "app") >= 3
	})
	up.Store(true)
	eventually(t, "every webhook delivered, an hour before its next attempt was due", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == n
	})
	eventually(t, "nothing left parked, pending or in flight", func() bool {
		bl, err := r.store.Backlogs(t.Context())
		return err == nil && len(bl) == 1 && bl[0].Parked == 0 && bl[0].AckPending == 0 && bl[0].Pending == 0
	})
	for body, ns := range attemptsByBody(b) {
		if !consecutive(ns) {
			t.Errorf("%s: X-Webhook-Attempt %v, want 1, 2, 3…", body, ns)
		}
	}
	if dls := r.deadLetters(); len(dls) != 0 {
		t.Fatalf("%d dead letters", len(dls))
	}
}

// A backend that fails every event's first three attempts is answering:
// the breaker's probe tries its own event again, finds it delivered on its
// fourth attempt, and the destination is up.
func TestAProbeTriesItsOwnEventAgainSoEventsThatFailAFewTimesGetThrough(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	b := newBackend(t, nil)
	b.reply = func(n int, w http.ResponseWriter) {
		h := b.all()[n-1]
		mu.Lock()
		seen[string(h.body)]++
		k := seen[string(h.body)]
		mu.Unlock()
		if k <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	r := newRig(t, parseConfig(t, slowRetry(t, "concurrency: 1, breaker: {failures: 3, cooldown: 300ms}"), b.URL), store.Options{})
	for i := range 5 {
		r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d}`, i))
	}
	eventually(t, "one event delivered on its fourth attempt", func() bool {
		for _, ns := range attemptsByBody(b) {
			if len(ns) == 4 {
				return true
			}
		}
		return false
	})
	eventually(t, "the destination up", func() bool { return r.gate().Breaker == forward.BreakerClosed })
	for body, ns := range attemptsByBody(b) {
		if !consecutive(ns) {
			t.Errorf("%s: X-Webhook-Attempt %v, want 1, 2, 3…", body, ns)
		}
	}
}

// A parked webhook whose due record arrives, into a fetch still waiting,
// after the breaker opened is parked again with the same attempts, and
// must come back: a record that looked like its earlier one was taken for
// a duplicate and dropped.
func TestAWebhookParkedAgainUnattemptedComesBack(t *testing.T) {
	t.Parallel()
	b := newBackend(t, unavailableFirst(1))
	cfg := edit(t, parkingRetry(t), `url: "${BACKEND}/hook"}`, `url: "${BACKEND}/hook", slow_start: 0s, breaker: {failures: 1, cooldown: 2s}}`)
	r := newRig(t, parseConfig(t, cfg, b.URL), store.Options{}, parkAfter(100*time.Millisecond), fetchWait(time.Minute))
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"parked":"twice"}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, resp)
	}
	eventually(t, "the webhook delivered on its second attempt", func() bool { return b.count() == 2 })
	if got := b.all()[1].header.Get("X-Webhook-Attempt"); got != "2" {
		t.Fatalf("second request's X-Webhook-Attempt %q, want 2", got)
	}
}
