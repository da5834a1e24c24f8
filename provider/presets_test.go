package provider_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

// presetCase is one preset with what the checks every preset passes need.
type presetCase struct {
	cfg provider.Config // Secrets[0] verifies; Name is the preset
	// sign and wrong sign; "" means cfg.Secrets[0] and "wrong-secret".
	sign, wrong string
	// sigHeader is the header whose absence is missing_signature ("" when
	// the signature is in the body).
	sigHeader string
	// body is the payload; "" means a JSON object.
	body string
	// bodyUnsigned: the scheme does not cover the body (a token, or
	// Mailgun's signature of timestamp and token).
	bodyUnsigned bool
	// contentType of the request, default JSON.
	contentType string
}

// sendgridKeys returns a fresh P-256 key pair as SendGrid shows them: the
// base64 DER public key (the route's secret) and the base64 PKCS #8
// private key (what signs).
func sendgridKeys(t testing.TB) (public, private string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv)
}

const swKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// presetCases covers every preset but none, hmac and signature (which
// have tests of their own).
func presetCases(t testing.TB) []presetCase {
	pub, priv := sendgridKeys(t)
	_, otherPriv := sendgridKeys(t)
	cfg := func(name string) provider.Config {
		return provider.Config{Name: name, Secrets: []string{"s3cret-" + name}}
	}
	withURL := func(name string) provider.Config {
		c := cfg(name)
		c.PublicURL = "https://hooks.example.com/" + name
		return c
	}
	meta := cfg("meta")
	meta.VerifyToken = "verify-me"
	return []presetCase{
		{cfg: cfg("bitbucket"), sigHeader: "X-Hub-Signature"},
		{cfg: cfg("calendly"), sigHeader: "Calendly-Webhook-Signature"},
		{cfg: cfg("docusign"), sigHeader: "X-DocuSign-Signature-1"},
		{cfg: cfg("dropbox"), sigHeader: "X-Dropbox-Signature"},
		{cfg: cfg("forgejo"), sigHeader: "X-Forgejo-Signature"},
		{cfg: cfg("gitea"), sigHeader: "X-Gitea-Signature"},
		{cfg: cfg("github"), sigHeader: "X-Hub-Signature-256"},
		{cfg: cfg("gitlab"), sigHeader: "X-Gitlab-Token", bodyUnsigned: true},
		{cfg: withURL("hubspot"), sigHeader: "X-HubSpot-Signature-v3"},
		{cfg: cfg("intercom"), sigHeader: "X-Hub-Signature"},
		{cfg: cfg("lemonsqueezy"), sigHeader: "X-Signature"},
		{cfg: cfg("linear"), sigHeader: "Linear-Signature"},
		{cfg: cfg("mailgun"), bodyUnsigned: true},
		{cfg: meta, sigHeader: "X-Hub-Signature-256"},
		{cfg: cfg("mux"), sigHeader: "Mux-Signature"},
		{cfg: cfg("okta"), sigHeader: "Authorization", bodyUnsigned: true},
		{cfg: cfg("paddle"), sigHeader: "Paddle-Signature"},
		{cfg: cfg("pagerduty"), sigHeader: "X-PagerDuty-Signature"},
		{cfg: cfg("postmark"), sigHeader: "Authorization", bodyUnsigned: true},
		{cfg: provider.Config{Name: "sendgrid", Secrets: []string{pub}}, sign: priv, wrong: otherPriv, sigHeader: provider.HeaderSendGridSignature},
		{cfg: cfg("razorpay"), sigHeader: "X-Razorpay-Signature"},
		{cfg: cfg("sentry"), sigHeader: "Sentry-Hook-Signature"},
		{cfg: cfg("shopify"), sigHeader: "X-Shopify-Hmac-Sha256"},
		{cfg: cfg("slack"), sigHeader: "X-Slack-Signature"},
		{cfg: withURL("square"), sigHeader: "x-square-hmacsha256-signature"},
		{cfg: provider.Config{Name: "standard-webhooks", Secrets: []string{swKey}}, wrong: "whsec_d3Jvbmcga2V5", sigHeader: "webhook-signature"},
		{cfg: cfg("stripe"), sigHeader: "Stripe-Signature"},
		{cfg: provider.Config{Name: "svix", Secrets: []string{swKey}}, wrong: "whsec_d3Jvbmcga2V5", sigHeader: "svix-signature"},
		{cfg: withURL("twilio"), sigHeader: "X-Twilio-Signature", body: "CallSid=CA123&From=%2B14158675309&To=%2B18005551212", contentType: "application/x-www-form-urlencoded"},
		{cfg: cfg("twitch"), sigHeader: "Twitch-Eventsub-Message-Signature"},
		{cfg: cfg("typeform"), sigHeader: "Typeform-Signature"},
		{cfg: cfg("vercel"), sigHeader: "x-vercel-signature"},
		{cfg: cfg("woocommerce"), sigHeader: "X-WC-Webhook-Signature"},
		{cfg: cfg("zoom"), sigHeader: "x-zm-signature"},
	}
}

