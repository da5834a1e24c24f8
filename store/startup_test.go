package store_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jethook/jethook/store"
)

// natsOn starts a JetStream nats-server on a loopback port, shut down
// when the test ends.
func natsOn(t *testing.T, port int, dir string) error {
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		MaxPayload: 8 << 20, NoLog: true, NoSigs: true,
	})
	if err != nil {
		return err
	}
	t.Cleanup(s.Shutdown)
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("nats-server on port %d did not start", port)
	}
	return nil
}

// A jethook started beside its NATS server (docker compose up, a new
// rollout) must wait for it rather than exit.
func TestOpenWaitsForAnExternalServerThatIsStillStarting(t *testing.T) {
	t.Parallel()
	port, dir := testkit.FreePort(t), t.TempDir()
	started := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond) // the server comes up after jethook
		started <- natsOn(t, port, dir)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Options{URL: fmt.Sprintf("nats://127.0.0.1:%d", port)})
	if err != nil {
		t.Fatalf("Open before the server was up: %v", err)
	}
	defer st.Close()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("Open returned before the server had started")
	}
	if err := st.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
}

// A mistake the cluster will not outgrow is reported at once.
func TestOpenDoesNotWaitOnAConfigurationError(t *testing.T) {
	t.Parallel()
	port := testkit.FreePort(t)
	if err := natsOn(t, port, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := store.Open(context.Background(), store.Options{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Replicas: 3})
	if err == nil {
		t.Fatal("3 replicas on a single server: no error")
	}
	if !strings.Contains(err.Error(), "stream WEBHOOKS") {
		t.Errorf("error %q does not name the stream", err)
	}
	// Not a timing assertion on speed: a retried error would take the
	// whole start-up wait (a minute) before it surfaced.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s: the error was retried", took)
	}
}

// A server that takes the connection but does not speak NATS yet — frozen,
// or a proxy in front of it (a service mesh's, a load balancer) whose
// upstream is not ready — is a server still starting too: jethook waits,
// whether the connection stays silent or is hung up at once.
func TestOpenWaitsForAServerThatAcceptsButDoesNotAnswerYet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		refuse  func(net.Conn) // what the first connection gets
		refused int
	}{
		{"silent", func(c net.Conn) { t.Cleanup(func() { c.Close() }) }, 1},
		{"hung up", func(c net.Conn) { c.(*net.TCPConn).SetLinger(0); c.Close() }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gate := newGate(t, testkit.NATSServer(t), tc.refused, tc.refuse)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := store.Open(ctx, store.Options{URL: gate.url})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer st.Close()
			if n := gate.accepted.Load(); n <= int64(tc.refused) {
				t.Fatalf("%d connections, want more than the %d refused", n, tc.refused)
			}
			if err := st.Ready(ctx); err != nil {
				t.Fatalf("ready: %v", err)
			}
		})
	}
}

// gate accepts connections for a NATS server: the first few get refuse,
// the rest are relayed.
type gate struct {
	url      string
	accepted atomic.Int64
}

func newGate(t *testing.T, server string, refused int, refuse func(net.Conn)) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	g := &gate{url: "nats://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if g.accepted.Add(1) <= int64(refused) {
				refuse(c)
				continue
			}
			s, err := net.Dial("tcp", strings.TrimPrefix(server, "nats://"))
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			go io.Copy(s, c)
			go io.Copy(c, s)
		}
	}()
	return g
}
