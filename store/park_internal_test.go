package store

import (
	"context"
	"testing"
	"time"
)

// A parked webhook's message is acked, so only the parked and due records
// tell the purge near the store's limit which webhooks are still waiting.
func TestParkedRefsFindTheOldestWaitingWebhookOfEachRoute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	due := time.Now().Add(time.Hour)
	for _, p := range []struct {
		route string
		seq   uint64
	}{{"shop", 9}, {"shop", 4}, {"github", 7}} {
		if err := s.Park(ctx, p.route, "app", "evt", Parked{Seq: p.seq, Attempts: 1, FirstSeen: time.Now(), Due: due}); err != nil {
			t.Fatal(err)
		}
	}
	refs, err := s.parkedRefs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if refs["shop"] != 4 || refs["github"] != 7 || len(refs) != 2 {
		t.Errorf("refs %v, want shop 4 and github 7", refs)
	}
}
