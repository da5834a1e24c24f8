package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// serveForTest runs Serve on loopback ports with the shipped policies and
// returns the public address; the server stops at the end of the test.
func serveForTest(t *testing.T, tweak func(*Settings)) string {
	t.Helper()
	addr, stop := startServe(t, tweak)
	t.Cleanup(stop)
	return addr
}

// startServe runs Serve like serveForTest and returns its public address
// and a function that stops it and waits until it has (the store closed).
func startServe(t *testing.T, tweak func(*Settings)) (string, func()) {
	t.Helper()
	return startServeLogging(t, tweak, slog.New(slog.DiscardHandler))
}

// startServeLogging is startServe with serve's log going to log.
func startServeLogging(t *testing.T, tweak func(*Settings), log *slog.Logger) (string, func()) {
	t.Helper()
	s, err := loadSettings(map[string]string{
		"JETHOOK_LISTEN":         "127.0.0.1:0",
		"JETHOOK_ADMIN_LISTEN":   "127.0.0.1:0",
		"JETHOOK_CONFIG":         "../policies.yaml",
		"JETHOOK_DATA_DIR":       t.TempDir(),
		"JETHOOK_SHUTDOWN_GRACE": "2s",
	})
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(&s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, s, log, ready) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	select {
	case addr := <-ready:
		return addr.String(), stop
	case err := <-done:
		once.Do(cancel) // done is drained: stop must not wait on it
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(30 * time.Second):
		stop()
		t.Fatal("serve did not become ready")
	}
	return "", stop
}

