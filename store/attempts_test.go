package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func TestTheAttemptLogGivesBackAnEventsAttemptsInOrder(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{AttemptLogAge: time.Hour})
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	// An id with subject wildcards: the token keeps the subject valid.
	const id = "evt.*.>1"
	want := []store.Attempt{
		{Time: at, Route: "shop", Destination: "app", EventID: id, Attempt: 1, Error: "dial tcp: connection refused",
			Latency: 3 * time.Millisecond, Outcome: "transient", Next: time.Second},
		{Time: at.Add(time.Second), Route: "shop", Destination: "app", EventID: id, Attempt: 2, Status: 503,
			Latency: 40 * time.Millisecond, Outcome: "transient", Next: 2 * time.Second, Parked: true},
		{Time: at.Add(3 * time.Second), Route: "shop", Destination: "app", EventID: id, Attempt: 3, Status: 200,
			Latency: 25 * time.Millisecond, Outcome: "delivered"},
	}
	for _, a := range want {
		st.LogAttempt(a)
		st.LogAttempt(store.Attempt{Time: a.Time, Route: "shop", Destination: "app", EventID: "other", Attempt: a.Attempt, Outcome: "delivered"})
	}
	var got []store.Attempt
	testkit.Eventually(t, 5*time.Second, "three attempts logged", func() bool {
		var err error
		got, err = st.Attempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == len(want)
	})
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) {
			t.Errorf("attempt %d time %v, want %v", i+1, got[i].Time, want[i].Time)
		}
		got[i].Time = want[i].Time
		if got[i] != want[i] {
			t.Errorf("attempt %d read back as\n %+v, want\n %+v", i+1, got[i], want[i])
		}
	}
	if none, err := st.Attempts(ctx, "never-seen"); err != nil || len(none) != 0 {
		t.Errorf("attempts of an unknown event: %v, %v", none, err)
	}

	for _, tc := range []struct {
		name        string
		route, dest string
		since       time.Time
		want        int // the attempt number; 0: none
	}{
		{"the latest attempt to the destination", "shop", "app", at, 3},
		{"none logged since a later time", "shop", "app", at.Add(4 * time.Second), 0},
		{"none to another destination", "shop", "crm", at, 0},
		{"none of another route", "billing", "app", at, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ok, err := st.LastAttempt(tc.route, tc.dest, id, tc.since)
			switch {
			case err != nil:
				t.Fatal(err)
			case tc.want == 0 && ok:
				t.Errorf("got attempt %+v, want none", a)
			case tc.want != 0 && (!ok || a.Attempt != tc.want):
				t.Errorf("got attempt %d (found %v), want %d", a.Attempt, ok, tc.want)
			}
		})
	}
}

func TestOnlyMessagesStoredBeforeTheEmbeddedServerStartedAreInherited(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	first, err := store.Open(ctx, store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 3 {
		got, err := first.Publish(ctx, &store.Envelope{Route: "shop", EventID: fmt.Sprintf("evt_%d", i), Body: []byte("{}")})
		if err != nil {
			t.Fatal(err)
		}
		last = got.Seq
	}
	if first.Inherited(1) {
		t.Error("a message this run stored is inherited")
	}
	first.Close()
	second, err := store.Open(ctx, store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if !second.Inherited(last) {
		t.Errorf("message %d, stored before the restart, is not inherited", last)
	}
	if second.Inherited(last + 1) {
		t.Errorf("message %d, stored after the restart, is inherited", last+1)
	}
}

func TestBacklogsCountPendingAndUnsettledMessagesPerDestination(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	// Route and destination names with "_" that the durable name
	// route__destination could not tell apart.
	app, err := st.Consumer(ctx, "shop_", "_app", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Consumer(ctx, "shop_", "crm", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		e := envelope(id, "{}")
		e.Route = "shop_"
		if _, err := st.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := app.Fetch(1, jetstreamWait())
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() { // fetched, not acked: unsettled
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	bs, err := st.Backlogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Backlog{}
	for _, b := range bs {
		got[b.Route+"|"+b.Destination] = b
	}
	want := map[string]store.Backlog{
		"shop_|_app": {Route: "shop_", Destination: "_app", Pending: 2, AckPending: 1},
		"shop_|crm":  {Route: "shop_", Destination: "crm", Pending: 3, AckPending: 0},
	}
	if len(got) != len(want) {
		t.Fatalf("backlogs %+v, want %+v", bs, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("backlog %s = %+v, want %+v", k, got[k], w)
		}
	}
}
