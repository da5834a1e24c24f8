package forward_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

// Poison events (here every third, answered 500 whatever happens) fail and
// dead-letter on their own; with the default breaker the others are all
// delivered and the breaker never opens.
func TestPoisonEventsNeitherOpenTheBreakerNorHoldBackTheOthers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	delivered := map[string]bool{}
	b := newBackend(t, func(int, http.ResponseWriter) {})
	b.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"poison":true`)) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		delivered[string(body)] = true
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{})
	opened := false
	const n = 90
	for i := range n {
		if code, resp := r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d,"poison":%t}`, i, i%3 == 0)); code != http.StatusOK {
			t.Fatalf("post %d: %d %s", i, code, resp)
		}
		opened = opened || r.gate().Breaker != forward.BreakerClosed
	}
	eventually(t, "every healthy event delivered and every poison one dead-lettered", func() bool {
		opened = opened || r.gate().Breaker != forward.BreakerClosed
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == n*2/3 && len(r.deadLetters()) == n/3
	})
	if opened {
		t.Error("the breaker opened on poison events")
	}
	for _, dl := range r.deadLetters() {
		if !strings.Contains(string(dl.Envelope.Body), `"poison":true`) || dl.Attempts != 6 {
			t.Errorf("dead letter %s after %d attempts; want only poison events, after all 6", dl.Envelope.Body, dl.Attempts)
		}
	}
}

// Due retries do not jump the queue: with the destination's one slot
// taken by poison events that keep failing, webhooks stored behind them
// are attempted once the poison events have had their first attempts, not
// after every retry of theirs (JetStream hands out redeliveries first, so
// a busy destination parks its retries behind what is already waiting).
func TestRetriesOfFailingEventsDoNotStarveTheWebhooksBehindThem(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var poisonSeen, poisonBeforeLastGood, good int
	b := newBackend(t, func(int, http.ResponseWriter) {})
	b.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if bytes.Contains(body, []byte(`"poison":true`)) {
			poisonSeen++
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		good++
		poisonBeforeLastGood = poisonSeen
		w.WriteHeader(http.StatusOK)
	})
	r := newRig(t, parseConfig(t, limited(t, "concurrency: 1, breaker: {failures: 0}", ""), b.URL), store.Options{})
	if err := r.fwd.Pause("shop", "app"); err != nil {
		t.Fatal(err)
	}
	const poison, healthy = 20, 10
	for i := range poison + healthy {
		if code, resp := r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d,"poison":%t}`, i, i < poison)); code != http.StatusOK {
			t.Fatalf("post %d: %d %s", i, code, resp)
		}
	}
	if err := r.fwd.Resume("shop", "app"); err != nil {
		t.Fatal(err)
	}
	// 120 attempts one at a time: more than eventually's 10 s on a loaded
	// machine under -race.
	testkit.Eventually(t, time.Minute, "every event delivered or dead-lettered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return good == healthy && len(r.deadLetters()) == poison
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d poison attempts before the last healthy event was delivered", poisonBeforeLastGood)
	// 20 first attempts come first (they were stored first); each poison
	// event makes 6 attempts, so 120 would mean the retries went first.
	if poisonBeforeLastGood > poison+10 {
		t.Fatalf("%d poison attempts before the last healthy event was delivered; want about %d, their first attempts",
			poisonBeforeLastGood, poison)
	}
}

// The poison target with the shipped defaults (retry schedule, breaker,
// learned limit), scaled to 3 s: 20 webhooks a second, 30 % of them
// answered 500 whatever happens; the healthy ones arrive promptly (the
// target is a p95 of at most 10 s from arrival).
func TestWithTheDefaultsPoisonEventsDoNotDelayTheHealthyOnes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	deliveredAt := map[int]time.Time{}
	b := newBackend(t, func(int, http.ResponseWriter) {})
	b.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			I      int  `json:"i"`
			Poison bool `json:"poison"`
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.Poison {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		if _, ok := deliveredAt[ev.I]; !ok {
			deliveredAt[ev.I] = time.Now()
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	const defaults = `
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "${BACKEND}/hook"}
`
	r := newRig(t, parseConfig(t, defaults, b.URL), store.Options{})
	const n = 60
	postedAt := map[int]time.Time{}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	healthy := 0
	for i := range n {
		<-tick.C
		poison := i%10 < 3
		if !poison {
			healthy++
		}
		postedAt[i] = time.Now()
		if code, resp := r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d,"poison":%t}`, i, poison)); code != http.StatusOK {
			t.Fatalf("post %d: %d %s", i, code, resp)
		}
	}
	opened := false
	eventually(t, "every healthy event delivered", func() bool {
		opened = opened || r.gate().Breaker != forward.BreakerClosed
		mu.Lock()
		defer mu.Unlock()
		return len(deliveredAt) == healthy
	})
	if opened {
		t.Error("the breaker opened while healthy events were delivered")
	}
	mu.Lock()
	defer mu.Unlock()
	var delays []time.Duration
	for i, at := range deliveredAt {
		delays = append(delays, at.Sub(postedAt[i]))
	}
	slices.Sort(delays)
	p95 := delays[len(delays)*95/100]
	t.Logf("%d healthy events delivered, p95 %s from arrival", healthy, p95.Round(time.Millisecond))
	if p95 > 10*time.Second {
		t.Fatalf("p95 from arrival %s; want at most 10s", p95)
	}
}
