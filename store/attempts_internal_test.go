package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestAttemptRecordsMadeTogetherAreStoredAsOneMessageAndIndexedEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openEmbedded(ctx, t)
	const events = 300
	at := time.Now().UTC()
	for i := range events {
		for _, dest := range []string{"app", "crm"} {
			s.LogAttempt(Attempt{Time: at.Add(time.Duration(i) * time.Microsecond), Route: "shop", Destination: dest,
				EventID: fmt.Sprintf("evt_%d", i), Attempt: 1, Status: 200, Outcome: "delivered"})
		}
	}
	for i := range events {
		id := fmt.Sprintf("evt_%d", i)
		got, err := s.Attempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].EventID != id || got[1].EventID != id || got[0].Destination == got[1].Destination {
			t.Fatalf("attempts of %s: %+v, want one to app and one to crm", id, got)
		}
	}
	st, err := s.js.Stream(ctx, AttemptStreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Records of one destination made within the linger share a message.
	if n := info.State.Msgs; n == 0 || n >= 2*events {
		t.Fatalf("%d messages in %s for %d records, want fewer messages than records", n, AttemptStreamName, 2*events)
	}
	t.Logf("%d records in %d messages", 2*events, info.State.Msgs)
}
