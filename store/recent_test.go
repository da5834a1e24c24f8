package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func TestRecentEventsPagesARoutesWebhooksNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t, store.Options{})
	// 25 on github, interleaved with 3 times as many on another route.
	sizes := map[string]int{}
	for i := range 25 {
		e := envelope(fmt.Sprintf("gh-%02d", i), fmt.Sprintf(`{"n":%d}`, i))
		sizes[e.EventID] = len(e.Body)
		if _, err := st.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			o := envelope(fmt.Sprintf("other-%02d-%d", i, j), "x")
			o.Route = "stripe"
			if _, err := st.Publish(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ids []string
	var before uint64
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		p, err := st.RecentEvents(ctx, "github", before, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Events {
			if e.Route != "github" || e.Method != "POST" || e.ReceivedAt.IsZero() {
				t.Fatalf("summary %+v: want a github POST with its time", e)
			}
			if e.Size != sizes[e.EventID] {
				t.Fatalf("%s: size %d, want %d", e.EventID, e.Size, sizes[e.EventID])
			}
			ids = append(ids, e.EventID)
		}
		if p.Before == 0 {
			break
		}
		before = p.Before
	}
	if len(ids) != 25 {
		t.Fatalf("%d events over the pages, want 25: %v", len(ids), ids)
	}
	for i, id := range ids {
		if want := fmt.Sprintf("gh-%02d", 24-i); id != want {
			t.Fatalf("event %d is %s, want %s (newest first)", i, id, want)
		}
	}
}

func TestRecentEventsOfARouteWithNoneIsEmpty(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	if _, err := st.Publish(context.Background(), envelope("gh-1", "{}")); err != nil {
		t.Fatal(err)
	}
	p, err := st.RecentEvents(context.Background(), "nothing", 0, 10)
	if err != nil || len(p.Events) != 0 || p.Before != 0 {
		t.Fatalf("got %+v, %v; want an empty last page", p, err)
	}
	if _, err := st.RecentEvents(context.Background(), "a.>", 0, 10); err == nil {
		t.Fatal("a route name with subject wildcards was taken")
	}
}
