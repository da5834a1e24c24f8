package cli

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// presetRoute is one route per preset in presetRoutes: its secret, what
// signs for it (the secret, except SendGrid's private key), a wrong
// signing secret, and the header whose absence is missing_signature.
type presetRoute struct {
	name, secret, sign, wrong, sigHeader string
	extra                                string // more YAML keys of the route
	body                                 string
	contentType                          string
}

// presetSendGridKey returns a fresh SendGrid-style key pair: the base64
// DER public key and the base64 PKCS #8 private key.
func presetSendGridKey() (public, private string) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, _ := x509.MarshalPKCS8PrivateKey(k)
	return base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv)
}

// presetRouteList returns every preset's route; %s in the YAML is the
// backend's URL.
func presetRouteList() []presetRoute {
	pub, priv := presetSendGridKey()
	_, other := presetSendGridKey()
	sw := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	url := func(name string) string { return "public_url: https://hooks.example.com/hooks/" + name }
	return []presetRoute{
		{name: "bitbucket", sigHeader: "X-Hub-Signature"},
		{name: "calendly", sigHeader: "Calendly-Webhook-Signature"},
		{name: "docusign", sigHeader: "X-DocuSign-Signature-1"},
		{name: "dropbox", sigHeader: "X-Dropbox-Signature"},
		{name: "forgejo", sigHeader: "X-Forgejo-Signature"},
		{name: "gitea", sigHeader: "X-Gitea-Signature"},
		{name: "github", sigHeader: "X-Hub-Signature-256"},
		{name: "gitlab", sigHeader: "X-Gitlab-Token"},
		{name: "hmac", sigHeader: "X-Signature", extra: `hmac: {header: X-Signature, algorithm: sha512, encoding: base64, id_header: X-Event-Id}`},
		{name: "hubspot", sigHeader: "X-HubSpot-Signature-v3", extra: url("hubspot")},
		{name: "intercom", sigHeader: "X-Hub-Signature"},
		{name: "lemonsqueezy", sigHeader: "X-Signature"},
		{name: "linear", sigHeader: "Linear-Signature"},
		{name: "mailgun", body: `{"event-data":{"id":"mg-1","event":"delivered"}}`},
		{name: "meta", sigHeader: "X-Hub-Signature-256", extra: "verify_token: meta-verify"},
		{name: "mux", sigHeader: "Mux-Signature"},
		{name: "okta", sigHeader: "Authorization", secret: "Bearer okta-s3cret"},
		{name: "paddle", sigHeader: "Paddle-Signature"},
		{name: "pagerduty", sigHeader: "X-PagerDuty-Signature"},
		{name: "postmark", sigHeader: "Authorization", secret: "hooks:pa55"},
		{name: "sendgrid", sigHeader: provider.HeaderSendGridSignature, secret: pub, sign: priv, wrong: other, body: `[{"event":"delivered","sg_event_id":"sg-1"}]`},
		{name: "razorpay", sigHeader: "X-Razorpay-Signature"},
		{name: "sentry", sigHeader: "Sentry-Hook-Signature"},
		{name: "shopify", sigHeader: "X-Shopify-Hmac-Sha256"},
		{name: "signature", sigHeader: "X-Acme-Signature",
			extra: `signature: {header: X-Acme-Signature, separator: ",", signature_key: v1, timestamp_key: t, signed: "{timestamp}.{body}", id_json: /id}`},
		{name: "slack", sigHeader: "X-Slack-Signature"},
		{name: "square", sigHeader: "x-square-hmacsha256-signature", extra: url("square")},
		{name: "standard-webhooks", sigHeader: "webhook-signature", secret: sw, wrong: "whsec_d3Jvbmcga2V5"},
		{name: "stripe", sigHeader: "Stripe-Signature"},
		{name: "svix", sigHeader: "svix-signature", secret: strings.TrimPrefix(sw, "whsec_"), wrong: "whsec_d3Jvbmcga2V5"},
		{name: "twilio", sigHeader: "X-Twilio-Signature", extra: url("twilio"), body: "CallSid=CA1&From=%2B14158675309&Body=hi+there", contentType: "application/x-www-form-urlencoded"},
		{name: "twitch", sigHeader: "Twitch-Eventsub-Message-Signature"},
		{name: "typeform", sigHeader: "Typeform-Signature"},
		{name: "vercel", sigHeader: "x-vercel-signature"},
		{name: "woocommerce", sigHeader: "X-WC-Webhook-Signature"},
		{name: "zoom", sigHeader: "x-zm-signature"},
	}
}

