package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// Catch-up asks the store what it has, where a route's events end before
// a moment, and how far it got.
func TestHasNewestAndCheckpoints(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	cut := time.Now()
	for _, e := range []struct {
		route, id string
		at        time.Time
		caughtUp  string
	}{
		{"github", "a", cut.Add(-2 * time.Minute), "stripe"},
		{"github", "b", cut.Add(-time.Minute), ""},
		{"shop", "c", cut.Add(-time.Second), ""},
		{"github", "d", cut.Add(time.Second), ""},
		{"shop", "e", cut.Add(2 * time.Second), ""},
	} {
		env := envelope(e.id, `{}`)
		env.Route, env.ReceivedAt, env.CaughtUp = e.route, e.at, e.caughtUp
		if _, err := st.Publish(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		route, id string
		want      bool
	}{{"github", "a", true}, {"github", "d", true}, {"shop", "a", false}, {"github", "z", false}} {
		if got, err := st.Has(ctx, c.route, c.id); err != nil || got != c.want {
			t.Errorf("Has(%s, %s) = %v, %v; want %v", c.route, c.id, got, err, c.want)
		}
	}
	for _, c := range []struct {
		route  string
		before time.Time
		want   string
	}{{"github", cut, "b"}, {"github", cut.Add(time.Hour), "d"}, {"github", cut.Add(-90 * time.Second), "a"},
		{"github", cut.Add(-time.Hour), ""}, {"nothing", cut, ""}, {"bad.route", cut, ""}} {
		e, err := st.Newest(ctx, c.route, c.before)
		got := ""
		if e != nil {
			got = e.EventID
		}
		if err != nil || got != c.want {
			t.Errorf("Newest(%s, %v) = %q, %v; want %q", c.route, c.before.Sub(cut), got, err, c.want)
		}
	}
	if e, _, err := st.Event(ctx, "a", "github"); err != nil || e.CaughtUp != "stripe" {
		t.Errorf("event a: %+v, %v; want it marked caught up by stripe", e, err)
	}

	if _, ok, err := st.Checkpoint(ctx, "catch-up.stripe.billing"); ok || err != nil {
		t.Fatalf("a checkpoint before any was set: %v, %v", ok, err)
	}
	for _, v := range []string{"100", "200"} {
		if err := st.SetCheckpoint(ctx, "catch-up.stripe.billing", v); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok, err := st.Checkpoint(ctx, "catch-up.stripe.billing"); v != "200" || !ok || err != nil {
		t.Errorf("checkpoint = %q, %v, %v; want 200", v, ok, err)
	}
}
