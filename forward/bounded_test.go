package forward_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/store"
)

// rawBackend is a TCP server that reads each request, counts it, then
// lets answer write what it likes on the raw connection; the connection
// stays open until the client closes it or close is called.
type rawBackend struct {
	URL      string
	requests atomic.Int64
	open     atomic.Int64 // connections the client has not closed
	peak     atomic.Int64 // most connections open at once
	// close closes the listener and every connection and waits for them.
	close func()
}

func newRawBackend(t *testing.T, answer func(w *bufio.Writer, done <-chan struct{})) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{URL: "http://" + ln.Addr().String()}
	done := make(chan struct{})
	var wg sync.WaitGroup
	b.close = sync.OnceFunc(func() {
		close(done)
		ln.Close()
		wg.Wait()
	})
	t.Cleanup(b.close)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				go func() { <-done; c.Close() }()
				n := b.open.Add(1)
				for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
				}
				defer b.open.Add(-1)
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				b.requests.Add(1)
				w := bufio.NewWriter(c)
				answer(w, done)
				_ = w.Flush()
				_, _ = io.Copy(io.Discard, c) // hold until the client closes
			})
		}
	})
	return b
}

// switchProtocols answers 101 and then says nothing.
func switchProtocols(w *bufio.Writer, _ <-chan struct{}) {
	_, _ = w.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
}

// endless1xx sends 102 Processing every few milliseconds, never a final
// status.
func endless1xx(w *bufio.Writer, done <-chan struct{}) {
	for {
		if _, err := w.WriteString("HTTP/1.1 102 Processing\r\n\r\n"); err != nil || w.Flush() != nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// endlessBody answers 200 and then sends a chunked body that never ends.
func endlessBody(w *bufio.Writer, done <-chan struct{}) {
	_, _ = w.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	for {
		if _, err := w.WriteString("4\r\nmore\r\n"); err != nil || w.Flush() != nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// boundedRetry is fastRetry with a 300 ms timeout and two attempts,
// 200 ms apart: time enough for the backend to see the first connection
// closed before the second opens.
func boundedRetry(t *testing.T) string {
	t.Helper()
	yaml := edit(t, fastRetry, "timeout: 2s", "timeout: 300ms")
	yaml = edit(t, yaml, "base: 20ms", "base: 200ms")
	return edit(t, yaml, "max_attempts: 6", "max_attempts: 2")
}

// Whatever the backend sends, an attempt ends within its timeout: the
// event is retried and dead-lettered, never stuck with its slot held, and
// JetStream never redelivers it while an attempt still holds it.
func TestABackendThatNeverFinishesItsAnswerCannotHoldAnAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(*bufio.Writer, <-chan struct{})
		status int
	}{
		{"101 Switching Protocols, then silence", switchProtocols, http.StatusSwitchingProtocols},
		{"102 Processing, forever", endless1xx, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newRawBackend(t, tc.answer)
			r := newRig(t, parseConfig(t, boundedRetry(t), b.URL), store.Options{})
			t.Cleanup(b.close) // before the forwarder stops: a stuck attempt must not hang the test
			if code, resp := r.post("/hooks/shop", nil, []byte(`{"n":1}`)); code != http.StatusOK {
				t.Fatalf("ingress answered %d %s", code, resp)
			}
			const counted = `{destination="app",reason="exhausted",route="shop"} 1`
			eventually(t, "a dead letter after two attempts", func() bool {
				return scrape(t, r.metrics, "jethook_dead_lettered_total") == counted
			})
			eventually(t, "no attempt in flight", func() bool { return r.fwd.Status()[0].InFlight == 0 })
			dls := r.deadLetters()
			if len(dls) != 1 || dls[0].Reason != "exhausted" || dls[0].Attempts != 2 || dls[0].LastStatus != tc.status {
				t.Fatalf("dead letters %+v, want one after 2 attempts with status %d", dls, tc.status)
			}
			if n := b.requests.Load(); n != 2 {
				t.Errorf("the backend got %d requests, want 2", n)
			}
			if p := b.peak.Load(); p != 1 {
				t.Errorf("%d connections open at once: an attempt was redelivered while in flight", p)
			}
			if got := scrape(t, r.metrics, "jethook_dead_lettered_total"); got != counted {
				t.Errorf("jethook_dead_lettered_total%s, want 1 for the one dead letter", got)
			}
		})
	}
}

func TestAnEndlessBodyAfter200IsCutOffAndTheEventDelivered(t *testing.T) {
	t.Parallel()
	b := newRawBackend(t, endlessBody)
	r := newRig(t, parseConfig(t, boundedRetry(t), b.URL), store.Options{})
	t.Cleanup(b.close) // before the forwarder stops: a stuck attempt must not hang the test
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"n":1}`)); code != http.StatusOK {
		t.Fatalf("ingress answered %d %s", code, resp)
	}
	eventually(t, "a delivery that ended", func() bool {
		s := r.fwd.Status()[0]
		return !s.LastSuccess.IsZero() && s.InFlight == 0
	})
	if n := b.requests.Load(); n != 1 {
		t.Errorf("the backend got %d requests, want 1", n)
	}
	if dls := r.deadLetters(); len(dls) != 0 {
		t.Errorf("%d dead letters", len(dls))
	}
}

// scrape returns what follows name in m's exposition (labels and value),
// "" if it is not there.
func scrape(t *testing.T, m *metrics.Metrics, name string) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.SplitSeq(w.Body.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && !strings.HasPrefix(rest, "_") {
			return rest
		}
	}
	return fmt.Sprintf(" (not in %d bytes of metrics)", w.Body.Len())
}