// fill sets the defaults of pr.
func (pr presetRoute) fill() presetRoute {
	if pr.secret == "" {
		pr.secret = "s3cret-" + pr.name
	}
	if pr.sign == "" {
		pr.sign = pr.secret
	}
	if pr.wrong == "" {
		pr.wrong = "wrong-" + pr.name
	}
	if pr.body == "" {
		pr.body = `{"id":"evt_` + pr.name + `","event_id":"ev_1","eventId":"okta-1","event":{"id":"pd-1"},"note":"caf\u00e9 \u2603"}`
	}
	if pr.contentType == "" {
		pr.contentType = "application/json"
	}
	return pr
}

// presetConfig is a policies file with a route per preset at
// /hooks/<name>, delivering to backend/<name>.
func presetConfig(routes []presetRoute, backend string) string {
	var b strings.Builder
	b.WriteString("defaults:\n  retry: {backoff: fixed, delay: 1s, jitter: none, max_attempts: 3, max_age: 1h}\nroutes:\n")
	for _, pr := range routes {
		pr = pr.fill()
		fmt.Fprintf(&b, "  - name: %s\n    path: /hooks/%s\n    provider: %s\n", pr.name, pr.name, pr.name)
		if pr.name != provider.NameNone {
			fmt.Fprintf(&b, "    secret: %q\n", pr.secret)
		}
		if pr.extra != "" {
			fmt.Fprintf(&b, "    %s\n", pr.extra)
		}
		fmt.Fprintf(&b, "    destinations: [{name: app, url: %q, slow_start: 0s}]\n", backend+"/"+pr.name)
	}
	return b.String()
}

// presetTarget is a real ingress on a real embedded store serving every
// preset's route.
type presetTarget struct {
	cfg    *policy.Config
	config string
	url    string
	store  *store.Store
}

