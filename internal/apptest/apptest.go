// Package apptest runs jethook for tests as `jethook serve` assembles it
// (app.New) on a real embedded store, with its public and admin listeners
// on test servers, stopped and restarted on the same store where a test
// needs it. The admin, dashboard, CLI, forward and pull tests share it,
// so each tests the stack that ships.
package apptest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// Rig is a running jethook and the servers in front of it.
type Rig struct {
	App *app.App
	// Public serves the public listener (the ingress and pull
	// destinations), Admin the admin listener (the API and the dashboard),
	// of the app running now: their URLs stay across a Restart.
	Public *httptest.Server
	Admin  *httptest.Server
	// Log is what jethook logs, unless the options gave a Logger.
	Log *testkit.LogBuffer

	t       testing.TB
	cfg     *policy.Config
	running atomic.Pointer[app.App]
}

// FanOut is the policies file the admin and CLI tests share: one route,
// shop at /hooks/shop, delivering to two destinations, app at ${APP}/hook
// and audit at ${AUDIT}/hook. A transient failure waits 1s in backoff, up
// to 3 attempts; a permanent one is dead-lettered at once.
const FanOut = `
defaults:
  retry: {backoff: fixed, delay: 1s, jitter: none, max_attempts: 3, max_age: 1h}
  timeout: 2s
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "${APP}/hook", slow_start: 0s}
      - {name: audit, url: "${AUDIT}/hook", slow_start: 0s}
`

// fetchWait is how long a test's destination loops wait for a message
// before they look again: short, so that tests end soon.
const fetchWait = 100 * time.Millisecond

// Start runs cfg with o and stops it when the test ends. Where o leaves
// them out, the store is a new one from storetest.Open, the destination
// loops wait fetchWait for messages, and the log goes to Rig.Log.
func Start(t testing.TB, cfg *policy.Config, o app.Options) *Rig {
	t.Helper()
	r := &Rig{Log: &testkit.LogBuffer{}, t: t, cfg: cfg}
	r.Public = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.running.Load().Public.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Public.Close)
	r.Admin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.running.Load().Admin.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Admin.Close)
	r.Restart(o)
	return r
}

// Restart runs the rig's config again with o, filled in as Start fills
// it but for the store, which stays the one running now unless o gives
// another. The app running now, if any, is stopped first. Requests to
// Public and Admin go to the new app.
func (r *Rig) Restart(o app.Options) {
	r.t.Helper()
	r.Stop()
	if o.Store == nil && r.App != nil {
		o.Store = r.App.Store
	}
	if o.Store == nil {
		o.Store = storetest.Open(r.t, store.Options{})
	}
	if o.FetchWait == 0 {
		o.FetchWait = fetchWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(r.Log, nil))
	}
	a, err := app.New(context.Background(), r.cfg, o)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { a.Close(time.Second) })
	r.App = a
	r.running.Store(a)
}

// Stop stops the app running now, as a shutdown does: it no longer
// delivers, and the store stays open for a Restart.
func (r *Rig) Stop() {
	if r.App != nil {
		r.App.Close(time.Second)
	}
}

// Config parses a policies file for a test; env holds its ${NAME} values.
func Config(t testing.TB, yaml string, env map[string]string) *policy.Config {
	t.Helper()
	cfg, err := policy.Parse("test.yaml", []byte(yaml), func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Post sends a webhook to the public listener at path with the given
// headers, and returns the answer's status and the event id it
// acknowledges.
func (r *Rig) Post(t testing.TB, path, body string, header map[string]string) (int, string) {
	t.Helper()
	return Post(t, r.Public.URL+path, body, header)
}

// Post sends a webhook to url, a jethook's public listener and a route's
// path, with the given headers, and returns the answer's status and the
// event id it acknowledges.
func Post(t testing.TB, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ack struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&ack)
	return resp.StatusCode, ack.ID
}
