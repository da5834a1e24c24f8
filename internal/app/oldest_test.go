package app_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
)

// jethook_oldest_pending_seconds is how long the oldest webhook a
// destination has not delivered has waited since it was stored, whether it
// waits in its consumer or parked; 0 once it is delivered.
func TestTheOldestPendingGaugeAgesWhileAWebhookWaitsAndFallsToZeroWhenItIsDelivered(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(backend.Close)
	// Each wait is longer than ParkAfter: the webhook waits parked.
	jh := apptest.Start(t, parse(t, `
routes:
  - name: shop
    path: /hooks/shop
    retry: {backoff: fixed, delay: 300ms, jitter: none, max_attempts: 1000}
    destinations:
      - {name: app, url: "${BACKEND}/shop", slow_start: 0s}
`, backend.URL), app.Options{ParkAfter: 200 * time.Millisecond})
	oldest := func() (float64, bool) {
		for line := range strings.Lines(scrape(jh.App)) {
			if v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), `jethook_oldest_pending_seconds{destination="app",route="shop"} `); ok {
				f, err := strconv.ParseFloat(v, 64)
				return f, err == nil
			}
		}
		return 0, false
	}
	if age, ok := oldest(); !ok || age != 0 {
		t.Fatalf("before any webhook: oldest pending %v (present %v), want 0", age, ok)
	}

	posted := time.Now()
	resp, err := http.Post(jh.Public.URL+"/hooks/shop", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %d", resp.StatusCode)
	}
	// It ages past a second, within what has passed since the post.
	var age float64
	testkit.Eventually(t, 20*time.Second, "the oldest pending webhook to age past a second", func() bool {
		age, _ = oldest()
		return age > 1
	})
	if limit := time.Since(posted).Seconds() + 1; age > limit {
		t.Errorf("oldest pending %.1fs, more than the %.1fs since the post", age, limit)
	}

	up.Store(true)
	testkit.Eventually(t, 20*time.Second, "the oldest pending age to fall to 0 once delivered", func() bool {
		age, ok := oldest()
		return ok && age == 0
	})
}

// A removed destination's consumer and messages are kept, so that adding it
// back resumes where it stopped, but nothing delivers them: its backlog
// gauges go with it, or they would rise, and page, for ever.
func TestTheBacklogGaugesOfARemovedDestinationGoWithIt(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/crm") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(backend.Close)
	const both = `
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "${BACKEND}/app", slow_start: 0s}
      - {name: crm, url: "${BACKEND}/crm", slow_start: 0s}
`
	load := func() (*policy.Config, error) { return parse(t, oneRoute, backend.URL), nil }
	jh := apptest.Start(t, parse(t, both, backend.URL), app.Options{Load: load})
	resp, err := http.Post(jh.Public.URL+"/hooks/shop", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testkit.Eventually(t, 20*time.Second, "crm's webhook waiting in backoff", func() bool {
		return strings.Contains(scrape(jh.App), `jethook_in_backoff{destination="crm",route="shop"} 1`)
	})

	if err := jh.App.Reload(t.Context()); err != nil { // crm removed
		t.Fatal(err)
	}
	out := scrape(jh.App)
	for _, gauge := range []string{"jethook_pending", "jethook_in_backoff", "jethook_oldest_pending_seconds"} {
		if strings.Contains(out, gauge+`{destination="crm",route="shop"}`) {
			t.Errorf("%s of the removed destination crm is still served", gauge)
		}
		if !strings.Contains(out, gauge+`{destination="app",route="shop"}`) {
			t.Errorf("%s of app, still configured, is missing", gauge)
		}
	}
}
