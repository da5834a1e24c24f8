package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/internal/testkit"
)

// A record source reads every record even when a batch comes back empty
// because nats.go gave up on it before the server answered, as it does a
// second after a FetchNoWait: here a proxy holds back the first record the
// server delivers for longer than that, as a stalled server or process
// would. A TakeOver that took the empty batch for the end lost the events
// that waited behind their keys.
func TestEachReadsEveryRecordWhenAFetchEndsBeforeTheServerAnswers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testkit.NATSServer(t)
	_, js, _ := recordsStream(ctx, t, url)
	const records = 5
	for i := range records {
		if _, err := js.Publish(ctx, "records.due", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}

	px := testkit.NewHoldingProxy(t, url)
	_, _, st := recordsStream(ctx, t, px.URL)
	px.HoldNext(1500 * time.Millisecond)
	got := 0
	err := recordSource{st, jetstream.OrderedConsumerConfig{HeadersOnly: true}}.each(ctx, func(jetstream.Msg) { got++ })
	if err != nil || got != records {
		t.Errorf("each read %d of %d records (%v)", got, records, err)
	}
	if !px.Held() {
		t.Error("the proxy held back no delivery: the fetch was not cut short")
	}
}

// A record source fails, and does not wait for ever, when its connection
// closes between two fetches: each fetch makes the consumer anew, and
// nats.go, unless told otherwise, tries that without end, whatever the
// context. A read for the admin API (a retry now, a page of dead letters)
// then never answered, and never let go of its goroutine.
func TestEachFailsWhenItsConnectionClosesBetweenFetches(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, js, st := recordsStream(ctx, t, testkit.NATSServer(t))
	if _, err := js.Publish(ctx, "records.due", nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- recordSource{st, jetstream.OrderedConsumerConfig{}}.each(ctx, func(jetstream.Msg) { nc.Close() })
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("each read to the end on a closed connection")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("each still waits 30 s after its connection closed")
	}
}

// recordsStream connects to the NATS server at url, for the test's
// duration, and makes (or finds) the stream RECORDS there.
func recordsStream(ctx context.Context, t *testing.T, url string) (*nats.Conn, jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RECORDS", Subjects: []string{"records.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, st
}

// storeBehindProxy opens a store on a NATS server reached through a
// holding proxy; the context ends with the test, a minute at most.
func storeBehindProxy(t *testing.T) (context.Context, *Store, *testkit.HoldingProxy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	px := testkit.NewHoldingProxy(t, testkit.NATSServer(t))
	s, err := Open(ctx, Options{URL: px.URL, DataDir: t.TempDir(), WaitingEvery: time.Second, PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return ctx, s, px
}
