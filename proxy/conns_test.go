package proxy_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jethook/jethook/proxy"
)

// serveLimited serves h on loopback under a limit of n connections, with
// an idle timeout far longer than any test: an idle connection is closed
// only to make room.
func serveLimited(t *testing.T, n int, h http.Handler) (*proxy.ConnLimit, string) {
	t.Helper()
	return serveLimitedWith(t, proxy.NewConnLimit(n), h)
}

func serveLimitedWith(t *testing.T, limit *proxy.ConnLimit, h http.Handler) (*proxy.ConnLimit, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnState: limit.ConnState, IdleTimeout: time.Hour, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(limit.Listen(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return limit, "http://" + ln.Addr().String()
}

// post sends one request on its own keep-alive client, which then keeps
// its connection open and idle.
func post(t *testing.T, url string) (*http.Response, error) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	resp, err := c.Post(url, "text/plain", nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp, resp.Body.Close()
}

func TestANewConnectionAtTheLimitTakesTheLongestIdleOnesPlace(t *testing.T) {
	t.Parallel()
	limit, url := serveLimited(t, 4, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	// Four senders fill the limit and leave their connections idle.
	for range 4 {
		if _, err := post(t, url); err != nil {
			t.Fatal(err)
		}
	}
	if n := limit.Open(); n != 4 {
		t.Fatalf("%d connections open, want 4", n)
	}
	// A fifth is answered within its client's timeout, far shorter than
	// the server's idle timeout of an hour the idle four would hold it.
	for i := range 3 {
		if _, err := post(t, url); err != nil {
			t.Fatalf("sender %d past the limit: %v", 5+i, err)
		}
		if n := limit.Open(); n > 4 {
			t.Fatalf("%d connections open, limit 4", n)
		}
	}
}

func TestWhenEveryConnectionIsInARequestANewOneWaitsForOneToEnd(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	limit, url := serveLimited(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if r.URL.Path == "/slow" {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	done := make(chan error, 3)
	for range 2 {
		go func() {
			_, err := post(t, url+"/slow")
			done <- err
		}()
	}
	for range 2 {
		<-entered
	}
	go func() {
		_, err := post(t, url+"/fast")
		done <- err
	}()
	// Neither request in progress is cut to make room: the third waits
	// until one ends, and all three succeed.
	if n := limit.Open(); n > 2 {
		t.Fatalf("%d connections open, limit 2", n)
	}
	close(release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := limit.Open(); n > 2 {
		t.Fatalf("%d connections open, limit 2", n)
	}
}
