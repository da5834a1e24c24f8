package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// rawJetStream connects to a store opened with ClientListen, to write
// messages as something other than jethook (or an earlier jethook) would.
func rawJetStream(t *testing.T, addr string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// The retained webhooks cost no memory per event in the server: however
// many are stored, each route, and each destination's dead letters and
// attempts, are one subject.
func TestManyWebhooksShareOneSubjectPerRoute(t *testing.T) {
	t.Parallel()
	addr := testkit.FreeAddr(t)
	st := storetest.Open(t, store.Options{ClientListen: addr})
	ctx := context.Background()
	for i := range 200 {
		e := envelope(fmt.Sprintf("evt-%d", i), `{}`)
		if i%2 == 1 {
			e.Route = "shop"
		}
		if _, err := st.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
		st.LogAttempt(store.Attempt{Time: time.Now(), Route: e.Route, Destination: "app", EventID: e.EventID, Attempt: 1, Outcome: "delivered"})
	}
	// Attempts publishes the records still waiting for others of their
	// destination; each destination's are batched into fewer messages.
	if as, err := st.Attempts(ctx, "evt-199"); err != nil || len(as) != 1 {
		t.Fatalf("attempts of evt-199: %+v, %v", as, err)
	}
	js := rawJetStream(t, addr)
	for stream, want := range map[string]int{store.StreamName: 2, store.AttemptStreamName: 2} {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 5*time.Second, stream+" holds every record", func() bool {
			info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
			if stream == store.AttemptStreamName {
				return err == nil && len(info.State.Subjects) == want
			}
			return err == nil && info.State.Msgs == 200
		})
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		if len(info.State.Subjects) != want {
			t.Errorf("%s has %d subjects for 200 events, want %d: %v", stream, len(info.State.Subjects), want, info.State.Subjects)
		}
	}
	for _, id := range []string{"evt-0", "evt-199"} {
		if _, _, err := st.Event(ctx, id, ""); err != nil {
			t.Errorf("event %s: %v", id, err)
		}
		if as, err := st.Attempts(ctx, id); err != nil || len(as) != 1 || as[0].EventID != id {
			t.Errorf("attempts of %s: %+v, %v", id, as, err)
		}
	}
}

// The stream's in-memory window is short; the index remembers ids for the
// whole dedup window, also across a restart.
func TestDedupOutlastsTheStreamsOwnWindow(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), testkit.FreeAddr(t)
	ctx := context.Background()
	opts := store.Options{DataDir: dir, ClientListen: addr, RaceWindow: 100 * time.Millisecond, DedupWindow: time.Hour}
	st, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Publish(ctx, envelope("evt-1", `{"n":1}`))
	if err != nil || first.Duplicate {
		t.Fatalf("first copy: %+v, %v", first, err)
	}
	// A probe id stored after evt-1: once the stream takes it again, the
	// stream's window no longer holds evt-1 either.
	js := rawJetStream(t, addr)
	probe := func() bool {
		ack, err := js.Publish(ctx, "webhooks.probe.v2", nil, jetstream.WithMsgID("probe:1"))
		return err == nil && !ack.Duplicate
	}
	probe()
	testkit.Eventually(t, 10*time.Second, "the stream's own window to pass", probe)

	second, err := st.Publish(ctx, envelope("evt-1", `{"n":1}`))
	if err != nil || !second.Duplicate || second.Seq != first.Seq {
		t.Fatalf("second copy: %+v, %v; want a duplicate of seq %d", second, err, first.Seq)
	}
	st.Close()

	st, err = store.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	third, err := st.Publish(ctx, envelope("evt-1", `{"n":1}`))
	if err != nil || !third.Duplicate || third.Seq != first.Seq {
		t.Fatalf("after a restart: %+v, %v; want a duplicate of seq %d", third, err, first.Seq)
	}
}

// A data dir without an index (written before the index existed, or with
// the index deleted) is indexed at start: every lookup answers as before.
// Messages on the earlier layout's per-event subjects are found too.
func TestTheIndexIsRebuiltFromTheStreams(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), testkit.FreeAddr(t)
	ctx := context.Background()
	opts := store.Options{DataDir: dir, ClientListen: addr}
	st, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Publish(ctx, envelope("new-layout", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	// As the earlier layout wrote them: the event's token ends each subject.
	js := rawJetStream(t, addr)
	old := nats.NewMsg("webhooks.github." + store.EventToken("old-layout"))
	old.Header = nats.Header{"Jethook-Event-Id": {"old-layout"}, "Jethook-Method": {"POST"}, "H-Content-Type": {"application/json"}}
	old.Data = []byte(`{"n":2}`)
	ack, err := js.PublishMsg(ctx, old, jetstream.WithMsgID("github:old-layout"))
	if err != nil {
		t.Fatal(err)
	}
	dl := nats.NewMsg("dlq.github.app." + store.EventToken("old-layout"))
	dl.Header = nats.Header{"Jethook-Event-Id": {"old-layout"}, "Jethook-Destination": {"app"}, "Jethook-Seq": {fmt.Sprint(ack.Sequence)}, "Jethook-Reason": {"permanent"}}
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"time":%q,"route":"github","destination":"app","event_id":"old-layout","attempt":1,"status":404,"latency_ns":1000,"outcome":"permanent"}`, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := js.Publish(ctx, "attempts.github.app."+store.EventToken("old-layout"), []byte(rec)); err != nil {
		t.Fatal(err)
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
	for _, id := range []string{"new-layout", "old-layout"} {
		e, _, err := st.Event(ctx, id, "github")
		if err != nil || e.EventID != id {
			t.Fatalf("event %s: %+v, %v", id, e, err)
		}
		got, err := st.Publish(ctx, envelope(id, `{}`))
		if err != nil || !got.Duplicate {
			t.Errorf("event %s again: %+v, %v; want a duplicate", id, got, err)
		}
	}
	e, seq, _ := st.Event(ctx, "old-layout", "")
	d, err := st.Delivery(ctx, e, seq, "app")
	if err != nil || d.State != store.StateDeadLettered || d.DeadLetter.Reason != "permanent" {
		t.Errorf("old-layout at app: %+v, %v; want dead-lettered", d, err)
	}
	if as, err := st.Attempts(ctx, "old-layout"); err != nil || len(as) != 1 || as[0].Status != 404 {
		t.Errorf("attempts of old-layout: %+v, %v", as, err)
	}
}