func TestAClientTricklingItsHeadersIsCutOff(t *testing.T) {
	t.Parallel()
	addr := serveForTest(t, func(s *Settings) { s.HeaderTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	cut := false
	// One byte every 50 ms: the headers would take seconds to arrive.
	for _, b := range []byte("POST /hooks/example HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 200)) {
		if _, err := conn.Write([]byte{b}); err != nil {
			cut = true
			break
		}
		if time.Since(start) > 10*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
		// The server answers 408 or closes; either way a read returns.
		_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
		if n, err := conn.Read(make([]byte, 1)); n > 0 || (err != nil && !isTimeout(err)) {
			cut = true
			break
		}
	}
	if !cut {
		t.Fatalf("a client trickling headers for %s was not cut off (header timeout 300ms)", time.Since(start))
	}
}

func TestHugeHeadersAreRefused(t *testing.T) {
	t.Parallel()
	addr := serveForTest(t, nil)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/example", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Huge", strings.Repeat("h", 200<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s, want 431", resp.StatusCode, body)
	}
	// And a normal request on the same server still works.
	resp2, err := http.Post("http://"+addr+"/hooks/example", "application/json", strings.NewReader(`{"ok":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusOK {
		t.Fatalf("normal request after a huge one: %d", resp2.StatusCode)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// smallRoute is a policies file with one route limited to 1 KiB; BACKEND
// becomes the backend's URL.
const smallRoute = `
defaults:
  retry: {max_age: 1h}
routes:
  - name: small
    path: /hooks/small
    max_body: 1KiB
    destinations:
      - {name: app, url: "BACKEND/small", slow_start: 0s}
`

func TestAChunkedBodyOverMaxBodyGets413ThroughServeAndNothingIsStored(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var delivered [][]byte
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		delivered = append(delivered, body)
		mu.Unlock()
	}))
	t.Cleanup(backend.Close)
	config := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(config, []byte(strings.ReplaceAll(smallRoute, "BACKEND", backend.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	addr, stop := startServe(t, func(s *Settings) { s.Config, s.DataDir = config, data })
	t.Cleanup(stop)

	// 2 KiB in eight chunks, no Content-Length: the limit can only be
	// found while reading.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "POST /hooks/small HTTP/1.1\r\nHost: jethook\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
	for range 8 {
		req += "100\r\n" + strings.Repeat("z", 256) + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to an oversized chunked body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var reason struct{ Error, Message string }
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(body, &reason) != nil || reason.Error != "body_too_large" || !strings.Contains(reason.Message, "1024 bytes") {
		t.Fatalf("got %d %s %q, want 413 with a JSON body_too_large reason naming the limit", resp.StatusCode, resp.Header, body)
	}
	// The rest of the body was not read, so the connection cannot carry
	// another request: the server says so and closes it.
	if !resp.Close {
		t.Errorf("413 without Connection: close: %v", resp.Header)
	}
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Errorf("after the 413 the connection stayed open: read err = %v", err)
	}

	// The server still takes a chunked body within the limit.
	ok := strings.Repeat("k", 1000)
	r2, err := http.Post("http://"+addr+"/hooks/small", "application/json", io.MultiReader(strings.NewReader(ok)))
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusOK {
		t.Fatalf("a body within the limit after a refused one: %d", r2.StatusCode)
	}
	testkit.Eventually(t, 10*time.Second, "the accepted body delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == 1
	})
	stop()
	mu.Lock()
	if len(delivered) != 1 || string(delivered[0]) != ok {
		t.Errorf("backend got %d bodies, want only the accepted one", len(delivered))
	}
	mu.Unlock()
	// What the stream holds, read after Serve has closed it.
	st := storetest.Open(t, store.Options{DataDir: data})
	stats, err := st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Messages != 1 {
		t.Fatalf("the stream holds %d webhooks, want 1 (the refused body must not be stored)", stats.Messages)
	}
}

// While shutdown waits for open requests, /readyz already says 503, so a
// load balancer or kubelet takes the instance out before it stops.
func TestReadyzSaysShuttingDownAsSoonAsShutdownBegins(t *testing.T) {
	t.Parallel()
	adminAddr := testkit.FreeAddr(t)
	addr, stop := startServe(t, func(s *Settings) { s.AdminListen = adminAddr; s.ShutdownGrace = 5 * time.Second })
	t.Cleanup(stop)
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + adminAddr + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("before shutdown: %d %s", code, body)
	}
	// A request still arriving holds the public listener's shutdown open.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Expect: 100-continue makes the server say when the handler starts
	// reading the body: from then on the request is active, not idle.
	if _, err := io.WriteString(c, "POST /hooks/example HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "100") {
		t.Fatalf("no 100 Continue: %q, %v", line, err)
	}
	if _, err := io.WriteString(c, `{"partial":`); err != nil {
		t.Fatal(err)
	}
	go stop()
	deadline := time.Now().Add(4 * time.Second)
	for {
		code, body := readyz()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "shutting down") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("during shutdown /readyz still answers %d %s", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Not parallel: it measures the process's heap.
func TestHeaderFloodsAreBoundedByTheConnectionLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the kernel's socket queues from /proc/net/tcp")
	}
	const limit, flood = 50, 300
	// A long header timeout keeps the flood in place while it is measured;
	// the default 5 s would cut every one of them off.
	addr := serveForTest(t, func(s *Settings) { s.MaxConns = limit; s.HeaderTimeout = time.Minute })
	if code := postExample(t, addr); code != http.StatusOK {
		t.Fatalf("warm-up: %d", code)
	}
	_, port, _ := net.SplitHostPort(addr)
	before := heapInUse()
	var headers strings.Builder
	headers.WriteString("POST /hooks/example HTTP/1.1\r\nHost: jethook\r\n")
	for i := 0; headers.Len() < 60<<10; i++ {
		fmt.Fprintf(&headers, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 100))
	}
	conns := make([]net.Conn, 0, flood)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, headers.String()); err != nil { // never ended
			t.Fatal(err)
		}
	}
	// One more is accepted, unread, to close an idle connection should one
	// become idle; the rest wait in the kernel's accept queue.
	eventually(t, fmt.Sprintf("%d connections served with their headers read and %d waiting in the accept queue", limit, flood-limit-1), func() bool {
		q := tcpQueues(t, port)
		return q.drained == limit && q.waiting == flood-limit-1
	})
	grew := int64(heapInUse()) - int64(before)
	t.Logf("%d connections of 60 KiB headers, %d served: heap grew %d KiB (%d KiB a served connection)",
		flood, limit, grew>>10, grew/limit>>10)
	if bound := int64(2 * limit * connCost); grew > bound {
		t.Fatalf("heap grew %d KiB, want under %d KiB for %d served connections", grew>>10, bound>>10, limit)
	}
	for _, c := range conns {
		c.Close()
	}
	eventually(t, "a webhook taken once the flood is gone", func() bool { return postExample(t, addr) == http.StatusOK })
}

// postExample posts a webhook on a connection of its own, closed after
// the answer, so that it holds none of the connection limit afterwards. A
// request that waits for a connection slot for 10 s fails the test.
func postExample(t *testing.T, addr string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/example", strings.NewReader(`{"ok":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// queues is what the kernel says about a loopback port's server side.
type queues struct {
	waiting int // connections in the listener's accept queue
	drained int // established connections with nothing left unread
}

// tcpQueues reads /proc/net/tcp: a listening socket's rx_queue is its
// accept queue, an established one's the bytes received and not yet
// read by the program.
func tcpQueues(t *testing.T, port string) queues {
	t.Helper()
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	local := fmt.Sprintf("0100007F:%04X", p)
	var q queues
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != local {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		n, _ := strconv.ParseInt(rx, 16, 64)
		switch f[3] {
		case "0A": // LISTEN
			q.waiting = int(n)
		case "01": // ESTABLISHED
			if n == 0 {
				q.drained++
			}
		}
	}
	return q
}
