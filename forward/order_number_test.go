package forward_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

// In these tests a#2's first delivery to an ordered destination is no
// attempt, while a#1, its key's head, fails until up is set and waits a
// second between attempts. a#2 must reach the backend after a#1, once, as
// attempt 1.

// headFailsUntilUp is that destination, on a store reached through a
// proxy that can hold its deliveries, with a#1 posted and attempted once.
func headFailsUntilUp(t *testing.T, yaml string, opts store.Options) (r *rig, b *backend, up *atomic.Bool, px *testkit.HoldingProxy, logs *testkit.LogBuffer) {
	up = new(atomic.Bool)
	b = newBackend(t, func(n int, w http.ResponseWriter) {
		if h := b.all()[n-1]; h.path == "/hook" && !up.Load() {
			if k, seq := keyed(h); k == "a" && seq == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	px = testkit.NewHoldingProxy(t, testkit.NATSServer(t))
	px.Only("$JS.ACK." + store.StreamName + "." + store.ConsumerName("shop", "app") + ".")
	logs = &testkit.LogBuffer{}
	opts.URL, opts.PublishTimeout = px.URL, 10*time.Second
	r = newRig(t, parseConfig(t, yaml, b.URL), opts, func(o *app.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"key":"a","seq":1}`)); code != http.StatusOK {
		t.Fatalf("ingress answered %d %s", code, resp)
	}
	// A second to a#1's next attempt: the next delivery is a#2's.
	testkit.Eventually(t, 30*time.Second, "a#1 attempted", func() bool { return len(appGot(b, "a", 1)) > 0 })
	return r, b, up, px, logs
}

// orderedEverySecond is the configuration of these tests: ordered on
// body.key, a second between attempts.
func orderedEverySecond(t *testing.T) string {
	yaml := edit(t, orderedRetry(t, `{key: 'body.key'}`), "base: 20ms", "base: 1s")
	return edit(t, yaml, "max_delay: 200ms", "max_delay: 1s")
}

func keyed(h hit) (key string, seq int) {
	var ev struct {
		Key string `json:"key"`
		Seq int    `json:"seq"`
	}
	_ = json.Unmarshal(h.body, &ev)
	return ev.Key, ev.Seq
}

// appGot is what the app destination's backend got of key#seq.
func appGot(b *backend, key string, seq int) []hit {
	var out []hit
	for _, h := range b.all() {
		if k, s := keyed(h); h.path == "/hook" && k == key && s == seq {
			out = append(out, h)
		}
	}
	return out
}

// releaseAndCheck waits until a#2 waits behind its key, lets a#1 through
// and checks that a#2 reached the backend after a#1's success, once, as
// attempt 1, and that its attempt log says so.
func releaseAndCheck(t *testing.T, r *rig, b *backend, up *atomic.Bool, logs *testkit.LogBuffer) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, "a#2 waiting behind its key", func() bool {
		bs, err := r.store.Blocked("shop", "app")
		return err == nil && bs.Waiting > 0
	})
	up.Store(true)
	testkit.Eventually(t, 60*time.Second, "a#2 delivered", func() bool { return len(appGot(b, "a", 2)) > 0 })
	a1, a2 := appGot(b, "a", 1), appGot(b, "a", 2)
	if last := a1[len(a1)-1]; last.at.After(a2[0].at) {
		t.Errorf("a#2 reached the backend at %s, before a#1 was delivered at %s; log:\n%s",
			a2[0].at.Format(time.StampMilli), last.at.Format(time.StampMilli), logs)
	}
	var got []string
	for _, h := range a2 {
		got = append(got, h.header.Get("X-Webhook-Attempt"))
	}
	if !slices.Equal(got, []string{"1"}) {
		t.Errorf("a#2 reached the backend as attempts %q, want once, as attempt 1", got)
	}
	// The attempt is logged once its answer is in.
	var as []store.Attempt
	testkit.Eventually(t, 10*time.Second, "a#2's attempt logged", func() bool {
		as = as[:0]
		for _, a := range r.attemptLog(a2[0].header.Get("X-Webhook-Id")) {
			if a.Destination == "app" {
				as = append(as, a)
			}
		}
		return len(as) > 0
	})
	if len(as) != 1 || as[0].Attempt != 1 {
		t.Errorf("a#2's attempt log at app %+v, want one attempt numbered 1", as)
	}
}

// Here nats.go drops a#2's first delivery: a proxy holds it past the end
// of its fetch on the client's clock, as a stalled process would. It
// comes back counted delivered twice and is queued behind a#1; its
// waiting record took JetStream's count as its attempts, and it came as
// attempt 2.
func TestAnEventQueuedAfterADroppedDeliveryIsNumberedByItsAttempts(t *testing.T) {
	t.Parallel()
	r, b, up, px, logs := headFailsUntilUp(t, orderedEverySecond(t), store.Options{})
	px.HoldNext(2 * time.Second) // past the fetch's 200 ms wait and nats.go's second
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"key":"a","seq":2}`)); code != http.StatusOK {
		t.Fatalf("ingress answered %d %s", code, resp)
	}
	releaseAndCheck(t, r, b, up, logs)
	if !px.Held() {
		t.Fatal("the proxy held back no delivery")
	}
	if !strings.Contains(logs.String(), "a fetch ended late") {
		t.Errorf("no fetch ended late, so nothing was dropped; log:\n%s", logs)
	}
}

// Here a#2's first delivery reaches a fetch after a reload removed the
// destination; the next reload brings it back, and this jethook takes the
// destination over as if from another replica (store.TakeOver). Handed
// back to the consumer, a#2 came again before a#1, whose backoff ran in
// the consumer, and took the key: it was delivered first.
func TestAnEventHandedBackByAReloadStillWaitsForItsHead(t *testing.T) {
	t.Parallel()
	with := edit(t, orderedEverySecond(t), `      - {name: app,`, "      - {name: audit, url: \"${BACKEND}/audit\"}\n      - {name: app,")
	var without strings.Builder
	for l := range strings.Lines(with) {
		if !strings.HasPrefix(l, "      - {name: app,") {
			without.WriteString(l)
		}
	}
	r, b, up, px, logs := headFailsUntilUp(t, with, store.Options{WaitingEvery: 500 * time.Millisecond})
	// Only app's deliveries are held, so the reload that removes it waits
	// for nothing else; 800 ms is within nats.go's 1.2 s: the fetch gets it.
	px.HoldNext(800 * time.Millisecond)
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"key":"a","seq":2}`)); code != http.StatusOK {
		t.Fatalf("ingress answered %d %s", code, resp)
	}
	testkit.Eventually(t, 10*time.Second, "a#2's delivery held", px.Held)
	if err := r.fwd.Reload(context.Background(), parseConfig(t, without.String(), b.URL)); err != nil {
		t.Fatal(err)
	}
	if len(appGot(b, "a", 2)) > 0 {
		t.Fatal("a#2 was attempted before the reload stopped its fetch")
	}
	if err := r.fwd.Reload(context.Background(), parseConfig(t, with, b.URL)); err != nil {
		t.Fatal(err)
	}
	releaseAndCheck(t, r, b, up, logs)
}

// A jethook that takes an ordered destination over fetches only once what
// the owner before was sent has come back, which can outlast the window
// its start opened: b#1, a head the stopping owner handed back while a#1
// waited out its backoff in the consumer, must still be attempt 1 when
// the next owner fetches it; before, it was attempt 2.
func TestAHeadHandedBackAtAStopIsTheNextOwnersFirstAttempt(t *testing.T) {
	t.Parallel()
	r, b, _, px, logs := headFailsUntilUp(t, orderedEverySecond(t), store.Options{WaitingEvery: 500 * time.Millisecond})
	px.HoldNext(800 * time.Millisecond) // within nats.go's 1.2 s: the fetch gets it
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"key":"b","seq":1}`)); code != http.StatusOK {
		t.Fatalf("ingress answered %d %s", code, resp)
	}
	testkit.Eventually(t, 10*time.Second, "b#1's delivery held", px.Held)
	r.stop()
	if len(appGot(b, "b", 1)) > 0 {
		t.Fatal("b#1 was attempted before the stop ended its fetch")
	}
	r.start()
	testkit.Eventually(t, 60*time.Second, "b#1 delivered", func() bool { return len(appGot(b, "b", 1)) > 0 })
	if got := appGot(b, "b", 1)[0].header.Get("X-Webhook-Attempt"); got != "1" {
		t.Errorf("b#1 reached the backend as attempt %q, want 1; log:\n%s", got, logs)
	}
}
