package forward_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// fastRetry is a policy with millisecond waits, so tests use real time.
const fastRetry = `
defaults:
  retry: {backoff: exponential, base: 20ms, multiplier: 2, max_delay: 200ms, jitter: none, max_attempts: 6, max_age: 1h, retry_after_max: 5s}
  timeout: 2s
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "${BACKEND}/hook"}
`

// slowRetry is fastRetry with destKeys added to the destination and an
// hour between attempts, so a failed webhook is not attempted again while
// a test runs.
func slowRetry(t *testing.T, destKeys string) string {
	cfg := edit(t, limited(t, destKeys, ""), "base: 20ms", "base: 1h, max_delay: 1h")
	cfg = edit(t, cfg, ", max_delay: 200ms", "")
	return edit(t, cfg, "max_age: 1h", "max_age: 5h")
}

// hit is one request a backend received.
type hit struct {
	at     time.Time
	header http.Header
	body   []byte
	method string
	path   string
	query  string
	host   string   // the Host the backend was called with
	length int64    // the request's Content-Length, -1 if none
	coding []string // the request's Transfer-Encoding
}

// backend is a real HTTP server that answers with reply(n) for its n-th
// request (1-based) and records every request.
type backend struct {
	*httptest.Server
	mu    sync.Mutex
	hits  []hit
	reply func(n int, w http.ResponseWriter)
}

func newBackend(t *testing.T, reply func(n int, w http.ResponseWriter)) *backend {
	b := &backend{reply: reply}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.hits = append(b.hits, hit{at: time.Now(), header: r.Header.Clone(), body: body, method: r.Method,
			path: r.URL.Path, query: r.URL.RawQuery, host: r.Host, length: r.ContentLength, coding: r.TransferEncoding})
		n := len(b.hits)
		b.mu.Unlock()
		b.reply(n, w)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.hits)
}

func (b *backend) all() []hit {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]hit(nil), b.hits...)
}

func status(code int) func(int, http.ResponseWriter) {
	return func(_ int, w http.ResponseWriter) { w.WriteHeader(code) }
}

// unavailableFirst answers 503 to the first k requests, then 200.
func unavailableFirst(k int) func(int, http.ResponseWriter) {
	return func(n int, w http.ResponseWriter) {
		if n <= k {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// rig is jethook in one test, assembled as serve assembles it
// (apptest): a real embedded store, the ingress behind a real HTTP
// server, the forwarder, metrics and alerts. A test may stop it and start
// it again on the same store, or on another.
type rig struct {
	t       *testing.T
	cfg     *policy.Config
	store   *store.Store
	jethook *apptest.Rig
	app     *app.App
	fwd     *forward.Forwarder // app.Forwarder
	metrics *metrics.Metrics   // app.Metrics
	ingress *httptest.Server   // serves the ingress of the app running now
}

func parseConfig(t *testing.T, yaml, backendURL string) *policy.Config {
	t.Helper()
	return apptest.Config(t, yaml, map[string]string{"BACKEND": backendURL})
}

// newRig starts jethook on cfg over a new store opened with opts. Fetches
// wait up to 200 ms unless tune says otherwise.
func newRig(t *testing.T, cfg *policy.Config, opts store.Options, tune ...func(*app.Options)) *rig {
	t.Helper()
	r := &rig{t: t, cfg: cfg, store: storetest.Open(t, opts)}
	r.jethook = apptest.Start(t, cfg, r.options(tune))
	r.ingress = r.jethook.Public
	r.started()
	return r
}

// options are the app's options on the rig's store, with tune's.
func (r *rig) options(tune []func(*app.Options)) app.Options {
	o := app.Options{Store: r.store, FetchWait: 200 * time.Millisecond}
	for _, f := range tune {
		f(&o)
	}
	return o
}

// start assembles jethook again on the rig's store, with tune's options.
func (r *rig) start(tune ...func(*app.Options)) {
	r.t.Helper()
	r.jethook.Restart(r.options(tune))
	r.started()
}

func (r *rig) started() {
	r.app = r.jethook.App
	r.fwd, r.metrics = r.app.Forwarder, r.app.Metrics
}

// stop stops delivering and the alerts; the store stays open.
func (r *rig) stop() { r.jethook.Stop() }

// fetchWait makes each fetch wait up to d for messages.
func fetchWait(d time.Duration) func(*app.Options) {
	return func(o *app.Options) { o.FetchWait = d }
}

// post sends a webhook to the ingress and returns the status and body.
func (r *rig) post(path string, header http.Header, body []byte) (int, string) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.ingress.URL+path, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(out))
}

// gate is the gate status of the rig's destination (the config has one).
func (r *rig) gate() forward.GateStatus {
	for _, s := range r.fwd.Status() {
		return s.Gate
	}
	return forward.GateStatus{}
}

func (r *rig) deadLetters() []store.DeadLetter {
	r.t.Helper()
	dls, err := r.store.DeadLetters(context.Background(), "dlq.>", 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	return dls
}

// edit replaces the first old in a test config with new, and fails the
// test when old is not there: a base config that changed must not leave
// a test running on a config it did not mean.
func edit(t testing.TB, config, old, new string) string {
	t.Helper()
	if !strings.Contains(config, old) {
		t.Fatalf("test config lacks %q:\n%s", old, config)
	}
	return strings.Replace(config, old, new, 1)
}

func eventually(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, msg, cond)
}
