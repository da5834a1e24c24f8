package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// Measures, does not judge (the machine is shared): how fast a listener
// drains a backlog of 10,000 webhooks, and how soon after jethook stored
// it a listener in a long poll hands a new webhook to the local app. Run
// it alone: go test -run TestListenDrainRateAndLatency -v ./cli/
func TestListenDrainRateAndLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement of 10,000 webhooks")
	}
	r := newRemote(t)
	var mu sync.Mutex
	seen := map[string]time.Time{} // body → when the local app got it
	l := newLocal(t, func(_ *http.Request, body []byte, _ int) int {
		mu.Lock()
		seen[string(body)] = time.Now()
		mu.Unlock()
		return http.StatusOK
	})
	const backlog = 10_000
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < backlog; i += 8 {
				r.send(t, fmt.Appendf(nil, `{"backlog":%d}`, i), nil, "")
			}
		})
	}
	wg.Wait()
	start := time.Now()
	listen(t, r.public.URL, l.URL, &bytes.Buffer{})
	testkit.Eventually(t, 5*time.Minute, "the backlog drained", func() bool { return l.delivered() == backlog })
	drained := time.Since(start)
	t.Logf("drained %d webhooks in %s: %.0f webhooks/s", backlog, drained.Round(time.Millisecond), backlog/drained.Seconds())

	var lat []time.Duration
	for i := range 200 {
		body := fmt.Sprintf(`{"new":%d}`, i)
		stored := time.Now() // before the post: an upper bound
		r.send(t, []byte(body), nil, "")
		testkit.Eventually(t, 10*time.Second, "the new webhook", func() bool {
			mu.Lock()
			defer mu.Unlock()
			_, ok := seen[body]
			return ok
		})
		mu.Lock()
		lat = append(lat, max(seen[body].Sub(stored), 0))
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // pacing: the listener is back in its long poll
	}
	slices.Sort(lat)
	t.Logf("a new webhook reached the local app after it was posted to jethook: p50 %s, p99 %s, max %s",
		lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}
