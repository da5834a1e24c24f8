package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store/storetest"
)

const laptopToken = "laptop-token-laptop-token-laptop-token"

const laptopRoute = `
defaults:
  retry: {backoff: exponential, base: 20ms, multiplier: 2, max_delay: 100ms, jitter: none, max_attempts: 20, max_age: 1h}
routes:
  - name: shop
    path: /hooks/shop
    timeout: 1s
    destinations:
      - {name: laptop, pull: {token: "${TOKEN}"}}
`

// remote is a jethook with a pull destination, served on a real listener.
type remote struct {
	app    *app.App
	public *httptest.Server
}

func newRemote(t *testing.T) *remote {
	t.Helper()
	jh := apptest.Start(t, apptest.Config(t, laptopRoute, map[string]string{"TOKEN": laptopToken}), app.Options{})
	return &remote{app: jh.App, public: jh.Public}
}

func (r *remote) send(t *testing.T, body []byte, header http.Header, query string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.public.URL+"/hooks/shop"+query, bytes.NewReader(body))
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ingress: %d", resp.StatusCode)
	}
}

// local is the developer's app: a real server that records each request
// and answers what answer says.
type local struct {
	*httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	ok     map[string]int // event id → 2xx answers
	answer func(r *http.Request, body []byte, n int) int
}

func newLocal(t *testing.T, answer func(r *http.Request, body []byte, n int) int) *local {
	l := &local{ok: map[string]int{}, answer: answer}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.got = append(l.got, r)
		l.bodies = append(l.bodies, body)
		n := len(l.got)
		l.mu.Unlock()
		code := http.StatusOK
		if l.answer != nil {
			code = l.answer(r, body, n)
		}
		if code/100 == 2 && r.Context().Err() == nil {
			l.mu.Lock()
			l.ok[r.Header.Get("X-Webhook-Id")]++
			l.mu.Unlock()
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *local) delivered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ok)
}

// listen runs Listen from the jethook at from until the test ends or stop
// is called.
func listen(t *testing.T, from, to string, out io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Listen(ctx, ListenOptions{From: from, To: to, Route: "shop", Destination: "laptop",
			Token: laptopToken, Max: 100, Concurrency: 8, Wait: 2 * time.Second, Retry: 50 * time.Millisecond}, out)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("listen: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// deliveredOnlyWhatGot2xx checks the attempt log: every event it logs as
// delivered got a 2xx from the local app.
func deliveredOnlyWhatGot2xx(t *testing.T, r *remote, l *local, ids []string) {
	t.Helper()
	for _, id := range ids {
		as, err := r.app.Store.Attempts(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		ok := l.ok[id]
		l.mu.Unlock()
		for _, a := range as {
			if a.Outcome == "delivered" && ok == 0 {
				t.Errorf("event %s acked without a 2xx from the local app", id)
			}
		}
	}
}

func TestListenDeliversEachWebhookAsSentAndAcksOnlyA2xx(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	failOnce := []byte(`{"fail":"once"}`)
	// The first offer of failOnce fails, whichever of the two webhooks
	// the listener brings first.
	var failed atomic.Bool
	l := newLocal(t, func(req *http.Request, body []byte, _ int) int {
		if bytes.Equal(body, failOnce) && failed.CompareAndSwap(false, true) {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	var out testkit.LogBuffer
	listen(t, r.public.URL, l.URL+"/webhooks?from=listen", &out)

	binary := []byte("\x00\xff\r\n{\"é\":1}\n")
	r.send(t, failOnce, nil, "")
	r.send(t, binary, http.Header{"X-Signature": {"t=1,v1=abc"}, "Content-Type": {"application/octet-stream"}}, "?a=1&b=%2F")
	testkit.Eventually(t, 10*time.Second, "both webhooks delivered", func() bool { return l.delivered() == 2 })
	storetest.Settled(t, r.app.Store)

	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.got) != 3 {
		t.Fatalf("the local app got %d requests, want 3 (one 500, then two 2xx)", len(l.got))
	}
	var retried []*http.Request
	var req *http.Request
	var body []byte
	for i, b := range l.bodies {
		if bytes.Equal(b, failOnce) {
			retried = append(retried, l.got[i])
		} else {
			req, body = l.got[i], b
		}
	}
	if len(retried) != 2 || retried[0].Header.Get("X-Webhook-Attempt") != "1" || retried[1].Header.Get("X-Webhook-Attempt") != "2" {
		t.Fatalf("the webhook answered 500 was not offered again as attempt 2: %d requests", len(retried))
	}
	if !bytes.Equal(body, binary) || req.Method != http.MethodPost || req.URL.Path != "/webhooks" ||
		req.URL.RawQuery != "from=listen&a=1&b=%2F" || req.Header.Get("X-Signature") != "t=1,v1=abc" ||
		req.Header.Get("Content-Type") != "application/octet-stream" || req.Header.Get("X-Webhook-Id") == "" {
		t.Fatalf("the local app got %s %s %v %q", req.Method, req.URL, req.Header, body)
	}
	lines := out.String()
	for _, want := range []string{"→ 500 in", "nak", "(attempt 2) → 204 in"} {
		if !strings.Contains(lines, want) {
			t.Errorf("the terminal does not show %q:\n%s", want, lines)
		}
	}
	if n := strings.Count(lines, " POST "); n != 3 {
		t.Errorf("%d delivery lines for 3 requests:\n%s", n, lines)
	}
}

func TestListenRefusesAWrongToken(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	err := Listen(context.Background(), ListenOptions{From: r.public.URL, To: "http://127.0.0.1:1/", Route: "shop",
		Destination: "laptop", Token: "wrong", Max: 10}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("listen with a wrong token: %v", err)
	}
}

// cutter is a TCP proxy whose connections the test can cut.
type cutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	go c.serve(ln)
	t.Cleanup(func() { c.cut(); ln.Close() })
	return c
}

func (c *cutter) serve(ln net.Listener) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", c.target)
		if err != nil {
			c.mu.Unlock()
			in.Close()
			continue
		}
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); out.Close() }()
		go func() { _, _ = io.Copy(in, out); in.Close() }()
	}
}

