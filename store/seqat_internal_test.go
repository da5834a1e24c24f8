package store

import (
	"fmt"
	"testing"
	"time"
)

// A search's window starts at the first message stored at or after its
// start, also when the message stored then is deleted since, and covers
// nothing when nothing was stored since.
func TestASearchWindowStartsAtTheFirstMessageStoredSinceItsStart(t *testing.T) {
	t.Parallel()
	ctx, s, _ := storeBehindProxy(t)
	publish := func(n int) uint64 {
		t.Helper()
		ack, err := s.js.Publish(ctx, fmt.Sprintf("webhooks.shop.%d", n), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	first := publish(1)
	since := time.Now()
	second := publish(2)
	third := publish(3)
	after := time.Now()
	last := third + 1
	check := func(what string, at time.Time, want uint64) {
		t.Helper()
		if got, err := s.seqAt(ctx, at, last); err != nil || got != want {
			t.Errorf("%s: the window starts at %d (%v), want %d", what, got, err, want)
		}
	}
	check("since the second", since, second)
	check("since before the first", since.Add(-time.Hour), first)
	check("since after the last", after, last)
	if err := s.main.DeleteMsg(ctx, second); err != nil {
		t.Fatal(err)
	}
	check("since the second, deleted", since, third)
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
