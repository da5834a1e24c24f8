package store

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
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

	px := newHoldingProxy(t, url)
	_, _, st := recordsStream(ctx, t, px.url)
	px.holdNext(1500 * time.Millisecond)
	got := 0
	err := recordSource{st, jetstream.OrderedConsumerConfig{HeadersOnly: true}}.each(ctx, func(jetstream.Msg) { got++ })
	if err != nil || got != records {
		t.Errorf("each read %d of %d records (%v)", got, records, err)
	}
	if !px.held.Load() {
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
func storeBehindProxy(t *testing.T) (context.Context, *Store, *holdingProxy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	px := newHoldingProxy(t, testkit.NATSServer(t))
	s, err := Open(ctx, Options{URL: px.url, DataDir: t.TempDir(), WaitingEvery: time.Second, PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return ctx, s, px
}

// holdingProxy relays a NATS connection and can hold back the next
// JetStream delivery the server sends (a MSG or HMSG whose reply subject
// is an ack subject), and with it everything the server sends after it.
type holdingProxy struct {
	url  string
	hold atomic.Int64 // how long to hold the next delivery, in nanoseconds; 0: none
	pass atomic.Int64 // how many deliveries to let through before the one held
	held atomic.Bool  // a delivery was held
}

func newHoldingProxy(t *testing.T, server string) *holdingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &holdingProxy{url: "nats://" + ln.Addr().String()}
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			srv, err := net.Dial("tcp", strings.TrimPrefix(server, "nats://"))
			if err != nil {
				client.Close()
				continue
			}
			go func() {
				_, _ = io.Copy(srv, client)
				srv.Close()
			}()
			go func() {
				p.relay(client, srv)
				client.Close()
			}()
		}
	}()
	return p
}

func (p *holdingProxy) holdNext(d time.Duration) { p.hold.Store(int64(d)) }

// holdAfter holds back the delivery after the next n for d.
func (p *holdingProxy) holdAfter(n int, d time.Duration) {
	p.pass.Store(int64(n))
	p.hold.Store(int64(d))
}

// relay copies what the server sends to the client, frame by frame.
func (p *holdingProxy) relay(client io.Writer, srv io.Reader) {
	r := bufio.NewReader(srv)
	for {
		frame, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		// MSG <subject> <sid> [reply] <size>, HMSG <subject> <sid> [reply] <header size> <size>
		f := strings.Fields(string(frame))
		if len(f) > 0 && (f[0] == "MSG" || f[0] == "HMSG") {
			size, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return
			}
			body := make([]byte, size+2)
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			frame = append(frame, body...)
			replied := f[0] == "MSG" && len(f) == 5 || f[0] == "HMSG" && len(f) == 6
			if replied && strings.HasPrefix(f[3], "$JS.ACK.") && p.hold.Load() > 0 && p.pass.Add(-1) < 0 {
				if d := p.hold.Swap(0); d > 0 {
					p.held.Store(true)
					time.Sleep(time.Duration(d))
				}
			}
		}
		if _, err := client.Write(frame); err != nil {
			return
		}
	}
}
