package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNearItsLimitTheStorePurgesDeliveredWebhooksOldestFirst posts far
// more delivered webhooks than the store's limit holds: every one must be
// accepted, the oldest delivered ones making room, while the webhooks of a
// paused destination, never delivered, all stay.
func TestNearItsLimitTheStorePurgesDeliveredWebhooksOldestFirst(t *testing.T) {
	t.Parallel()
	const limit = 2 << 20
	st := storetest.Open(t, store.Options{MaxBytes: limit})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	busy, err := st.Consumer(ctx, "busy", "app", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.Consumer(ctx, "held", "app", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PauseConsumer(ctx, "held", "app", true); err != nil {
		t.Fatal(err)
	}
	publish := func(route, id string) {
		t.Helper()
		e := envelope(id, fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 2000)))
		e.Route = route
		testkit.Eventually(t, 10*time.Second, "webhook "+id+" still refused", func() bool {
			_, err := st.Publish(ctx, e)
			return err == nil
		})
	}
	const undelivered = 50
	for i := range undelivered {
		publish("held", fmt.Sprintf("held-%d", i))
	}
	n := 0
	for n*2100 < 3*limit {
		for range 100 {
			publish("busy", fmt.Sprintf("busy-%d", n))
			n++
		}
		batch, err := busy.Fetch(100, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	h := st.Health()
	t.Logf("%d delivered webhooks posted: used %d of %d, purged %d", n, h.Used, h.Limit, h.Purged)
	if h.Purged == 0 || h.Used > limit {
		t.Errorf("after %d delivered webhooks of 2 KB: purged %d, used %d of %d; want some purged, within the limit", n, h.Purged, h.Used, limit)
	}
	if _, _, err := st.Event(ctx, "busy-0", "busy"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the oldest delivered webhook: %v, want purged (ErrNotFound)", err)
	}
	if _, _, err := st.Event(ctx, fmt.Sprintf("busy-%d", n-1), "busy"); err != nil {
		t.Errorf("the newest delivered webhook: %v, want kept", err)
	}
	info, err := held.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != undelivered {
		t.Errorf("the paused destination has %d webhooks pending, want all %d", info.NumPending, undelivered)
	}
	for i := range undelivered {
		if _, _, err := st.Event(ctx, fmt.Sprintf("held-%d", i), "held"); err != nil {
			t.Errorf("undelivered webhook held-%d: %v, want kept", i, err)
		}
	}
}
