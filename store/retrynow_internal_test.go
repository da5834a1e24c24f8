package store

import (
	"testing"
	"time"
)

// Retrying a parked webhook now finds its record even when the fetch that
// looks for it ends before the server answers, as nats.go ends a
// FetchNoWait a second after asking: here a proxy holds back the server's
// delivery for longer than that, as a stalled server or process would.
// Taking the empty fetch for "no records" answered "not parked".
func TestRetryNowFindsTheParkedRecordWhenAFetchEndsBeforeTheServerAnswers(t *testing.T) {
	t.Parallel()
	ctx, s, px := storeBehindProxy(t)
	now := time.Now()
	for i, id := range []string{"evt_1", "evt_2"} {
		p := Parked{Seq: uint64(i + 1), Attempts: 1, FirstSeen: now, Due: now.Add(time.Hour)}
		if err := s.Park(ctx, "shop", "app", id, p); err != nil {
			t.Fatal(err)
		}
	}
	px.HoldNext(1500 * time.Millisecond)
	if err := s.RetryNow(ctx, "shop", "app", "evt_2"); err != nil {
		t.Errorf("retry now of a parked webhook: %v", err)
	}
	if !px.Held() {
		t.Error("the proxy held back no delivery: the fetch was not cut short")
	}
}