func newPresetTarget(t *testing.T, routes []presetRoute) *presetTarget {
	t.Helper()
	yaml := presetConfig(routes, "http://127.0.0.1:1")
	config := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Load(config)
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	st := storetest.Open(t, store.Options{})
	h, err := proxy.New(cfg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &presetTarget{cfg: cfg, config: config, url: srv.URL, store: st}
}

func (p *presetTarget) stored(t *testing.T) uint64 {
	t.Helper()
	st, err := p.store.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.Messages
}

// signed returns a request to the route signed with secret at `at`, as
// the sender would send it.
func signed(t *testing.T, cfg *policy.Config, base string, pr presetRoute, secret string, at time.Time) *http.Request {
	t.Helper()
	r, _ := cfg.Route(pr.name)
	p, err := provider.New(r.ProviderConfig())
	if err != nil {
		t.Fatal(err)
	}
	preq := &provider.Request{Method: http.MethodPost, URL: &url.URL{Path: r.Path}, Header: http.Header{"Content-Type": {pr.contentType}}, Body: []byte(pr.body)}
	if err := p.Sign(preq, secret, at); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+r.Path, bytes.NewReader(preq.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = preq.Header
	return req
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSendSignsForEveryPresetAndTheIngressStoresIt(t *testing.T) {
	t.Parallel()
	routes := presetRouteList()
	target := newPresetTarget(t, routes)
	for _, pr := range routes {
		pr := pr.fill()
		t.Run(pr.name, func(t *testing.T) {
			before := target.stored(t)
			var out bytes.Buffer
			args := []string{pr.name, "-config", target.config, "-url", target.url, "-file", writePayload(t, pr.body), "-secret", pr.sign}
			if err := runSend(t.Context(), args, &out); err != nil {
				t.Fatalf("send: %v\n%s", err, &out)
			}
			if !strings.Contains(out.String(), ": 200 OK\n") {
				t.Fatalf("output %q lacks 200 OK", &out)
			}
			if got := target.stored(t); got != before+1 {
				t.Fatalf("stored %d messages, want %d", got, before+1)
			}
			out.Reset()
			args[len(args)-1] = pr.wrong
			if err := runSend(t.Context(), args, &out); err == nil || !strings.Contains(out.String(), "401 Unauthorized") {
				t.Fatalf("send with a wrong secret: %v\n%s", err, &out)
			}
			if got := target.stored(t); got != before+1 {
				t.Fatalf("a wrongly signed request was stored")
			}
		})
	}
}

func TestSendSetsWhatShopifysSDKRequires(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	t.Cleanup(srv.Close)
	args := []string{"shopify", "-config", writeSendConfig(t), "-url", srv.URL, "-file", writePayload(t, `{"id":1}`)}
	if err := runSend(t.Context(), args, io.Discard); err != nil {
		t.Fatal(err)
	}
	h := <-got
	// @shopify/shopify-api's webhooks.validate refuses a request without
	// any of these.
	for _, name := range []string{"X-Shopify-Hmac-Sha256", "X-Shopify-Topic", "X-Shopify-API-Version", "X-Shopify-Shop-Domain", "X-Shopify-Webhook-Id"} {
		if h.Get(name) == "" {
			t.Errorf("%s is missing", name)
		}
	}
}

// TestEveryPresetRefusesTamperingAndStoresNothing runs on the real
// ingress and store: each kind of bad request gets 401 and is not stored.
func TestEveryPresetRefusesTamperingAndStoresNothing(t *testing.T) {
	t.Parallel()
	routes := presetRouteList()
	target := newPresetTarget(t, routes)
	for _, pr := range routes {
		pr := pr.fill()
		info, _ := provider.Lookup(pr.name)
		r, _ := target.cfg.Route(pr.name)
		cases := map[string]*http.Request{
			"a wrong secret": signed(t, target.cfg, target.url, pr, pr.wrong, time.Now()),
		}
		if pr.sigHeader != "" {
			req := signed(t, target.cfg, target.url, pr, pr.sign, time.Now())
			req.Header.Del(pr.sigHeader)
			cases["a missing signature header"] = req
		}
		if r.Provider != "gitlab" && r.Provider != "okta" && r.Provider != "postmark" && r.Provider != "mailgun" {
			req := signed(t, target.cfg, target.url, pr, pr.sign, time.Now())
			body, _ := io.ReadAll(req.Body)
			body[len(body)/2] ^= 0x01
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			cases["a one-byte change"] = req
		}
		if info.Tolerance > 0 || (pr.name == "signature") {
			cases["a stale timestamp"] = signed(t, target.cfg, target.url, pr, pr.sign, time.Now().Add(-r.Tolerance-time.Minute))
		}
		for what, req := range cases {
			t.Run(pr.name+" refuses "+what, func(t *testing.T) {
				if code, body := do(t, req); code != http.StatusUnauthorized {
					t.Fatalf("status %d %s, want 401", code, body)
				}
			})
		}
	}
	if got := target.stored(t); got != 0 {
		t.Fatalf("stored %d messages, want none", got)
	}
}

// TestHandshakesAreAnsweredAndNotStored runs each sender's verification
// request through the real ingress and store.
func TestHandshakesAreAnsweredAndNotStored(t *testing.T) {
	t.Parallel()
	routes := presetRouteList()
	target := newPresetTarget(t, routes)
	route := map[string]presetRoute{}
	for _, pr := range routes {
		route[pr.name] = pr.fill()
	}
	signedBody := func(name, body string, h http.Header) *http.Request {
		pr := route[name]
		pr.body = body
		req := signed(t, target.cfg, target.url, pr, pr.sign, time.Now())
		for k, v := range h {
			req.Header[k] = v
		}
		return req
	}
	// Twitch signs the message type too in practice; it is a header here.
	twitch := signedBody("twitch", `{"challenge":"pogchamp-kappa","subscription":{"type":"channel.follow"}}`, nil)
	twitch.Header.Set("Twitch-Eventsub-Message-Type", "webhook_callback_verification")
	for _, tc := range []struct {
		name      string
		req       *http.Request
		status    int
		answerHas string
	}{
		{"meta answers the challenge when verify_token matches", getReq(t, target.url+"/hooks/meta?hub.mode=subscribe&hub.verify_token=meta-verify&hub.challenge=1158201444", nil), 200, "1158201444"},
		{"meta forbids a wrong verify_token", getReq(t, target.url+"/hooks/meta?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1", nil), 403, "bad_verify_token"},
		{"meta refuses a GET that is not its handshake", getReq(t, target.url+"/hooks/meta", nil), 400, "not_a_handshake"},
		{"okta answers its verification GET", getReq(t, target.url+"/hooks/okta", http.Header{"Authorization": {"Bearer okta-s3cret"}, "X-Okta-Verification-Challenge": {"okta-challenge-1"}}), 200, `{"verification":"okta-challenge-1"}`},
		{"okta refuses a verification GET without its secret", getReq(t, target.url+"/hooks/okta", http.Header{"X-Okta-Verification-Challenge": {"x"}}), 401, "missing_signature"},
		{"zoom answers endpoint.url_validation", signedBody("zoom", `{"event":"endpoint.url_validation","payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"}}`, nil), 200, `"plainToken":"qgg8vlvZRS6UYooatFL8Aw"`},
		{"twitch answers webhook_callback_verification", twitch, 200, "pogchamp-kappa"},
		{"slack answers url_verification", signedBody("slack", `{"type":"url_verification","challenge":"3eZbrw1aBm2rZgR"}`, nil), 200, "3eZbrw1aBm2rZgR"},
		{"woocommerce answers its unsigned creation ping", post(t, target.url+"/hooks/woocommerce", "webhook_id=42"), 200, ""},
		{"woocommerce refuses any other unsigned form", post(t, target.url+"/hooks/woocommerce", "webhook_id=42&x=1"), 401, "missing_signature"},
		{"dropbox echoes its challenge", getReq(t, target.url+"/hooks/dropbox?challenge=ab12", nil), 200, "ab12"},
		{"dropbox refuses a GET that is not its challenge", getReq(t, target.url+"/hooks/dropbox", nil), 400, "not_a_handshake"},
		{"stripe has no GET", getReq(t, target.url+"/hooks/stripe", nil), 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, tc.req)
			if code != tc.status || !strings.Contains(body, tc.answerHas) {
				t.Fatalf("answer %d %q, want %d with %q", code, body, tc.status, tc.answerHas)
			}
		})
	}
	if got := target.stored(t); got != 0 {
		t.Fatalf("stored %d messages, want none", got)
	}
}

func getReq(t *testing.T, u string, h http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h != nil {
		req.Header = h
	}
	return req
}

// TestEveryPresetIsDeliveredByteExactThroughServe runs jethook as it
// ships (Serve: store, forwarder, ingress) with a route per preset, posts
// one signed webhook to each, and checks the backend got each body
// byte for byte.
func TestEveryPresetIsDeliveredByteExactThroughServe(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[string][]byte{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[strings.TrimPrefix(r.URL.Path, "/")] = b
		mu.Unlock()
	}))
	t.Cleanup(backend.Close)
	routes := presetRouteList()
	config := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(config, []byte(presetConfig(routes, backend.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Load(config)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveForTest(t, func(s *Settings) { s.Config = config })
	sent := map[string][]byte{}
	for _, pr := range routes {
		pr := pr.fill()
		req := signed(t, cfg, "http://"+addr, pr, pr.sign, time.Now())
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		sent[pr.name] = body
		if code, answer := do(t, req); code != http.StatusOK {
			t.Fatalf("%s: %d %s", pr.name, code, answer)
		}
	}
	testkit.Eventually(t, 20*time.Second, "every preset delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(sent)
	})
	mu.Lock()
	defer mu.Unlock()
	for name, body := range sent {
		if !bytes.Equal(got[name], body) {
			t.Errorf("%s: delivered %q, sent %q", name, got[name], body)
		}
	}
}

func post(t *testing.T, u, form string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}
