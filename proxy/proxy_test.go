package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// routes has one route per provider preset, each with its own secret.
const routes = `
defaults:
  retry: {max_age: 1h}
routes:
  - {name: plain, path: /hooks/plain, methods: [POST, PUT], max_body: 1KiB, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: github, path: /hooks/github, provider: github, secret: gh-secret, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: shopify, path: /hooks/shopify, provider: shopify, secrets: [shop-new, shop-old], destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: stripe, path: /hooks/stripe, provider: stripe, secret: whsec_stripe, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: slack, path: /hooks/slack, provider: slack, secret: slack-secret, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: sw, path: /hooks/sw, provider: standard-webhooks, secret: ` + whsec + `, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - name: partner
    path: /hooks/partner
    provider: hmac
    secret: partner-secret
    hmac: {header: X-Signature, algorithm: sha512, encoding: base64, prefix: "sha512=", id_header: X-Event-Id}
    destinations: [{name: app, url: "http://127.0.0.1:1/"}]
`

type ingress struct {
	t     *testing.T
	cfg   *policy.Config
	store *store.Store
	srv   *httptest.Server
}

func newIngress(t *testing.T) *ingress { return newIngressLogging(t, nil) }

// newIngressLogging is newIngress with the handler logging to log.
func newIngressLogging(t *testing.T, log *slog.Logger) *ingress {
	t.Helper()
	cfg, err := policy.Parse("routes.yaml", []byte(routes), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t, store.Options{PublishTimeout: time.Second})
	h, err := proxy.New(cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &ingress{t: t, cfg: cfg, store: st, srv: srv}
}

type answer struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func (in *ingress) do(method, path string, h http.Header, body io.Reader) answer {
	in.t.Helper()
	req, err := http.NewRequest(method, in.srv.URL+path, body)
	if err != nil {
		in.t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	_ = json.Unmarshal(raw, &a.json)
	return a
}

func (in *ingress) stored() uint64 {
	in.t.Helper()
	s, err := in.store.Stats(context.Background())
	if err != nil {
		in.t.Fatal(err)
	}
	return s.Messages
}

// signed returns headers the route's provider would send for body.
func (in *ingress) signed(route string, body []byte, secret string, at time.Time) http.Header {
	in.t.Helper()
	r, ok := in.cfg.Route(route)
	if !ok {
		in.t.Fatalf("no route %s", route)
	}
	p, err := provider.New(r.ProviderConfig())
	if err != nil {
		in.t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if err := p.Sign(&provider.Request{Method: http.MethodPost, URL: &url.URL{Path: r.Path}, Header: h, Body: body}, secret, at); err != nil {
		in.t.Fatal(err)
	}
	return h
}

func TestRequestsThatMatchNoRouteAreRejectedWithAReason(t *testing.T) {
	t.Parallel()
	in := newIngress(t)
	cases := []struct {
		name, method, path string
		body               io.Reader
		status             int
		reason             string
	}{
		{"an unknown path gets 404", "POST", "/hooks/nope", strings.NewReader("{}"), 404, "no_route"},
		{"a wrong method gets 405", "GET", "/hooks/plain", nil, 405, "method_not_allowed"},
		{"a body over max_body gets 413", "POST", "/hooks/plain", strings.NewReader(strings.Repeat("x", 1025)), 413, "body_too_large"},
		{"a chunked body over max_body gets 413", "PUT", "/hooks/plain", io.MultiReader(strings.NewReader(strings.Repeat("y", 2000))), 413, "body_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := in.do(c.method, c.path, nil, c.body)
			if a.status != c.status || a.json["error"] != c.reason || a.json["message"] == "" {
				t.Fatalf("got %d %s, want %d with reason %s", a.status, a.body, c.status, c.reason)
			}
		})
	}
	if a := in.do("GET", "/hooks/plain", nil, nil); a.header.Get("Allow") != "POST, PUT" {
		t.Errorf("405 without Allow: %v", a.header)
	}
	if n := in.stored(); n != 0 {
		t.Fatalf("%d messages stored, want 0", n)
	}
}

func TestABodyAtTheLimitIsStored(t *testing.T) {
	t.Parallel()
	in := newIngress(t)
	if a := in.do("POST", "/hooks/plain", nil, strings.NewReader(strings.Repeat("x", 1024))); a.status != 200 {
		t.Fatalf("got %d %s", a.status, a.body)
	}
	if n := in.stored(); n != 1 {
		t.Fatalf("%d stored", n)
	}
}

func TestEveryPresetStoresWhatItsProviderSignedAndNothingElse(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{"github": "gh-secret", "shopify": "shop-old", "stripe": "whsec_stripe",
		"slack": "slack-secret", "sw": whsec, "partner": "partner-secret"}
	for route, secret := range secrets {
		t.Run(route, func(t *testing.T) {
			t.Parallel()
			in := newIngress(t)
			body := fmt.Appendf(nil, `{"id":"evt_%s","event_id":"Ev%s","n":1}`, route, route)
			now := time.Now()
			wrong := "not-the-secret"
			if route == "sw" {
				wrong = "whsec_bm90LXRoZS1zZWNyZXQtYXQtYWxs"
			}
			reject := map[string]struct {
				h    http.Header
				body []byte
			}{
				"a one-byte change to the body": {in.signed(route, body, secret, now), append(bytes.Clone(body[:len(body)-2]), '2', '}')},
				"a wrong secret":                {in.signed(route, body, wrong, now), body},
				"no signature headers":          {http.Header{"Content-Type": {"application/json"}}, body},
			}
			if route == "stripe" || route == "slack" || route == "sw" {
				reject["a stale timestamp"] = struct {
					h    http.Header
					body []byte
				}{in.signed(route, body, secret, now.Add(-6*time.Minute)), body}
			}
			for name, c := range reject {
				a := in.do("POST", "/hooks/"+route, c.h, bytes.NewReader(c.body))
				if a.status != http.StatusUnauthorized || a.json["error"] == "" {
					t.Errorf("%s: got %d %s, want 401 with a reason", name, a.status, a.body)
				}
			}
			if n := in.stored(); n != 0 {
				t.Fatalf("%d messages stored after rejected requests", n)
			}
			h := in.signed(route, body, secret, now)
			first := in.do("POST", "/hooks/"+route, h, bytes.NewReader(body))
			if first.status != 200 || first.json["duplicate"] != false {
				t.Fatalf("valid request: got %d %s", first.status, first.body)
			}
			again := in.do("POST", "/hooks/"+route, h, bytes.NewReader(body))
			if again.status != 200 || again.json["duplicate"] != true || again.json["id"] != first.json["id"] {
				t.Fatalf("redelivery: got %d %s after %s", again.status, again.body, first.body)
			}
			if n := in.stored(); n != 1 {
				t.Fatalf("%d messages stored, want 1", n)
			}
		})
	}
}

func TestTheProvidersEventIDIsTheDedupKey(t *testing.T) {
	t.Parallel()
	in := newIngress(t)
	body := []byte(`{"zen":"Keep it logically awesome."}`)
	h := in.signed("github", body, "gh-secret", time.Now())
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	if a := in.do("POST", "/hooks/github", h, bytes.NewReader(body)); a.json["id"] != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Fatalf("got %s", a.body)
	}
	// A different body with the same delivery id is GitHub redelivering the
	// same event: stored once. Its signature differs, so the stream's
	// short window (keyed on what the signature covers) does not catch it;
	// the index does, once it holds the first.
	testkit.Eventually(t, 5*time.Second, "the first delivery indexed", func() bool {
		ok, err := in.store.Has(context.Background(), "github", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		return ok && err == nil
	})
	body2 := []byte(`{"zen":"Design for failure."}`)
	h2 := in.signed("github", body2, "gh-secret", time.Now())
	h2.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	if a := in.do("POST", "/hooks/github", h2, bytes.NewReader(body2)); a.json["duplicate"] != true {
		t.Fatalf("got %s", a.body)
	}
	// An id that cannot be a message id is hashed, not trusted.
	h3 := in.signed("github", body, "gh-secret", time.Now())
	h3.Set("X-GitHub-Delivery", strings.Repeat("z", 500))
	if a := in.do("POST", "/hooks/github", h3, bytes.NewReader(body)); a.status != 200 || !strings.HasPrefix(a.json["id"].(string), "sha256:") {
		t.Fatalf("got %s", a.body)
	}
}

func TestSlackURLVerificationIsAnsweredAtOnceAndNotStored(t *testing.T) {
	t.Parallel()
	in := newIngress(t)
	body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	a := in.do("POST", "/hooks/slack", in.signed("slack", body, "slack-secret", time.Now()), bytes.NewReader(body))
	if a.status != 200 || a.body != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("got %d %q", a.status, a.body)
	}
	if n := in.stored(); n != 0 {
		t.Fatalf("%d stored", n)
	}
}

func TestWithTheStoreDownIngressAnswers503NeverA2xx(t *testing.T) {
	t.Parallel()
	in := newIngress(t)
	in.store.Close()
	start := time.Now()
	a := in.do("POST", "/hooks/plain", nil, strings.NewReader(`{"a":1}`))
	if a.status != http.StatusServiceUnavailable || a.json["error"] != "store_unavailable" || a.header.Get("Retry-After") == "" {
		t.Fatalf("got %d %s %v", a.status, a.body, a.header)
	}
	t.Logf("answered 503 after %s", time.Since(start))
}

// A store that refuses writes says so once, through readiness, metrics and
// alerts; ingress does not add a warning or an error line per webhook.
func TestAStoreThatRefusesWritesDoesNotFloodTheLog(t *testing.T) {
	t.Parallel()
	var logged testkit.LogBuffer
	in := newIngressLogging(t, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo})))
	in.store.Close()
	for i := range 3 {
		if a := in.do("POST", "/hooks/plain", nil, strings.NewReader(fmt.Sprintf(`{"n":%d}`, i))); a.status != http.StatusServiceUnavailable {
			t.Fatalf("webhook %d: %d %s, want 503", i, a.status, a.body)
		}
	}
	if logged.String() != "" {
		t.Errorf("three refused webhooks logged at info or above:\n%s", logged.String())
	}
}

// The ingress records whether a body is JSON, so that searches and
// filters reading the webhook later need not check it again.
func TestTheIngressRecordsWhetherTheBodyIsJSON(t *testing.T) {
	t.Parallel()
	in := newIngress(t)
	for _, tt := range []struct {
		name, body string
		want       bool
	}{
		{"an object", `{"id":"order_1004","items":[1,2]}`, true},
		{"a form", "kind=order&id=1004", false},
		{"a truncated object", `{"id":"order_1004"`, false},
	} {
		a := in.do("POST", "/hooks/plain", nil, strings.NewReader(tt.body))
		if a.status != 200 {
			t.Fatalf("%s: got %d %s", tt.name, a.status, a.body)
		}
		id, _ := a.json["id"].(string)
		var e *store.Envelope
		testkit.Eventually(t, 5*time.Second, "the webhook indexed", func() bool {
			var err error
			e, _, err = in.store.Event(context.Background(), id, "plain")
			return err == nil
		})
		if e.JSON != tt.want || string(e.Body) != tt.body {
			t.Errorf("%s: stored JSON %v with body %q, want %v", tt.name, e.JSON, e.Body, tt.want)
		}
	}
}
