package store

import (
	"fmt"
	"testing"
	"time"
)

// A search's window starts at the first webhook stored at or after its
// start even when the fetch that looks for it ends before the server
// answers, as nats.go ends a FetchNoWait a second after asking: here a
// proxy holds back the server's delivery for longer than that, as a
// stalled server or process would. Taking the empty fetch for "nothing
// stored since" made the search cover nothing and say it found nothing.
func TestASearchFindsTheStartOfItsWindowWhenAFetchEndsBeforeTheServerAnswers(t *testing.T) {
	t.Parallel()
	ctx, s, px := storeBehindProxy(t)
	publish := func(n int) uint64 {
		t.Helper()
		ack, err := s.js.Publish(ctx, fmt.Sprintf("webhooks.shop.%d", n), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	publish(1)
	since := time.Now()
	want := publish(2)
	last := publish(3) + 1
	// The index reads the stream through the proxy too: its deliveries
	// must have passed before the test holds one back.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if w, err := s.idx.watermark(StreamName); err == nil && w >= last-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the index did not read the webhooks")
		}
	}

	px.HoldNext(1500 * time.Millisecond)
	got, err := s.seqAt(ctx, since, last)
	if err != nil || got != want {
		t.Errorf("the window stored since %s starts at %d (%v), want %d", since.Format(time.RFC3339Nano), got, err, want)
	}
	if !px.Held() {
		t.Error("the proxy held back no delivery: the fetch was not cut short")
	}
}

// A search with a window makes consumers to find its start and read it:
// none stays on the server after it, where each would be gone through
// for every message stored until its inactive threshold.
func TestASearchLeavesNoConsumerBehind(t *testing.T) {
	t.Parallel()
	ctx, s, _ := storeBehindProxy(t)
	for i := range 3 {
		if _, err := s.js.Publish(ctx, fmt.Sprintf("webhooks.shop.%d", i), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	consumers := func() int {
		t.Helper()
		info, err := s.main.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := consumers()
	for range 3 {
		q := Scan{Route: "shop", Since: time.Now().Add(-time.Hour), Until: time.Now(), Limit: 10}
		if _, err := s.Search(ctx, q, func(Hit) bool { return true }, nil); err != nil {
			t.Fatal(err)
		}
	}
	if after := consumers(); after != before {
		t.Fatalf("%d consumers on the stream before the searches, %d after", before, after)
	}
}
