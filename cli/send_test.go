package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// sendRoutes has one route per provider preset, named after it, each with
// its own secret.
const sendRoutes = `
routes:
  - {name: github, path: /hooks/github, provider: github, secret: gh-secret, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: shopify, path: /hooks/shopify, provider: shopify, secrets: [shop-new, shop-old], destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: stripe, path: /hooks/stripe, provider: stripe, secret: whsec_stripe, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: slack, path: /hooks/slack, provider: slack, secret: slack-secret, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: standard-webhooks, path: /hooks/sw, provider: standard-webhooks, secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - name: hmac
    path: /hooks/partner/
    provider: hmac
    secret: partner-secret
    hmac: {header: X-Signature, algorithm: sha512, encoding: base64, prefix: "sha512=", id_header: X-Event-Id}
    destinations: [{name: app, url: "http://127.0.0.1:1/"}]
  - {name: none, path: /hooks/none, destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: put-only, path: /hooks/put, methods: [PUT], destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
`

// sendTarget is a real jethook ingress on a real embedded store, and the
// policies file it serves.
type sendTarget struct {
	config string
	url    string
	store  *store.Store
}

func newSendTarget(t *testing.T) *sendTarget {
	t.Helper()
	config := writeSendConfig(t)
	cfg, err := policy.Parse(config, []byte(sendRoutes), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t, store.Options{})
	h, err := proxy.New(cfg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &sendTarget{config: config, url: srv.URL, store: st}
}

func writeSendConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(path, []byte(sendRoutes), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writePayload(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (s *sendTarget) stored(t *testing.T) uint64 {
	t.Helper()
	st, err := s.store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Messages
}

// args returns the arguments that send body from a file to this target.
func (s *sendTarget) args(t *testing.T, route, body string, more ...string) []string {
	t.Helper()
	return append([]string{route, "-config", s.config, "-url", s.url, "-file", writePayload(t, body)}, more...)
}

func TestSendPostsWhatEveryPresetAcceptsAndStores(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, route, body string
		flags             []string
		stored            uint64
		answer            string
	}{
		{"a github ping is accepted and stored", "github", `{"zen":"Keep it logically awesome."}`, nil, 1, `"duplicate":false`},
		{"a github push named by -event is accepted and stored", "github", `{"ref":"refs/heads/main"}`, []string{"-event", "push"}, 1, `"duplicate":false`},
		{"a shopify order is accepted and stored", "shopify", `{"id":820982911946154508}`, nil, 1, `"duplicate":false`},
		{"a shopify order signed with the old rotated secret is accepted", "shopify", `{"id":1}`, []string{"-secret", "shop-old"}, 1, `"duplicate":false`},
		{"a stripe event is accepted and stored under its id", "stripe", `{"id":"evt_send_1","object":"event"}`, nil, 1, `"id":"evt_send_1"`},
		{"a slack event is accepted and stored under its event_id", "slack", `{"type":"event_callback","event_id":"Ev_send_1"}`, nil, 1, `"id":"Ev_send_1"`},
		{"a slack slash command form is accepted and stored", "slack", "command=%2Fweather&text=94070", nil, 1, `"duplicate":false`},
		{"a slack url_verification is answered with its challenge and not stored", "slack", `{"type":"url_verification","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`, nil, 0, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"},
		{"a standard-webhooks message is accepted and stored", "standard-webhooks", `{"type":"invoice.paid"}`, nil, 1, `"id":"msg_`},
		{"an hmac-signed payload is accepted and stored", "hmac", `{"a":1}`, nil, 1, `"duplicate":false`},
		{"an unsigned payload to a none route is accepted and stored", "none", `{"a":1}`, nil, 1, `"duplicate":false`},
		{"a route without POST gets its first method", "put-only", `{"a":1}`, nil, 1, `"duplicate":false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := newSendTarget(t)
			var out bytes.Buffer
			if err := runSend(t.Context(), target.args(t, tc.route, tc.body, tc.flags...), &out); err != nil {
				t.Fatalf("send: %v\n%s", err, &out)
			}
			if !strings.Contains(out.String(), ": 200 OK\n") || !strings.Contains(out.String(), tc.answer) {
				t.Fatalf("output %q lacks 200 OK and %q", &out, tc.answer)
			}
			if got := target.stored(t); got != tc.stored {
				t.Fatalf("stored %d messages, want %d", got, tc.stored)
			}
		})
	}
}

func TestSendWithAWrongSecretGets401AndNothingIsStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, route, secret string }{
		{"github rejects another secret", "github", "gh-wrong"},
		{"shopify rejects a secret it does not list", "shopify", "shop-older"},
		{"stripe rejects another whsec_ secret", "stripe", "whsec_wrong"},
		{"slack rejects another signing secret", "slack", "slack-wrong"},
		{"standard-webhooks rejects another key", "standard-webhooks", "whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1hcHA="},
		{"hmac rejects another secret", "hmac", "partner-wrong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := newSendTarget(t)
			var out bytes.Buffer
			err := runSend(t.Context(), target.args(t, tc.route, `{"id":"evt_1","event_id":"Ev_1"}`, "-secret", tc.secret), &out)
			if err == nil || !strings.Contains(err.Error(), "401") || errors.Is(err, errUsage) {
				t.Fatalf("send: error %v, want a 401 that is not a usage error", err)
			}
			if !strings.Contains(out.String(), "401 Unauthorized") || !strings.Contains(out.String(), "bad_signature") {
				t.Fatalf("output %q lacks the status and the reason", &out)
			}
			if got := target.stored(t); got != 0 {
				t.Fatalf("stored %d messages, want 0", got)
			}
		})
	}
}

func TestSendPrintsARefusalOnce(t *testing.T) {
	t.Parallel()
	target := newSendTarget(t)
	var out, errOut bytes.Buffer
	code := Main(append([]string{"send"}, target.args(t, "github", `{"id":"evt_1"}`, "-secret", "gh-wrong")...), &out, &errOut)
	if code != 1 || strings.Count(out.String()+errOut.String(), "401 Unauthorized") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and the 401 printed once", code, &out, &errOut)
	}
}

func TestSendReadsThePayloadFromStdin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"without -file", nil},
		{"with -file -", []string{"-file", "-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := newSendTarget(t)
			args := append([]string{"-config", target.config, "-url", target.url, "stripe"}, tc.flags...)
			var out bytes.Buffer
			if err := send(t.Context(), args, strings.NewReader(`{"id":"evt_stdin"}`), &out); err != nil {
				t.Fatalf("send: %v\n%s", err, &out)
			}
			if !strings.Contains(out.String(), `"id":"evt_stdin"`) {
				t.Fatalf("output %q does not name the stdin event", &out)
			}
			if got := target.stored(t); got != 1 {
				t.Fatalf("stored %d messages, want 1", got)
			}
		})
	}
}

func TestSendKeepsAnIDHeaderSoARedeliveryIsStoredOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, route, header string }{
		{"github with a fixed X-GitHub-Delivery", "github", "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"shopify with a fixed X-Shopify-Webhook-Id", "shopify", "X-Shopify-Webhook-Id: b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"},
		{"standard-webhooks with a fixed webhook-id", "standard-webhooks", "webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek"},
		{"hmac with a fixed id header", "hmac", "X-Event-Id: evt-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := newSendTarget(t)
			args := target.args(t, tc.route, `{"a":1}`, "-header", tc.header)
			for i, want := range []string{`"duplicate":false`, `"duplicate":true`} {
				var out bytes.Buffer
				if err := runSend(t.Context(), args, &out); err != nil {
					t.Fatalf("send %d: %v\n%s", i+1, err, &out)
				}
				if !strings.Contains(out.String(), want) {
					t.Fatalf("send %d: output %q lacks %s", i+1, &out, want)
				}
			}
			if got := target.stored(t); got != 1 {
				t.Fatalf("stored %d messages, want 1", got)
			}
		})
	}
}

// TestSendSetsTheHeadersTheProviderWould records what send posts, on a real
// HTTP server standing in for jethook.
func TestSendSetsTheHeadersTheProviderWould(t *testing.T) {
	t.Parallel()
	config := writeSendConfig(t)
	for _, tc := range []struct {
		name, route, body string
		flags             []string
		want              map[string]string
	}{
		{"github sends a ping by default", "github", `{}`, nil,
			map[string]string{"X-GitHub-Event": "ping", "Content-Type": "application/json"}},
		{"github sends the event named by -event", "github", `{}`, []string{"-event", "push"},
			map[string]string{"X-GitHub-Event": "push"}},
		{"github keeps an event given by -header", "github", `{}`, []string{"-header", "X-GitHub-Event: issues"},
			map[string]string{"X-GitHub-Event": "issues"}},
		{"shopify sends orders/create by default", "shopify", `{}`, nil,
			map[string]string{"X-Shopify-Topic": "orders/create"}},
		{"shopify sends the topic named by -event", "shopify", `{}`, []string{"-event", "app/uninstalled"},
			map[string]string{"X-Shopify-Topic": "app/uninstalled"}},
		{"slack sends a form body as a form", "slack", "command=%2Fweather", nil,
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		{"slack sends a JSON body as JSON", "slack", ` {"type":"event_callback"}`, nil,
			map[string]string{"Content-Type": "application/json"}},
		{"a Content-Type given by -header is kept", "none", `a=1`, []string{"-header", "Content-Type: text/plain"},
			map[string]string{"Content-Type": "text/plain"}},
		{"extra headers are sent", "stripe", `{}`, []string{"-header", "X-Trace: 1", "-header", "X-Other:two"},
			map[string]string{"X-Trace": "1", "X-Other": "two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan http.Header, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Clone()
			}))
			t.Cleanup(srv.Close)
			args := append([]string{tc.route, "-config", config, "-url", srv.URL, "-file", writePayload(t, tc.body)}, tc.flags...)
			var out bytes.Buffer
			if err := runSend(t.Context(), args, &out); err != nil {
				t.Fatalf("send: %v\n%s", err, &out)
			}
			h := <-got
			for k, v := range tc.want {
				if h.Get(k) != v {
					t.Errorf("%s: %q, want %q", k, h.Get(k), v)
				}
			}
		})
	}
}

func TestSendRejectsMistakesAsUsageErrors(t *testing.T) {
	t.Parallel()
	config := writeSendConfig(t)
	base := []string{"-config", config, "-url", "http://127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no route", base},
		{"two routes", append([]string{"github", "stripe"}, base...)},
		{"an unknown route", append([]string{"gitlab"}, base...)},
		{"-event on a stripe route", append([]string{"stripe", "-event", "push"}, base...)},
		{"a header without a colon", append([]string{"github", "-header", "X-Trace"}, base...)},
		{"a header without a name", append([]string{"github", "-header", ": 1"}, base...)},
		{"a URL that is not http", []string{"github", "-config", config, "-url", "127.0.0.1:8080"}},
		{"an unknown flag", append([]string{"github", "-method", "GET"}, base...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := send(t.Context(), tc.args, strings.NewReader(`{}`), io.Discard)
			if !errors.Is(err, errUsage) {
				t.Fatalf("error %v, want a usage error", err)
			}
		})
	}
}

func TestSendReportsAnUnreachableJethook(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := send(ctx, []string{"none", "-config", writeSendConfig(t), "-url", url}, strings.NewReader(`{}`), io.Discard)
	if err == nil || errors.Is(err, errUsage) {
		t.Fatalf("error %v, want a connection error", err)
	}
}

func TestTheDefaultURLIsWhereServeListens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ listen, want string }{
		{"", "http://127.0.0.1:8080"},
		{":8080", "http://127.0.0.1:8080"},
		{":9000", "http://127.0.0.1:9000"},
		{"0.0.0.0:9000", "http://127.0.0.1:9000"},
		{"[::]:9000", "http://127.0.0.1:9000"},
		{"127.0.0.1:9000", "http://127.0.0.1:9000"},
		{"10.1.2.3:9000", "http://10.1.2.3:9000"},
		{"[::1]:9000", "http://[::1]:9000"},
		{"localhost:9000", "http://localhost:9000"},
	} {
		t.Run("listening on "+tc.listen+" means "+tc.want, func(t *testing.T) {
			t.Parallel()
			if got := listenURL(tc.listen); got != tc.want {
				t.Fatalf("listenURL(%q) = %q, want %q", tc.listen, got, tc.want)
			}
		})
	}
}

// TestSendMakesARequestEveryPresetVerifies walks every preset the provider
// package has: send's request carries the preset's sample headers and
// passes the preset's own Verify, so a new preset needs no change to send.
func TestSendMakesARequestEveryPresetVerifies(t *testing.T) {
	t.Parallel()
	routes := map[string]presetRoute{}
	for _, pr := range presetRouteList() {
		routes[pr.name] = pr.fill()
	}
	var list []presetRoute
	for _, info := range provider.Presets() {
		pr, ok := routes[info.Name]
		if !ok {
			pr = presetRoute{name: info.Name}.fill()
		}
		list = append(list, pr)
	}
	config := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(config, []byte(presetConfig(list, "http://127.0.0.1:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Load(config)
	if err != nil {
		t.Fatalf("a route for every preset (add the new one to presetRouteList): %v", err)
	}
	got := make(chan *provider.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		got <- &provider.Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone(), Body: body}
	}))
	t.Cleanup(srv.Close)
	for _, info := range provider.Presets() {
		pr := routes[info.Name]
		t.Run(info.Name, func(t *testing.T) {
			args := []string{info.Name, "-config", config, "-url", srv.URL, "-file", writePayload(t, pr.body), "-secret", pr.sign}
			var out bytes.Buffer
			if err := runSend(t.Context(), args, &out); err != nil {
				t.Fatalf("send: %v\n%s", err, &out)
			}
			req := <-got
			r, _ := cfg.Route(info.Name)
			p, err := provider.New(r.ProviderConfig())
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Verify(req); err != nil {
				t.Fatalf("the preset refuses what send sent: %v", err)
			}
			s := info.Sample
			if s.EventHeader != "" && req.Header.Get(s.EventHeader) != s.Event {
				t.Errorf("%s: %q, want %q", s.EventHeader, req.Header.Get(s.EventHeader), s.Event)
			}
			for _, kv := range s.Headers {
				if req.Header.Get(kv[0]) != kv[1] {
					t.Errorf("%s: %q, want %q", kv[0], req.Header.Get(kv[0]), kv[1])
				}
			}
		})
	}
}
