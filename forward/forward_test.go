package forward_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func TestAFlakyBackendGetsTheWebhookByteForByteOnTheFourthAttempt(t *testing.T) {
	t.Parallel()
	b := newBackend(t, unavailableFirst(3))
	r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{})
	body := []byte("{\"action\":\"opened\",\"bin\":\"\xff\xfe\"}\n")
	hdr := http.Header{
		"Content-Type":          {"application/json; charset=utf-8"},
		"X-Shopify-Topic":       {"orders/create"},
		"X-Shopify-Hmac-Sha256": {"c2lnbmF0dXJl"},
		"Connection":            {"X-Drop-Me"},
		"X-Drop-Me":             {"hop-by-hop"},
	}
	if code, resp := r.post("/hooks/shop", hdr, body); code != http.StatusOK || !strings.Contains(resp, `"duplicate":false`) {
		t.Fatalf("ingress answered %d %s", code, resp)
	}
	eventually(t, "four attempts", func() bool { return b.count() >= 4 })
	storetest.Settled(t, r.store) // delivered and acked: no fifth attempt can come
	hits := b.all()
	if len(hits) != 4 {
		t.Fatalf("%d attempts, want 4", len(hits))
	}
	for i, h := range hits {
		if got := h.header.Get("X-Webhook-Attempt"); got != fmt.Sprint(i+1) {
			t.Errorf("attempt %d carried X-Webhook-Attempt %q", i+1, got)
		}
		if !bytes.Equal(h.body, body) {
			t.Errorf("attempt %d body %q, want %q", i+1, h.body, body)
		}
	}
	last := hits[3]
	for _, k := range []string{"Content-Type", "X-Shopify-Topic", "X-Shopify-Hmac-Sha256"} {
		if last.header.Get(k) != hdr.Get(k) {
			t.Errorf("header %s = %q, want %q", k, last.header.Get(k), hdr.Get(k))
		}
	}
	if last.header.Get("X-Drop-Me") != "" {
		t.Errorf("a header named in Connection was forwarded")
	}
	if last.header.Get("X-Webhook-Id") == "" || last.header.Get("X-Forwarded-For") != "127.0.0.1" ||
		last.header.Get("X-Forwarded-Proto") != "http" || last.header.Get("X-Forwarded-Host") != "" {
		t.Errorf("jethook headers missing, or a Host nobody vouched for passed on: %v", last.header)
	}
	if last.method != http.MethodPost {
		t.Errorf("method %s", last.method)
	}
	if dls := r.deadLetters(); len(dls) != 0 {
		t.Errorf("%d dead letters, want none", len(dls))
	}
}

func TestAPermanentFailureIsDeadLetteredAfterOneAttempt(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 401, 403, 404, 410, 422, 301} {
		t.Run(fmt.Sprintf("status %d", code), func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, func(_ int, w http.ResponseWriter) {
				if code == 301 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(code)
			})
			r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{})
			if code, resp := r.post("/hooks/shop", nil, []byte(`{"n":1}`)); code != http.StatusOK {
				t.Fatalf("ingress answered %d %s", code, resp)
			}
			eventually(t, "a dead letter", func() bool { return len(r.deadLetters()) == 1 })
			storetest.Settled(t, r.store)
			if n := b.count(); n != 1 {
				t.Fatalf("%d attempts, want exactly 1", n)
			}
			d := r.deadLetters()[0]
			if d.Reason != "permanent" || d.LastStatus != code || d.Attempts != 1 || d.Destination != "app" ||
				string(d.Envelope.Body) != `{"n":1}` {
				t.Errorf("dead letter %+v", d)
			}
		})
	}
}

func TestRetryAfterOn429DelaysTheNextAttempt(t *testing.T) {
	t.Parallel()
	b := newBackend(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{})
	r.post("/hooks/shop", nil, []byte(`{}`))
	eventually(t, "the second attempt", func() bool { return b.count() == 2 })
	hits := b.all()
	if gap := hits[1].at.Sub(hits[0].at); gap < time.Second {
		t.Fatalf("second attempt %s after the first; Retry-After asked for 1s", gap)
	}
}

func TestABackendThatHangsPastTheTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := newBackend(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	t.Cleanup(func() { close(release) }) // runs before the backend's Close
	yaml := edit(t, fastRetry, "timeout: 2s", "timeout: 150ms")
	r := newRig(t, parseConfig(t, yaml, b.URL), store.Options{})
	r.post("/hooks/shop", nil, []byte(`{}`))
	eventually(t, "a second attempt after the timeout", func() bool { return b.count() >= 2 })
	if got := b.all()[1].header.Get("X-Webhook-Attempt"); got != "2" {
		t.Fatalf("retry carried X-Webhook-Attempt %q", got)
	}
}

func TestAnExhaustedDeliveryIsDeadLetteredWithItsLastStatus(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusBadGateway))
	yaml := edit(t, fastRetry, "max_attempts: 6", "max_attempts: 3")
	r := newRig(t, parseConfig(t, yaml, b.URL), store.Options{})
	r.post("/hooks/shop", nil, []byte(`{"x":1}`))
	eventually(t, "a dead letter", func() bool { return len(r.deadLetters()) == 1 })
	d := r.deadLetters()[0]
	if d.Reason != "exhausted" || d.Attempts != 3 || d.LastStatus != 502 || b.count() != 3 {
		t.Fatalf("dead letter %+v after %d attempts", d, b.count())
	}
}

func TestTheSameEventPostedTwiceIsDeliveredOnce(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{})
	body := []byte(`{"id":"same"}`)
	_, first := r.post("/hooks/shop", nil, body)
	_, second := r.post("/hooks/shop", nil, body)
	if !strings.Contains(first, `"duplicate":false`) || !strings.Contains(second, `"duplicate":true`) {
		t.Fatalf("answers %s then %s", first, second)
	}
	eventually(t, "one delivery", func() bool { return b.count() == 1 })
	storetest.Settled(t, r.store)
	if n := b.count(); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
}

func TestMessagesInBackoffSurviveAStoreRestart(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	up := false
	delivered := map[string]bool{}
	b := newBackend(t, func(_ int, w http.ResponseWriter) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	b.reply = nil // replaced below, once the body is known
	b.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		defer mu.Unlock()
		b.mu.Lock()
		b.hits = append(b.hits, hit{at: time.Now()})
		b.mu.Unlock()
		if !up {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		delivered[string(body)] = true
		w.WriteHeader(http.StatusOK)
	})
	yaml := edit(t, fastRetry, "base: 20ms", "base: 300ms")
	yaml = edit(t, yaml, "max_delay: 200ms", "max_delay: 300ms")
	// No breaker and no learned limit (the 503s would teach one of 1/s):
	// every event must get its first attempt before the restart.
	yaml = edit(t, yaml, `url: "${BACKEND}/hook"}`, `url: "${BACKEND}/hook", breaker: {failures: 0}, slow_start: 0s}`)
	cfg := parseConfig(t, yaml, b.URL)
	dir := t.TempDir()
	r := newRig(t, cfg, store.Options{DataDir: dir})
	const n = 20
	for i := range n {
		if code, resp := r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"i":%d}`, i)); code != http.StatusOK {
			t.Fatalf("post %d: %d %s", i, code, resp)
		}
	}
	eventually(t, "every event tried once", func() bool { return b.count() >= n })
	r.stop()
	r.store.Close()

	mu.Lock()
	up = true
	mu.Unlock()
	r2 := newRig(t, cfg, store.Options{DataDir: dir})
	eventually(t, "every event delivered after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == n
	})
	if dls := r2.deadLetters(); len(dls) != 0 {
		t.Fatalf("%d dead letters", len(dls))
	}
}
