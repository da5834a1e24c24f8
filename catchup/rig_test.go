package catchup_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/catchup"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// Credentials the fakes require and the logs must never show.
const (
	ghToken      = "ghp_catchupTestToken"
	ghSecret     = "gh-webhook-secret"
	stripeKey    = "sk_test_catchupTestKey"
	stripeSecret = "whsec_catchupTestSecret"
)

// rig is jethook's store and ingress, as serve runs them, and a catch-up
// runner over them.
type rig struct {
	t       *testing.T
	store   *store.Store
	ingress *httptest.Server
	yaml    string
	cfg     *policy.Config
	metrics *metrics.Metrics
	logs    *testkit.LogBuffer
	tracer  trace.Tracer // the runner's, when set before start
}

// newRig opens a real embedded store in dir and serves ingress for the
// policies in yaml.
func newRig(t *testing.T, dir, yaml string) *rig {
	t.Helper()
	return newRigWith(t, store.Options{DataDir: dir}, yaml)
}

// newRigWith is newRig over a store opened with opts: a replica, when
// opts.URL names a NATS server others use too.
func newRigWith(t *testing.T, opts store.Options, yaml string) *rig {
	t.Helper()
	cfg, err := policy.Parse("policies.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t, opts)
	h, err := proxy.New(cfg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &rig{t: t, store: st, ingress: srv, yaml: yaml, cfg: cfg, metrics: metrics.New(nil), logs: &testkit.LogBuffer{}}
}

// start starts a runner until the test ends or stop is called.
func (r *rig) start() (cu *catchup.Runner, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	cu = &catchup.Runner{Store: r.store, Metrics: r.metrics, Tracer: r.tracer,
		Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	cu.Start(ctx, r.cfg)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			cu.Stop()
		})
	}
	r.t.Cleanup(stop)
	return cu, stop
}

// has reports whether the store holds route's event id.
func (r *rig) has(route, id string) bool {
	ok, err := r.store.Has(context.Background(), route, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return ok
}

// messages counts the webhooks the store holds.
func (r *rig) messages() uint64 {
	s, err := r.store.Stats(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return s.Messages
}

// passes waits until cu has completed n more passes of route than it
// had when called, so what a pass would do has been done.
func passes(t *testing.T, cu *catchup.Runner, route string, n int) {
	t.Helper()
	var last time.Time
	if s, ok := status(cu, route); ok && s.LastPassAt != nil {
		last = *s.LastPassAt
	}
	for range n {
		testkit.Eventually(t, 10*time.Second, "a catch-up pass of "+route, func() bool {
			s, ok := status(cu, route)
			if ok && s.LastPassAt != nil && s.LastPassAt.After(last) {
				last = *s.LastPassAt
				return true
			}
			return false
		})
	}
}

func status(cu *catchup.Runner, route string) (catchup.Status, bool) {
	for _, s := range cu.Status() {
		if s.Route == route {
			return s, true
		}
	}
	return catchup.Status{}, false
}

// metric returns the line of the named series in a scrape, "" if absent.
func (r *rig) metric(series string) string {
	rec := httptest.NewRecorder()
	r.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, series+" ") {
			return line
		}
	}
	return ""
}

// noSecretsLogged fails the test if the logs show a credential.
func (r *rig) noSecretsLogged() {
	r.t.Helper()
	logs := r.logs.String()
	for _, s := range []string{ghToken, ghSecret, stripeKey, stripeSecret} {
		if strings.Contains(logs, s) {
			r.t.Errorf("the logs show a credential:\n%s", logs)
		}
	}
}

// post sends body to ingress at path with headers h; it returns the status.
func post(t *testing.T, url string, h http.Header, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// counter is a concurrency-safe count by key.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.m)
}
