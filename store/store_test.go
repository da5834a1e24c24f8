package store_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func envelope(id string, body string) *store.Envelope {
	return &store.Envelope{
		Route:      "github",
		EventID:    id,
		Method:     "POST",
		Host:       "hooks.example.com",
		Proto:      "https",
		RemoteAddr: "192.0.2.7:5123",
		ReceivedAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		Header: map[string][]string{
			"Content-Type":        {"application/json"},
			"X-Github-Delivery":   {id},
			"X-Hub-Signature-256": {"sha256=abc"},
			"X-Multi":             {"one", "two"},
		},
		Body: []byte(body),
	}
}

func TestPublishStoresOnceAndRemembersIDsAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Publish(ctx, envelope("evt-1", `{"a":1}`))
	if err != nil || first.Duplicate {
		t.Fatalf("first publish: %+v, %v", first, err)
	}
	again, err := st.Publish(ctx, envelope("evt-1", `{"a":1}`))
	if err != nil || !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("second publish: %+v, %v; want duplicate of seq %d", again, err, first.Seq)
	}
	st.Close()

	st, err = store.Open(ctx, store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	after, err := st.Publish(ctx, envelope("evt-1", `{"a":1}`))
	if err != nil || !after.Duplicate {
		t.Fatalf("publish after restart: %+v, %v; want duplicate", after, err)
	}
	stats, err := st.Stats(ctx)
	if err != nil || stats.Messages != 1 {
		t.Fatalf("stats %+v, %v; want 1 message", stats, err)
	}
}

func TestAConsumerReadsTheEnvelopeBackByteForByte(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	c, err := st.Consumer(ctx, "github", "app", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	body := "{\"x\":\"\xff\x00 binary\"}\r\n"
	in := envelope("evt-2", body)
	if _, err := st.Publish(ctx, in); err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstreamWait())
	if err != nil {
		t.Fatal(err)
	}
	m := <-batch.Messages()
	if m == nil {
		t.Fatal("no message fetched")
	}
	got, err := store.Decode(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Body, []byte(body)) {
		t.Errorf("body %q, want %q", got.Body, body)
	}
	if got.EventID != "evt-2" || got.Route != "github" || got.Method != "POST" || got.Host != in.Host ||
		got.Proto != "https" || got.RemoteAddr != in.RemoteAddr || !got.ReceivedAt.Equal(in.ReceivedAt) {
		t.Errorf("envelope %+v, want %+v", got, in)
	}
	for k, want := range in.Header {
		if g := got.Header[k]; len(g) != len(want) || (len(g) > 0 && g[len(g)-1] != want[len(want)-1]) {
			t.Errorf("header %s = %q, want %q", k, g, want)
		}
	}
}

func TestADeadLetterKeepsTheOriginalAndWhyItFailed(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	in := envelope("evt-3", `{"n":3}`)
	now := time.Now().UTC().Truncate(time.Millisecond)
	dl := store.DeadLetter{Envelope: in, Destination: "app", Seq: 9, Reason: "permanent",
		LastStatus: 404, LastError: "line one\nline two", Attempts: 1, FirstSeen: now, LastAttempt: now}
	for range 2 { // stored once even if the forwarder crashed and tried again
		if err := st.AddDeadLetter(ctx, dl); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.DeadLetters(ctx, "dlq.github.app.*", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d dead letters, want 1", len(got))
	}
	d := got[0]
	if d.Reason != "permanent" || d.LastStatus != 404 || d.Attempts != 1 || d.Seq != 9 ||
		d.Destination != "app" || d.LastError != "line one line two" || !d.FirstSeen.Equal(now) ||
		string(d.Envelope.Body) != `{"n":3}` || d.Envelope.EventID != "evt-3" {
		t.Errorf("dead letter %+v", d)
	}
}

func TestPublishOnAClosedStoreIsUnavailable(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	st.Close()
	_, err := st.Publish(context.Background(), envelope("evt-4", "{}"))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestAnEventIsFoundByItsIDWhateverCharactersItHolds(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	id := "evt.with*subject>tokens and spaces"
	stored, err := st.Publish(ctx, envelope(id, `{"find":"me"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Publish(ctx, envelope("other", `{}`)); err != nil {
		t.Fatal(err)
	}
	e, seq, err := st.Event(ctx, id, "")
	if err != nil || seq != stored.Seq || e.EventID != id || string(e.Body) != `{"find":"me"}` {
		t.Fatalf("Event(%q) = %+v, %d, %v", id, e, seq, err)
	}
	if _, _, err := st.Event(ctx, "never-sent", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: err = %v, want ErrNotFound", err)
	}
}
