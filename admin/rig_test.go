package admin_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

const token = "s3cret-admin-token"

// fanOutRetrying is apptest.FanOut with another retry schedule.
func fanOutRetrying(retry string) string {
	const base = "retry: {backoff: fixed, delay: 1s, jitter: none, max_attempts: 3, max_age: 1h}"
	if !strings.Contains(apptest.FanOut, base) {
		panic("apptest.FanOut has no " + base)
	}
	return strings.Replace(apptest.FanOut, base, "retry: "+retry, 1)
}

// backend answers each request with the status in its X-Status-<Name>
// header (200 when absent), unless fail is set, and counts requests per
// event id.
type backend struct {
	*httptest.Server
	name     string
	mu       sync.Mutex
	hits     map[string]int
	attempts map[string][]string // X-Webhook-Attempt of each request, per event id
	fail     int                 // when not 0, the status every request gets
}

func newBackend(t *testing.T, name string) *backend {
	b := &backend{name: name, hits: map[string]int{}, attempts: map[string][]string{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.hits[r.Header.Get("X-Webhook-Id")]++
		b.attempts[r.Header.Get("X-Webhook-Id")] = append(b.attempts[r.Header.Get("X-Webhook-Id")], r.Header.Get("X-Webhook-Attempt"))
		code := b.fail
		b.mu.Unlock()
		if code == 0 {
			code = 200
			if v := r.Header.Get("X-Status-" + name); v != "" {
				code, _ = strconv.Atoi(v)
			}
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) count(eventID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hits[eventID]
}

// attemptsOf lists the X-Webhook-Attempt of each request for eventID.
func (b *backend) attemptsOf(eventID string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.attempts[eventID], ",")
}

func (b *backend) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.hits {
		n += c
	}
	return n
}

func (b *backend) failWith(code int) {
	b.mu.Lock()
	b.fail = code
	b.mu.Unlock()
}

// rig is jethook assembled as serve assembles it (apptest.Start) on a
// real embedded store, and two backends.
type rig struct {
	t          *testing.T
	store      *store.Store
	admin      *httptest.Server
	app, audit *backend
	log        *testkit.LogBuffer // what jethook logs
	api        *admin.Service     // what the admin API serves
	jethook    *apptest.Rig
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigOf(t, apptest.FanOut)
}

// newRigOf is newRig with another policies file, whose destinations are
// ${APP} and ${AUDIT}, and options of jethook's set by opts.
func newRigOf(t *testing.T, config string, opts ...func(*app.Options)) *rig {
	t.Helper()
	r := &rig{t: t, app: newBackend(t, "App"), audit: newBackend(t, "Audit")}
	cfg := apptest.Config(t, config, map[string]string{"APP": r.app.URL, "AUDIT": r.audit.URL})
	o := app.Options{AdminToken: token}
	for _, set := range opts {
		set(&o)
	}
	r.jethook = apptest.Start(t, cfg, o)
	r.store, r.admin, r.log, r.api = r.jethook.App.Store, r.jethook.Admin, r.jethook.Log, r.jethook.App.Service
	return r
}

// post sends a webhook whose backends answer with the given statuses
// ("App": "422") and returns its event id.
func (r *rig) post(body string, statuses map[string]string) string {
	r.t.Helper()
	header := map[string]string{}
	for name, code := range statuses {
		header["X-Status-"+name] = code
	}
	code, id := r.jethook.Post(r.t, "/hooks/shop", body, header)
	if code != http.StatusOK || id == "" {
		r.t.Fatalf("ingress answered %d", code)
	}
	return id
}

// call sends an admin request with the token and decodes the answer into
// out (when not nil); it returns the status.
func (r *rig) call(method, path string, body any, out any) int {
	r.t.Helper()
	return call(r.t, r.admin.URL, token, method, path, body, out)
}

func call(t *testing.T, base, tok, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// deadLetters lists the dead letters a query selects.
func (r *rig) deadLetters(query string) admin.DeadLetterPage {
	r.t.Helper()
	var p admin.DeadLetterPage
	if code := r.call(http.MethodGet, "/v1/deadletters?"+query, nil, &p); code != http.StatusOK {
		r.t.Fatalf("list %q: %d", query, code)
	}
	return p
}

// waitDeadLetters waits until n dead letters exist.
func (r *rig) waitDeadLetters(n int) {
	r.t.Helper()
	eventually(r.t, strconv.Itoa(n)+" dead letters", func() bool {
		return len(r.deadLetters("limit=1000").DeadLetters) == n
	})
}

func eventually(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, msg, cond)
}
