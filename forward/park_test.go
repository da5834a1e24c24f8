package forward_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// parkingRetry waits 400 ms between attempts, jitter off, so each wait
// parks the webhook when ParkAfter is shorter.
func parkingRetry(t *testing.T) string {
	return edit(t, fastRetry, "backoff: exponential, base: 20ms, multiplier: 2, max_delay: 200ms, jitter: none",
		"backoff: fixed, delay: 400ms, jitter: none")
}

func parkAfter(d time.Duration) func(*app.Options) {
	return func(o *app.Options) { o.ParkAfter = d }
}

// A webhook waiting for its next attempt leaves its consumer for the
// parked stream and comes back on schedule, never early, with its attempt
// count and history intact.
func TestAParkedWebhookComesBackOnScheduleWithItsAttemptCount(t *testing.T) {
	t.Parallel()
	b := newBackend(t, unavailableFirst(2))
	r := newRig(t, parseConfig(t, parkingRetry(t), b.URL), store.Options{}, parkAfter(100*time.Millisecond))

	if code, body := r.post("/hooks/shop", http.Header{"X-Webhook-Id": {"parked-1"}}, []byte(`{"n":1}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, body)
	}
	eventually(t, "the webhook parked after its first attempt", func() bool {
		return b.count() == 1 && r.store.ParkedCount("shop", "app") == 1
	})
	eventually(t, "three attempts, the last delivered", func() bool { return b.count() == 3 })
	hits := b.all()
	for i, h := range hits {
		if got := h.header.Get("X-Webhook-Attempt"); got != string(rune('1'+i)) {
			t.Errorf("attempt %d sent X-Webhook-Attempt %q", i+1, got)
		}
		if i > 0 && h.at.Sub(hits[i-1].at) < 400*time.Millisecond {
			t.Errorf("attempt %d came %s after attempt %d, before its 400ms wait", i+1, h.at.Sub(hits[i-1].at), i)
		}
	}
	id := hits[0].header.Get("X-Webhook-Id")
	var as []store.Attempt
	eventually(t, "three attempts logged", func() bool {
		as, _ = r.store.Attempts(context.Background(), id)
		return len(as) == 3
	})
	for i, want := range []string{"transient", "transient", "delivered"} {
		if as[i].Attempt != i+1 || as[i].Outcome != want {
			t.Errorf("logged attempt %d: %+v, want %s", i+1, as[i], want)
		}
	}
	eventually(t, "nothing left parked or pending", func() bool {
		bl, err := r.store.Backlogs(context.Background())
		return err == nil && len(bl) == 1 && bl[0].Parked == 0 && bl[0].AckPending == 0 && bl[0].Pending == 0
	})
	e, seq, err := r.store.Event(context.Background(), id, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := r.store.Delivery(context.Background(), e, seq, "app"); err != nil || d.State != store.StateDelivered {
		t.Errorf("delivery %+v, %v; want delivered", d, err)
	}
}

// While parked, the webhook reads as in backoff, not delivered, though
// its message was acked; and a parked webhook outlives a restart.
func TestAParkedWebhookOutlivesARestart(t *testing.T) {
	t.Parallel()
	b := newBackend(t, unavailableFirst(1))
	cfg := parseConfig(t, edit(t, parkingRetry(t), "delay: 400ms", "delay: 2s"), b.URL)
	dir := t.TempDir()
	r := newRig(t, cfg, store.Options{DataDir: dir}, parkAfter(time.Second))
	st := r.store
	if code, body := r.post("/hooks/shop", http.Header{"X-Webhook-Id": {"parked-2"}}, []byte(`{"n":2}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, body)
	}
	eventually(t, "the webhook parked", func() bool { return st.ParkedCount("shop", "app") == 1 })
	id := b.all()[0].header.Get("X-Webhook-Id")
	e, seq, err := st.Event(context.Background(), id, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := st.Delivery(context.Background(), e, seq, "app"); err != nil || d.State != store.StateInBackoff {
		t.Errorf("parked: %+v, %v; want in_backoff", d, err)
	}
	// Its message is acked, yet it is the destination's oldest pending.
	bl, err := st.Backlogs(context.Background())
	if err != nil || len(bl) != 1 {
		t.Fatalf("backlogs %+v, %v; want shop → app's", bl, err)
	}
	if oldest, err := st.Oldest(context.Background(), bl[0]); err != nil || oldest.Before(e.ReceivedAt.Add(-time.Second)) || oldest.After(time.Now()) {
		t.Errorf("oldest pending %v, %v; want when the parked webhook was stored", oldest, err)
	}
	r.stop()
	st.Close()

	r.store = storetest.Open(t, store.Options{DataDir: dir})
	r.start(parkAfter(time.Second))
	eventually(t, "the parked webhook delivered after the restart", func() bool { return b.count() == 2 })
	if got := b.all()[1].header.Get("X-Webhook-Attempt"); got != "2" {
		t.Errorf("X-Webhook-Attempt %q after the restart, want 2", got)
	}
}
