package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

const token = "dashboard-test-token-0123456789"

// oneRoute delivers route shop to app; anything but a 2xx or a 5xx is
// dead-lettered at once (a permanent failure).
const oneRoute = `
defaults:
  retry: {backoff: fixed, delay: 1s, jitter: none, max_attempts: 2, max_age: 1h}
  timeout: 2s
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "${APP}/hook?key=backend-credential", slow_start: 0s}
`

// rig is the admin listener with the dashboard, assembled as serve
// assembles it (apptest.Start) on a real store, delivering to a backend
// whose answer the test sets.
type rig struct {
	t      *testing.T
	store  *store.Store
	fwd    *forward.Forwarder
	server *httptest.Server
	status atomic.Int32 // what the backend answers
	hits   atomic.Int32
}

func newRig(t *testing.T, tok string) *rig {
	t.Helper()
	r := &rig{t: t}
	r.status.Store(http.StatusOK)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.hits.Add(1)
		w.WriteHeader(int(r.status.Load()))
	}))
	t.Cleanup(backend.Close)
	cfg := apptest.Config(t, oneRoute, map[string]string{"APP": backend.URL})
	a := apptest.Start(t, cfg, app.Options{AdminToken: tok})
	r.store, r.fwd, r.server = a.App.Store, a.App.Forwarder, a.Admin
	return r
}

// publish stores a webhook on shop as ingress would.
func (r *rig) publish(e *store.Envelope) {
	r.t.Helper()
	e.Route = "shop"
	if e.Method == "" {
		e.Method = http.MethodPost
	}
	e.ReceivedAt = time.Now()
	if _, err := r.store.Publish(context.Background(), e); err != nil {
		r.t.Fatal(err)
	}
}

// deadLetter publishes e to a backend answering 400 and returns its dead
// letter's sequence.
func (r *rig) deadLetter(e *store.Envelope) uint64 {
	r.t.Helper()
	r.status.Store(http.StatusBadRequest)
	r.publish(e)
	var seq uint64
	testkit.Eventually(r.t, 10*time.Second, "the webhook is dead-lettered", func() bool {
		p, err := r.store.QueryDeadLetters(context.Background(), store.DeadLetterQuery{}, 0, 100)
		for _, d := range p.DeadLetters {
			if d.Envelope.EventID == e.EventID {
				seq = d.DLQSeq
			}
		}
		return err == nil && seq > 0
	})
	return seq
}

// client is a browser-like client: it keeps cookies and does not follow
// redirects, so tests see them.
func (r *rig) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login logs c in and returns the CSRF token the overview carries.
func (r *rig) login(c *http.Client) string {
	r.t.Helper()
	resp := r.do(c, http.MethodPost, "/login", url.Values{"token": {token}}, nil)
	if resp.code != http.StatusSeeOther {
		r.t.Fatalf("login: %d %s", resp.code, resp.body)
	}
	return r.csrf(c)
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf" content="([^"]*)">`)

func (r *rig) csrf(c *http.Client) string {
	r.t.Helper()
	resp := r.do(c, http.MethodGet, "/", nil, nil)
	m := csrfMeta.FindStringSubmatch(resp.body)
	if resp.code != http.StatusOK || m == nil || m[1] == "" {
		r.t.Fatalf("overview after login: %d, no CSRF token", resp.code)
	}
	return m[1]
}

type answer struct {
	code   int
	body   string
	header http.Header
}

// do sends a request (a form when form is not nil) with extra headers.
func (r *rig) do(c *http.Client, method, path string, form url.Values, hdr map[string]string) answer {
	r.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, r.server.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}
}