// cut closes every connection and refuses new ones until mend.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cutter) mend() {
	c.mu.Lock()
	c.closed = false
	c.mu.Unlock()
}

func TestAListenerKilledMidBatchOrCutOffLosesNothing(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	killed := make(chan struct{})
	var killOnce sync.Once
	l := newLocal(t, func(req *http.Request, _ []byte, n int) int {
		if n == 10 {
			// The tenth webhook: the listener dies while the local app
			// works on it.
			killOnce.Do(func() { close(killed) })
			<-req.Context().Done()
		}
		return http.StatusOK
	})
	var ids []string
	send := func(k int) {
		for i := range k {
			r.send(t, []byte(fmt.Sprintf(`{"n":%d,"at":%q}`, i, time.Now())), nil, "")
		}
	}
	send(40)
	var out1 testkit.LogBuffer
	stop := listen(t, r.public.URL, l.URL, &out1)
	<-killed
	stop()
	if strings.Count(out1.String(), "→ 200") >= 40 {
		t.Fatal("the first listener was not killed mid-batch")
	}

	// A second listener, through a connection the test cuts.
	c := newCutter(t, r.public.Listener.Addr().String())
	var out2 testkit.LogBuffer
	listen(t, "http://"+c.ln.Addr().String(), l.URL, &out2)
	testkit.Eventually(t, 15*time.Second, "the first 40 delivered", func() bool { return l.delivered() == 40 })
	c.cut()
	send(20)
	testkit.Eventually(t, 10*time.Second, "the listener to say it lost jethook", func() bool {
		return strings.Contains(out2.String(), "jethook unreachable")
	})
	c.mend()
	testkit.Eventually(t, 15*time.Second, "all 60 delivered", func() bool { return l.delivered() == 60 })
	storetest.Settled(t, r.app.Store)
	if !strings.Contains(out2.String(), "connected again") {
		t.Errorf("the listener did not say it was connected again:\n%s", out2.String())
	}
	l.mu.Lock()
	for id := range l.ok {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	slices.Sort(ids)
	deliveredOnlyWhatGot2xx(t, r, l, ids)
}
