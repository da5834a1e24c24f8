package proxy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// watched is an ingress whose requests' bodies are watched: how many
// requests the handler has begun to read, and how many bytes it has read
// in all. Both are states a test can wait for.
type watched struct {
	*ingress
	handler       *proxy.Handler
	reading, read atomic.Int64
}

func newWatched(t *testing.T, tweak func(*proxy.Handler)) *watched {
	t.Helper()
	cfg, err := policy.Parse("routes.yaml", []byte(routes), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t, store.Options{PublishTimeout: time.Second})
	h, err := proxy.New(cfg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(h)
	}
	w := &watched{handler: h}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		r.Body = &watchedBody{ReadCloser: r.Body, w: w}
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	w.ingress = &ingress{t: t, cfg: cfg, store: st, srv: srv}
	return w
}

type watchedBody struct {
	io.ReadCloser
	w       *watched
	started bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		b.w.reading.Add(1)
	}
	n, err := b.ReadCloser.Read(p)
	b.w.read.Add(int64(n))
	return n, err
}

// announce opens a connection that posts to path a body of length bytes
// but sends only the first sent of them, and holds it open until the test
// ends.
func announce(t *testing.T, addr, path string, length, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: jethook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, length, strings.Repeat("x", sent))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Not parallel: it measures the process's heap.
func TestAnnouncedBodiesCostOnlyTheBytesThatArrive(t *testing.T) {
	in := newWatched(t, nil)
	if a := in.do("POST", "/hooks/plain", nil, strings.NewReader(`{"warm":1}`)); a.status != 200 {
		t.Fatalf("warm-up: %d %s", a.status, a.body)
	}
	const (
		conns     = 300
		announced = 5 << 20 // the github route's max_body, the default
	)
	before := heapInUse()
	addr := strings.TrimPrefix(in.srv.URL, "http://")
	for i := range conns {
		announce(t, addr, "/hooks/github", announced, i%100)
	}
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d requests reading their bodies", conns), func() bool {
		return in.reading.Load() > conns // and the warm-up's
	})
	if a := in.do("POST", "/hooks/plain", nil, strings.NewReader(`{"small":1}`)); a.status != 200 {
		t.Fatalf("a small request during the flood: %d %s", a.status, a.body)
	}
	grew := int64(heapInUse()) - int64(before)
	t.Logf("%d connections announcing %d MiB each: heap grew %d KiB (%d KiB a connection)",
		conns, announced>>20, grew>>10, grew/conns>>10)
	// Each holds a first read of 16 KiB and what net/http keeps for a
	// connection: nowhere near the 5 MiB each announced.
	if limit := int64(conns * 64 << 10); grew > limit {
		t.Fatalf("heap grew %d MiB for %d connections that sent almost nothing; want under %d MiB",
			grew>>20, conns, limit>>20)
	}
}

func TestABodyThatFindsNoRoomGets503AndIsNotStored(t *testing.T) {
	t.Parallel()
	// Room for two first reads (16 KiB each). One request that has sent
	// a little over 16 KiB has grown its buffer to 32 KiB and holds all
	// of it.
	in := newWatched(t, func(h *proxy.Handler) { h.MaxInFlightBytes = 32 << 10 })
	addr := strings.TrimPrefix(in.srv.URL, "http://")
	hog := announce(t, addr, "/hooks/github", 1<<20, 20<<10)
	testkit.Eventually(t, 10*time.Second, "the large request to have read what it sent", func() bool {
		return in.read.Load() == 20<<10
	})
	a := in.do("POST", "/hooks/plain", nil, strings.NewReader(`{"a":1}`))
	if a.status != http.StatusServiceUnavailable || a.json["error"] != "overloaded" || a.json["message"] == "" ||
		a.header.Get("Retry-After") == "" {
		t.Fatalf("got %d %s %v, want 503 overloaded with Retry-After", a.status, a.body, a.header)
	}
	if n := in.stored(); n != 0 {
		t.Fatalf("%d stored while over budget", n)
	}
	// Its sender gone, the large request gives its room back.
	hog.Close()
	testkit.Eventually(t, 10*time.Second, "a small request to be taken again", func() bool {
		return in.do("POST", "/hooks/plain", nil, strings.NewReader(`{"a":1}`)).status == http.StatusOK
	})
	if n := in.stored(); n != 1 {
		t.Fatalf("%d stored, want 1", n)
	}
}

// A request refused for want of room is read to its end, into no buffer,
// before its 503 is written. Answered in the middle of its upload, the
// server would close the connection half a second after the answer
// (net/http's wait for the client to read it): a sender still uploading
// then, as a busy one may be, sees its connection reset under it, with no
// answer and no reason.
func TestALargeBodyRefusedForWantOfRoomIsReadToItsEndFirst(t *testing.T) {
	t.Parallel()
	// Room for the large request below to read a first 16 KiB beside
	// the hog's 32 KiB, but not to grow its buffer: it is refused in the
	// middle of its upload.
	in := newWatched(t, func(h *proxy.Handler) { h.MaxInFlightBytes = 48 << 10 })
	addr := strings.TrimPrefix(in.srv.URL, "http://")
	const hogSent = 20 << 10
	announce(t, addr, "/hooks/github", 1<<20, hogSent)
	testkit.Eventually(t, 10*time.Second, "the large request to have read what it sent", func() bool {
		return in.read.Load() == hogSent
	})
	const size = 1 << 20
	resp, err := http.Post(in.srv.URL+"/hooks/github", "application/json", strings.NewReader(strings.Repeat("x", size)))
	if err != nil {
		t.Fatalf("post of a %d-byte body while over budget: %v, want a 503", size, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "overloaded") {
		t.Fatalf("%d %s, want 503 overloaded", resp.StatusCode, body)
	}
	if got := in.read.Load() - hogSent; got != size {
		t.Fatalf("answered after reading %d of the body's %d bytes, want all of them", got, size)
	}
	if n := in.stored(); n != 0 {
		t.Fatalf("%d stored while over budget", n)
	}
}