func TestEveryPresetHasACase(t *testing.T) {
	t.Parallel()
	have := map[string]bool{"none": true, "hmac": true, "signature": true}
	for _, c := range presetCases(t) {
		have[c.cfg.Name] = true
	}
	for _, name := range provider.Names() {
		if !have[name] {
			t.Errorf("preset %s has no case in presetCases", name)
		}
	}
	if n := len(provider.Names()); n < 25 {
		t.Errorf("%d presets, want at least 25", n)
	}
}

// signedRequest signs body for c at `at` and returns the request.
func (c presetCase) signedRequest(t testing.TB, p provider.Provider, secret string, at time.Time) *provider.Request {
	t.Helper()
	body := c.body
	if body == "" {
		body = `{"id":"evt_1","event_id":"ev_1","eventId":"okta-1","event":{"id":"pd-1"},"event-data":{"id":"mg-1"},"hello":"world"}`
	}
	ct := c.contentType
	if ct == "" {
		ct = "application/json"
	}
	r := &provider.Request{Method: http.MethodPost, URL: &url.URL{Path: "/hooks", RawQuery: "a=1"}, Header: http.Header{"Content-Type": {ct}}, Body: []byte(body)}
	if err := p.Sign(r, secret, at); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return r
}

// clone copies r, so a subtest may change it.
func clone(r *provider.Request) *provider.Request {
	c := *r
	c.Header = r.Header.Clone()
	c.Body = append([]byte(nil), r.Body...)
	u := *r.URL
	c.URL = &u
	return &c
}

// unauthorized asserts err is a verification failure answered 401.
func unauthorized(t *testing.T, what string, err error) string {
	t.Helper()
	r := reason(t, err)
	if r == "" {
		t.Fatalf("%s: verified", what)
	}
	var e *provider.Error
	if errorsAs(err, &e); e.Status != 0 && e.Status != http.StatusUnauthorized {
		t.Fatalf("%s: status %d, want 401", what, e.Status)
	}
	return r
}

