package forward_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/jethook/jethook/forward"
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
