package forward_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func TestReloadMovesADestinationUnderTrafficWithoutLosingOrRepeatingAnEvent(t *testing.T) {
	t.Parallel()
	slow := func(_ int, w http.ResponseWriter) { time.Sleep(5 * time.Millisecond); w.WriteHeader(http.StatusOK) }
	a, b := newBackend(t, slow), newBackend(t, slow)
	r := newRig(t, parseConfig(t, fastRetry, a.URL), store.Options{})
	const n = 60
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			r.post("/hooks/shop", nil, []byte(fmt.Sprintf(`{"n":%d}`, i)))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	eventually(t, "some deliveries to the first backend", func() bool { return a.count() >= 5 })
	if err := r.fwd.Reload(context.Background(), parseConfig(t, fastRetry, b.URL)); err != nil {
		t.Fatal(err)
	}
	<-sent
	eventually(t, "every event delivered", func() bool { return a.count()+b.count() >= n })
	storetest.Settled(t, r.store) // every event acked: no duplicate can come
	seen := map[string]int{}
	for _, h := range append(a.all(), b.all()...) {
		seen[h.header.Get("X-Webhook-Id")]++
	}
	if len(seen) != n {
		t.Errorf("%d distinct events delivered, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("event %s delivered %d times", id, c)
		}
	}
	if b.count() == 0 {
		t.Error("nothing went to the new URL after the reload")
	}
	if st := r.fwd.Status(); len(st) != 1 || st[0].URL != b.URL+"/hook" {
		t.Errorf("status after reload %+v", st)
	}
}

func TestReloadStopsARemovedDestinationAndKeepsItsMessages(t *testing.T) {
	t.Parallel()
	a := newBackend(t, status(http.StatusOK))
	two := edit(t, fastRetry, `      - {name: app, url: "${BACKEND}/hook"}`,
		"      - {name: app, url: \"${BACKEND}/hook\"}\n      - {name: audit, url: \"${BACKEND}/audit\"}")
	r := newRig(t, parseConfig(t, two, a.URL), store.Options{})
	if err := r.fwd.Reload(context.Background(), parseConfig(t, fastRetry, a.URL)); err != nil {
		t.Fatal(err)
	}
	if st := r.fwd.Status(); len(st) != 1 || st[0].Destination != "app" {
		t.Fatalf("status %+v, want app alone", st)
	}
	r.post("/hooks/shop", nil, []byte(`{"kept":1}`))
	eventually(t, "app got the event", func() bool { return a.count() == 1 })
	// audit's consumer is kept, holding the event for when audit returns.
	if err := r.fwd.Reload(context.Background(), parseConfig(t, two, a.URL)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "audit got the event it missed while removed", func() bool { return a.count() == 2 })
	if err := r.fwd.Pause("shop", "nope"); err == nil {
		t.Error("pausing an unknown destination succeeded")
	}
}
