package app_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
)

const oneRoute = `
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "${BACKEND}/shop", slow_start: 0s}
`

func parse(t testing.TB, yaml, backend string) *policy.Config {
	t.Helper()
	return apptest.Config(t, yaml, map[string]string{"BACKEND": backend})
}

// scrape is a's /metrics, in Prometheus's text format.
func scrape(a *app.App) string {
	rec := httptest.NewRecorder()
	a.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// githubRoute is one route taking GitHub's webhooks, signed with
// githubSecret, for ${BACKEND}/github.
const (
	githubSecret = "gh-s3cret"
	githubRoute  = `
routes:
  - name: gh
    path: /hooks/github
    provider: github
    secret: ` + githubSecret + `
    destinations:
      - {name: app, url: "${BACKEND}/github", slow_start: 0s}
`
)

// githubSignature is body's X-Hub-Signature-256 under githubSecret.
func githubSignature(body []byte) string {
	m := hmac.New(sha256.New, []byte(githubSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// The assembled application delivers what its ingress takes, counts it in
// its metrics, and takes a new route on Reload; a file Reload rejects
// changes nothing.
func TestTheAssembledAppDeliversCountsAndReloads(t *testing.T) {
	t.Parallel()
	var delivered atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		delivered.Add(1)
	}))
	t.Cleanup(backend.Close)
	next := parse(t, oneRoute+`  - name: orders
    path: /hooks/orders
    destinations:
      - {name: app, url: "${BACKEND}/orders", slow_start: 0s}
`, backend.URL)
	var load atomic.Pointer[func() (*policy.Config, error)]
	jh := apptest.Start(t, parse(t, oneRoute, backend.URL), app.Options{
		Load: func() (*policy.Config, error) { return (*load.Load())() },
	})
	a, ingress := jh.App, jh.Public
	post := func(path string) int {
		resp, err := http.Post(ingress.URL+path, "application/json", strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	if code := post("/hooks/shop"); code != http.StatusOK {
		t.Fatalf("post: %d", code)
	}
	testkit.Eventually(t, 10*time.Second, "the delivery", func() bool { return delivered.Load() == 1 })
	// The backend has the request before the forwarder has its answer
	// and counts it: wait for the count.
	testkit.Eventually(t, 10*time.Second, "the metrics to count the delivery", func() bool {
		return strings.Contains(scrape(a), `jethook_delivered_total{destination="app",route="shop"} 1`)
	})

	tooBig := func() (*policy.Config, error) {
		return parse(t, oneRoute+"    max_body: 16MiB\n", backend.URL), nil
	}
	load.Store(&tooBig)
	if err := a.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("reload of a route the store could not take: %v", err)
	}
	if code := post("/hooks/orders"); code != http.StatusNotFound {
		t.Fatalf("a rejected reload added a route: %d", code)
	}
	good := func() (*policy.Config, error) { return next, nil }
	load.Store(&good)
	if err := a.Reload(context.Background()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if code := post("/hooks/orders"); code != http.StatusOK {
		t.Fatalf("post to the reloaded route: %d", code)
	}
	testkit.Eventually(t, 10*time.Second, "the reloaded route's delivery", func() bool { return delivered.Load() == 2 })
}

func TestARouteTheStoreCouldNotTakeIsRefused(t *testing.T) {
	t.Parallel()
	cfg := parse(t, oneRoute, "http://127.0.0.1:9")
	if err := app.Check(cfg, app.Limits{MaxPayload: 1 << 20}); err == nil || !strings.Contains(err.Error(), `test.yaml:3: route "shop": max_body`) {
		t.Errorf("err = %v, want the route's file, line and max_body", err)
	}
	if err := app.Check(cfg, app.Limits{MaxPayload: 8 << 20}); err != nil {
		t.Errorf("8 MiB max_payload: %v", err)
	}
}

// Check reports every mistake it finds, each with its file, line and key,
// so that one run of `jethook check` shows them all.
func TestCheckReportsEveryMistakeAtOnce(t *testing.T) {
	t.Parallel()
	cfg := parse(t, oneRoute, "http://169.254.169.254")
	err := app.Check(cfg, app.Limits{MaxPayload: 1 << 20, Retention: time.Minute})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"test.yaml: a route's retry max_age",
		`test.yaml:3: route "shop" destination "app": url: egress refused: 169.254.169.254`,
		`test.yaml:3: route "shop": max_body`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("%d lines, want one per mistake:\n%v", n, err)
	}
}
