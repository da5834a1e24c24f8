package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveForTest runs Serve on loopback ports with the shipped policies and
// returns the public address; the server stops at the end of the test.
func serveForTest(t *testing.T, tweak func(*Settings)) string {
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
	go func() { done <- Serve(ctx, s, slog.New(slog.DiscardHandler), ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case addr := <-ready:
		return addr.String()
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not become ready")
	}
	return ""
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
