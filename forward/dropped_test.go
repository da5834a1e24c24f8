package forward_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

// A delivery that nats.go dropped is no attempt: here a proxy holds the
// server's first delivery to the destination past the end of its fetch
// on the client's clock (its wait and a second), as a stalled process
// would, so nats.go drops it; JetStream counted it delivered and sends it
// again after its ack wait, its count one higher. The backend, which
// always fails, must see it as the first attempt and get all six attempts
// of the schedule, numbered 1 to 6, before the webhook is dead-lettered;
// before, it got five, numbered 2 to 6.
func TestADeliveryDroppedAfterAStallIsNotCountedAsAnAttempt(t *testing.T) {
	t.Parallel()
	px := testkit.NewHoldingProxy(t, testkit.NATSServer(t))
	px.Only("$JS.ACK." + store.StreamName + "." + store.ConsumerName("shop", "app") + ".")
	b := newBackend(t, status(http.StatusServiceUnavailable))
	logs := &testkit.LogBuffer{}
	r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{URL: px.URL, PublishTimeout: 10 * time.Second},
		func(o *app.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })

	px.HoldNext(2 * time.Second) // past the fetch's 200 ms wait and nats.go's second
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"id":1}`)); code != http.StatusOK {
		t.Fatalf("ingress answered %d %s", code, resp)
	}
	// The ack wait is the timeout (2 s) and 5 s.
	testkit.Eventually(t, 30*time.Second, "the webhook dead-lettered", func() bool { return len(r.deadLetters()) == 1 })
	if !px.Held() {
		t.Fatal("the proxy held back no delivery")
	}
	if !strings.Contains(logs.String(), "a fetch ended late") {
		t.Errorf("no fetch ended late, so nothing was dropped; log:\n%s", logs.String())
	}
	hits := b.all()
	var got []string
	for _, h := range hits {
		got = append(got, h.header.Get("X-Webhook-Attempt"))
	}
	if strings.Join(got, " ") != "1 2 3 4 5 6" {
		t.Errorf("the backend saw attempts %q, want 1 to 6", got)
	}
	as, err := r.store.Attempts(t.Context(), hits[0].header.Get("X-Webhook-Id"))
	if err != nil || len(as) != 6 || as[0].Attempt != 1 || as[5].Attempt != 6 {
		t.Errorf("attempt log %+v (%v), want six attempts numbered 1 to 6", as, err)
	}
}

// A delivery handed back unattempted when jethook stops is no attempt
// either. The run after, which cannot know what the run before handed
// back, must make it attempt 1; before, it came as attempt 2. A proxy
// holds the delivery until the stop has ended the fetch's loop.
func TestAWebhookHandedBackAtAStopIsTheNextRunsFirstAttempt(t *testing.T) {
	t.Parallel()
	px := testkit.NewHoldingProxy(t, testkit.NATSServer(t))
	px.Only("$JS.ACK." + store.StreamName + "." + store.ConsumerName("shop", "app") + ".")
	b := newBackend(t, status(http.StatusOK))
	r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{URL: px.URL, PublishTimeout: 10 * time.Second})

	px.HoldNext(800 * time.Millisecond) // within nats.go's 1.2 s: the fetch gets it
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"id":1}`)); code != http.StatusOK {
		t.Fatalf("ingress answered %d %s", code, resp)
	}
	testkit.Eventually(t, 10*time.Second, "the delivery held", px.Held)
	r.stop()
	if b.count() > 0 {
		t.Fatal("the webhook was attempted before the stop ended its fetch")
	}
	r.start()
	testkit.Eventually(t, 30*time.Second, "the webhook delivered", func() bool { return b.count() > 0 })
	h := b.all()[0]
	if got := h.header.Get("X-Webhook-Attempt"); got != "1" {
		t.Errorf("the backend saw attempt %q, want 1", got)
	}
	var as []store.Attempt // logged once its answer is in
	testkit.Eventually(t, 10*time.Second, "the attempt logged", func() bool {
		as = r.attemptLog(h.header.Get("X-Webhook-Id"))
		return len(as) > 0
	})
	if len(as) != 1 || as[0].Attempt != 1 {
		t.Errorf("attempt log %+v, want one attempt numbered 1", as)
	}
}
