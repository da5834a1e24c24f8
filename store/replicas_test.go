package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// Two replicas on one external server each index what the other stores:
// one finds at once a webhook the other stored a moment ago, takes it
// again as a duplicate, and gives back the attempts the other logged.
func TestAReplicaFindsDedupsAndShowsWhatAnotherStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testkit.NATSServer(t)
	a := storetest.Open(t, store.Options{URL: url, DataDir: t.TempDir(), AttemptLogAge: time.Hour})
	b := storetest.Open(t, store.Options{URL: url, DataDir: t.TempDir(), AttemptLogAge: time.Hour})

	for i, id := range []string{"evt-r1", "evt-r2", "evt-r3"} {
		stored, err := a.Publish(ctx, envelope(id, `{"n":1}`))
		if err != nil || stored.Duplicate {
			t.Fatalf("a stores %s: %+v, %v", id, stored, err)
		}
		// No wait: the lookup waits for b's index to read the stream.
		e, seq, err := b.Event(ctx, id, "github")
		if err != nil || seq != stored.Seq || e.EventID != id {
			t.Fatalf("b looks %s up: seq %d, %v; want seq %d", id, seq, err, stored.Seq)
		}
		again, err := b.Publish(ctx, envelope(id, `{"n":1}`))
		if err != nil || !again.Duplicate || again.Seq != stored.Seq {
			t.Fatalf("b stores %s again: %+v, %v; want a duplicate of seq %d", id, again, err, stored.Seq)
		}
		a.LogAttempt(store.Attempt{Time: time.Now(), Route: "github", Destination: "app", EventID: id,
			Attempt: i + 1, Status: 200, Outcome: "delivered"})
	}
	for i, id := range []string{"evt-r1", "evt-r2", "evt-r3"} {
		var got []store.Attempt
		// a publishes its records a few milliseconds after it made them.
		testkit.Eventually(t, 5*time.Second, "b gives back the attempt a logged of "+id, func() bool {
			var err error
			if got, err = b.Attempts(ctx, id); err != nil {
				t.Fatal(err)
			}
			return len(got) > 0
		})
		if len(got) != 1 || got[0].Attempt != i+1 || got[0].Outcome != "delivered" {
			t.Errorf("b gives back %+v for %s, want attempt %d delivered", got, id, i+1)
		}
	}
}
