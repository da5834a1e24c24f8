package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// Event ids come from each route's provider, so they are unique only
// within a route: two routes may see the same id (two partners numbering
// their events from 1), and each must store its event.
func TestTheSameEventIDOnTwoRoutesIsStoredForEachAndOnceForOne(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	for _, c := range []struct {
		route string
		dup   bool
	}{{"github", false}, {"shop", false}, {"github", true}, {"shop", true}} {
		e := envelope("1", `{"n":1}`)
		e.Route = c.route
		got, err := st.Publish(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if got.Duplicate != c.dup {
			t.Fatalf("event 1 on route %s: duplicate = %v, want %v", c.route, got.Duplicate, c.dup)
		}
	}
	if s, err := st.Stats(ctx); err != nil || s.Messages != 2 {
		t.Fatalf("stream holds %+v, %v; want 2 webhooks", s, err)
	}
	for _, route := range []string{"github", "shop"} {
		if e, _, err := st.Event(ctx, "1", route); err != nil || e.Route != route {
			t.Errorf("event 1 on route %s: %+v, %v", route, e, err)
		}
	}
	if e, _, err := st.Event(ctx, "1", ""); err != nil || e.Route != "shop" {
		t.Errorf("event 1 on any route: %+v, %v; want the latest, on shop", e, err)
	}
	for _, route := range []string{"other", "*", ">", "git.hub", "a b"} {
		if _, _, err := st.Event(ctx, "1", route); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("event 1 on route %q: err = %v, want ErrNotFound", route, err)
		}
	}
}

// A replay's dedup key is derived from its dead letter's sequence; a
// provider id that looks the same must neither be taken for that replay
// (and be answered "duplicate" without being stored) nor block it.
func TestAnEventIDShapedLikeAReplayIsStillStored(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	if _, err := st.Publish(ctx, envelope("evt-1", `{}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.AddDeadLetter(ctx, store.DeadLetter{Envelope: envelope("evt-1", `{}`), Destination: "app", Seq: 1, Reason: "permanent"}); err != nil {
		t.Fatal(err)
	}
	dls, err := st.DeadLetters(ctx, "dlq.>", 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	if r, err := st.Replay(ctx, dls); err != nil || r.Queued != 1 {
		t.Fatalf("replay %+v, %v", r, err)
	}
	for _, id := range []string{"replay/1", "replay/2"} {
		got, err := st.Publish(ctx, envelope(id, `{"looks":"like a replay"}`))
		if err != nil || got.Duplicate {
			t.Fatalf("event %s: %+v, %v; want stored", id, got, err)
		}
	}
	// And the other way round: the second dead letter's replay is queued
	// though an event called replay/2 is stored.
	if err := st.AddDeadLetter(ctx, store.DeadLetter{Envelope: envelope("evt-1", `{}`), Destination: "audit", Seq: 1, Reason: "permanent"}); err != nil {
		t.Fatal(err)
	}
	dls, err = st.DeadLetters(ctx, "dlq.github.audit.*", 10)
	if err != nil || len(dls) != 1 || dls[0].DLQSeq != 2 {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	if r, err := st.Replay(ctx, dls); err != nil || r.Queued != 1 {
		t.Fatalf("replay of dead letter 2 after an event called replay/2: %+v, %v", r, err)
	}
}

// A webhook with a signed key is a duplicate of an earlier one with the
// same key under any event id: right away (the stream's own window),
// once indexed, and after the index is rebuilt from the stream.
func TestTheSignedKeyDedupsUnderAnyEventID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	// The stream's own window is short, so that after the restart only the
	// rebuilt index can answer.
	opts := store.Options{DataDir: dir, DedupWindow: time.Hour, RaceWindow: 100 * time.Millisecond}
	st, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	signed := func(id, key string) *store.Envelope {
		e := envelope(id, `{"n":1}`)
		e.SignedKey = key
		return e
	}
	stored := time.Now()
	first, err := st.Publish(ctx, signed("delivery-1", "signed:k1"))
	if err != nil || first.Duplicate {
		t.Fatalf("first: %+v, %v", first, err)
	}
	duplicate := func(e *store.Envelope) {
		t.Helper()
		got, err := st.Publish(ctx, e)
		if err != nil || !got.Duplicate || got.Seq != first.Seq {
			t.Errorf("%s under %s: %+v, %v; want a duplicate of seq %d", e.EventID, e.SignedKey, got, err, first.Seq)
		}
	}
	duplicate(signed("delivery-2", "signed:k1"))
	// The stream keys its own window on the signed key; the same id
	// signed apart is told from the index, once it holds the first.
	if ok, err := st.Has(ctx, "github", "delivery-1"); !ok || err != nil {
		t.Fatalf("Has(delivery-1) = %v, %v", ok, err)
	}
	duplicate(signed("delivery-1", "signed:k2"))
	other, err := st.Publish(ctx, signed("delivery-3", "signed:k3"))
	if err != nil || other.Duplicate {
		t.Fatalf("another signed webhook: %+v, %v; want it stored", other, err)
	}
	st.Close()
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}

	st, err = store.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testkit.Eventually(t, time.Second, "the stream's window to pass", func() bool { return time.Since(stored) > 3*opts.RaceWindow })
	got, err := st.Publish(ctx, signed("delivery-4", "signed:k1"))
	if err != nil || !got.Duplicate || got.Seq != first.Seq {
		t.Errorf("after the index was rebuilt: %+v, %v; want a duplicate of seq %d", got, err, first.Seq)
	}
}