func TestEveryPreset(t *testing.T) {
	t.Parallel()
	for _, c := range presetCases(t) {
		t.Run(c.cfg.Name, func(t *testing.T) {
			t.Parallel()
			info, ok := provider.Lookup(c.cfg.Name)
			if !ok {
				t.Fatalf("Lookup(%s) found nothing", c.cfg.Name)
			}
			sign, wrong := c.sign, c.wrong
			if sign == "" {
				sign = c.cfg.Secrets[0]
			}
			if wrong == "" {
				wrong = "wrong-secret"
			}
			cfg := c.cfg
			cfg.Now = fixed(epoch)
			p := mustNew(t, cfg)
			good := c.signedRequest(t, p, sign, epoch)

			t.Run("a signed request verifies and has the documented id", func(t *testing.T) {
				if err := p.Verify(clone(good)); err != nil {
					t.Fatalf("Verify: %v", err)
				}
				id := p.EventID(clone(good))
				if (id != "") != (info.ID != "") {
					t.Fatalf("EventID = %q, but Info.ID is %q", id, info.ID)
				}
				if _, _, _, ok := p.Handshake(clone(good)); ok {
					t.Fatal("an ordinary event was answered as a handshake")
				}
			})
			t.Run("a one-byte change of the body is refused", func(t *testing.T) {
				if c.bodyUnsigned {
					t.Skip("the scheme does not sign the body")
				}
				for i := range good.Body {
					r := clone(good)
					r.Body[i] ^= 0x01
					unauthorized(t, "byte "+itoa(i)+" flipped", p.Verify(r))
				}
				r := clone(good)
				r.Body = append(r.Body, ' ')
				unauthorized(t, "a byte appended", p.Verify(r))
			})
			t.Run("a one-byte change of the signature is refused", func(t *testing.T) {
				if c.sigHeader == "" {
					t.Skip("the signature is in the body")
				}
				v := good.Header.Get(c.sigHeader)
				for _, i := range []int{0, len(v) / 2, len(v) - 2} {
					r := clone(good)
					b := []byte(v)
					b[i] ^= 0x01
					r.Header.Set(c.sigHeader, string(b))
					unauthorized(t, "signature byte "+itoa(i)+" flipped", p.Verify(r))
				}
			})
			t.Run("a wrong secret is refused", func(t *testing.T) {
				r := c.signedRequest(t, p, wrong, epoch)
				if got := unauthorized(t, "wrong secret", p.Verify(r)); got != provider.ReasonBadSignature {
					t.Fatalf("reason %q, want %q", got, provider.ReasonBadSignature)
				}
			})
			t.Run("a missing signature is refused", func(t *testing.T) {
				r := clone(good)
				if c.sigHeader != "" {
					r.Header.Del(c.sigHeader)
				} else {
					r.Body = []byte(`{"event-data":{"id":"mg-1"}}`)
				}
				if got := unauthorized(t, "no signature", p.Verify(r)); got != provider.ReasonMissingSignature {
					t.Fatalf("reason %q, want %q", got, provider.ReasonMissingSignature)
				}
			})
			t.Run("a stale or early timestamp is refused, one at the edge verifies", func(t *testing.T) {
				if info.Tolerance == 0 {
					t.Skip("the scheme signs no timestamp")
				}
				if err := p.Verify(c.signedRequest(t, p, sign, epoch.Add(-info.Tolerance))); err != nil {
					t.Fatalf("at the past edge: %v", err)
				}
				for _, at := range []time.Time{epoch.Add(-info.Tolerance - time.Second), epoch.Add(info.Tolerance + time.Second), epoch.Add(-24 * time.Hour)} {
					r := c.signedRequest(t, p, sign, at)
					if got := unauthorized(t, "stale", p.Verify(r)); got != provider.ReasonStaleTimestamp {
						t.Fatalf("signed %v from now: reason %q, want %q", at.Sub(epoch), got, provider.ReasonStaleTimestamp)
					}
				}
			})
			t.Run("either of two secrets verifies", func(t *testing.T) {
				if c.cfg.Name == "sendgrid" {
					t.Skip("rotation is tested with key pairs in TestSendGridRotation")
				}
				rc := cfg
				rc.Secrets = []string{wrong, c.cfg.Secrets[0]}
				rotated := mustNew(t, rc)
				for _, s := range rc.Secrets {
					if err := rotated.Verify(c.signedRequest(t, rotated, s, epoch)); err != nil {
						t.Errorf("signed with %s: %v", map[bool]string{true: "the first", false: "the second"}[s == wrong], err)
					}
				}
			})
			t.Run("errors name neither a secret nor the body", func(t *testing.T) {
				err := p.Verify(c.signedRequest(t, p, wrong, epoch))
				for _, s := range []string{wrong, sign, string(good.Body)} {
					if strings.Contains(err.Error(), s) {
						t.Fatalf("error %q leaks a secret or the body", err)
					}
				}
			})
		})
	}
}
