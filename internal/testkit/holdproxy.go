package testkit

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// HoldingProxy relays NATS connections to a server and can hold back the
// next JetStream delivery the server sends (a MSG or HMSG whose reply
// subject is an ack subject), and with it everything the server sends
// after it on that connection, as a stalled server or client would.
type HoldingProxy struct {
	URL    string // nats://host:port of the proxy
	hold   atomic.Int64
	pass   atomic.Int64
	held   atomic.Bool
	prefix atomic.Pointer[string]
}

// NewHoldingProxy relays to server (a nats:// URL) for the test's
// duration.
func NewHoldingProxy(t testing.TB, server string) *HoldingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &HoldingProxy{URL: "nats://" + ln.Addr().String()}
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

// HoldNext holds back the next delivery for d.
func (p *HoldingProxy) HoldNext(d time.Duration) { p.HoldAfter(0, d) }

// HoldAfter holds back the delivery after the next n for d.
func (p *HoldingProxy) HoldAfter(n int, d time.Duration) {
	p.pass.Store(int64(n))
	p.hold.Store(int64(d))
}

// Only makes the proxy hold, and count for HoldAfter, only deliveries
// whose ack subject starts with prefix ("$JS.ACK.STREAM.CONSUMER." for
// one consumer's).
func (p *HoldingProxy) Only(prefix string) { p.prefix.Store(&prefix) }

// Held reports whether a delivery was held back.
func (p *HoldingProxy) Held() bool { return p.held.Load() }

// relay copies what the server sends to the client, frame by frame.
func (p *HoldingProxy) relay(client io.Writer, srv io.Reader) {
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
			if replied && p.matches(f[3]) && p.hold.Load() > 0 && p.pass.Add(-1) < 0 {
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

func (p *HoldingProxy) matches(reply string) bool {
	prefix := "$JS.ACK."
	if only := p.prefix.Load(); only != nil {
		prefix = *only
	}
	return strings.HasPrefix(reply, prefix)
}
