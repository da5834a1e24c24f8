package provider_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

// epoch is the fixed "now" of tests that do not use a published vector.
var epoch = time.Unix(1700000000, 0)

func fixed(t time.Time) func() time.Time { return func() time.Time { return t } }

// reason returns the Reason of a verification error, "" for nil, and fails
// the test when err is not an *provider.Error.
func reason(t testing.TB, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var e *provider.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
	}
	return e.Reason
}

// req is a POST of body with headers h to /.
func req(h http.Header, body []byte) *provider.Request {
	return &provider.Request{Method: http.MethodPost, URL: &url.URL{Path: "/"}, Header: h, Body: body}
}

func mustNew(t testing.TB, c provider.Config) provider.Provider {
	t.Helper()
	p, err := provider.New(c)
	if err != nil {
		t.Fatalf("New(%s): %v", c.Name, err)
	}
	return p
}

// preset describes a signed scheme for the checks every preset must pass.
type preset struct {
	cfg       provider.Config // Secrets[0] signs; Now is set to epoch
	wrong     string          // a well-formed secret that is not in cfg.Secrets
	sigHeader string          // the header whose absence means missing_signature
}

// checkPreset runs the checks every signing preset must pass: a signed
// request verifies; a one-byte body change, a wrong secret and a missing
// signature header are rejected with the right reason; either of two secrets
// verifies (rotation); Sign→Verify round-trips.
func checkPreset(t *testing.T, ps preset) {
	t.Helper()
	ps.cfg.Now = fixed(epoch)
	body := []byte(`{"id":"evt_1","event_id":"Ev1","hello":"world"}`)
	p := mustNew(t, ps.cfg)
	sign := func(secret string) http.Header {
		h := http.Header{}
		if err := p.Sign(req(h, body), secret, epoch); err != nil {
			t.Fatalf("Sign: %v", err)
		}
		return h
	}

	t.Run("a signed request verifies", func(t *testing.T) {
		t.Parallel()
		if err := p.Verify(req(sign(ps.cfg.Secrets[0]), body)); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("a one-byte body change is a bad signature", func(t *testing.T) {
		t.Parallel()
		h := sign(ps.cfg.Secrets[0])
		for i := range body {
			changed := append([]byte(nil), body...)
			changed[i] ^= 0x01
			if got := reason(t, p.Verify(req(h, changed))); got != provider.ReasonBadSignature {
				t.Fatalf("byte %d flipped: reason %q, want %q", i, got, provider.ReasonBadSignature)
			}
		}
		if got := reason(t, p.Verify(req(h, append(body, ' ')))); got != provider.ReasonBadSignature {
			t.Fatalf("byte appended: reason %q", got)
		}
		if got := reason(t, p.Verify(req(h, body[:len(body)-1]))); got != provider.ReasonBadSignature {
			t.Fatalf("byte removed: reason %q", got)
		}
	})
	t.Run("a wrong secret is a bad signature", func(t *testing.T) {
		t.Parallel()
		if got := reason(t, p.Verify(req(sign(ps.wrong), body))); got != provider.ReasonBadSignature {
			t.Fatalf("reason %q, want %q", got, provider.ReasonBadSignature)
		}
	})
	t.Run("a missing signature header is reported", func(t *testing.T) {
		t.Parallel()
		h := sign(ps.cfg.Secrets[0])
		h.Del(ps.sigHeader)
		if got := reason(t, p.Verify(req(h, body))); got != provider.ReasonMissingSignature {
			t.Fatalf("reason %q, want %q", got, provider.ReasonMissingSignature)
		}
		if got := reason(t, p.Verify(req(http.Header{}, body))); got != provider.ReasonMissingSignature {
			t.Fatalf("empty header: reason %q, want %q", got, provider.ReasonMissingSignature)
		}
	})
	t.Run("either of two secrets verifies", func(t *testing.T) {
		t.Parallel()
		c := ps.cfg
		c.Secrets = []string{ps.wrong, ps.cfg.Secrets[0]}
		rotated := mustNew(t, c)
		for _, s := range c.Secrets {
			if err := rotated.Verify(req(sign(s), body)); err != nil {
				t.Errorf("signed with secret %d of 2: %v", indexOf(c.Secrets, s)+1, err)
			}
		}
	})
	t.Run("Sign keeps an existing event id and Verify accepts it", func(t *testing.T) {
		t.Parallel()
		h := sign(ps.cfg.Secrets[0])
		id := p.EventID(req(h, body))
		if err := p.Sign(req(h, body), ps.cfg.Secrets[0], epoch); err != nil {
			t.Fatal(err)
		}
		if got := p.EventID(req(h, body)); got != id {
			t.Fatalf("EventID after re-Sign = %q, want %q", got, id)
		}
		if err := p.Verify(req(h, body)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the error message holds no secret or body", func(t *testing.T) {
		t.Parallel()
		err := p.Verify(req(sign(ps.wrong), body))
		msg := err.Error()
		for _, s := range append([]string{ps.wrong, string(body)}, ps.cfg.Secrets...) {
			if strings.Contains(msg, s) {
				t.Fatalf("error %q leaks %q", msg, s)
			}
		}
	})
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// checkStale asserts a correctly signed request outside the tolerance, in
// either direction, is stale, and one at its edge verifies.
func checkStale(t *testing.T, c provider.Config) {
	t.Helper()
	tol := c.Tolerance
	if tol == 0 {
		tol = provider.DefaultTolerance
	}
	body := []byte(`{"id":"evt_1"}`)
	for _, tc := range []struct {
		name   string
		signed time.Time
		want   string
	}{
		{"signed at the tolerance's past edge verifies", epoch.Add(-tol), ""},
		{"signed at the tolerance's future edge verifies", epoch.Add(tol), ""},
		{"signed a second too long ago is stale", epoch.Add(-tol - time.Second), provider.ReasonStaleTimestamp},
		{"signed a second too far ahead is stale", epoch.Add(tol + time.Second), provider.ReasonStaleTimestamp},
		{"signed a day ago is stale", epoch.Add(-24 * time.Hour), provider.ReasonStaleTimestamp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := c
			c.Now = fixed(epoch)
			p := mustNew(t, c)
			h := http.Header{}
			if err := p.Sign(req(h, body), c.Secrets[0], tc.signed); err != nil {
				t.Fatal(err)
			}
			if got := reason(t, p.Verify(req(h, body))); got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cfg     provider.Config
		wantErr bool
	}{
		{"the zero config is none", provider.Config{}, false},
		{"none needs no secret", provider.Config{Name: "none"}, false},
		{"an unknown name fails", provider.Config{Name: "gitlub", Secrets: []string{"s"}}, true},
		{"names are exact", provider.Config{Name: "GitHub", Secrets: []string{"s"}}, true},
		{"github without secrets fails", provider.Config{Name: "github"}, true},
		{"an empty secret fails", provider.Config{Name: "stripe", Secrets: []string{"a", ""}}, true},
		{"a negative tolerance fails", provider.Config{Name: "slack", Secrets: []string{"s"}, Tolerance: -time.Second}, true},
		{"standard-webhooks with a whsec_ secret", provider.Config{Name: "standard-webhooks", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, false},
		{"standard-webhooks with a raw base64 secret", provider.Config{Name: "standard-webhooks", Secrets: []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, false},
		{"standard-webhooks with a bad whsec_ secret fails", provider.Config{Name: "standard-webhooks", Secrets: []string{"whsec_not base64!"}}, true},
		{"standard-webhooks with an empty key fails", provider.Config{Name: "standard-webhooks", Secrets: []string{"whsec_"}}, true},
		{"hmac without a header fails", provider.Config{Name: "hmac", Secrets: []string{"s"}}, true},
		{"hmac with a bad header name fails", provider.Config{Name: "hmac", Secrets: []string{"s"}, HMAC: provider.HMAC{Header: "X Sig"}}, true},
		{"hmac with a bad id header fails", provider.Config{Name: "hmac", Secrets: []string{"s"}, HMAC: provider.HMAC{Header: "X-Sig", IDHeader: "X:Id"}}, true},
		{"hmac with an unknown algorithm fails", provider.Config{Name: "hmac", Secrets: []string{"s"}, HMAC: provider.HMAC{Header: "X-Sig", Algorithm: "md5"}}, true},
		{"hmac with an unknown encoding fails", provider.Config{Name: "hmac", Secrets: []string{"s"}, HMAC: provider.HMAC{Header: "X-Sig", Encoding: "base32"}}, true},
		{"hmac with defaults", provider.Config{Name: "hmac", Secrets: []string{"s"}, HMAC: provider.HMAC{Header: "X-Sig"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := provider.New(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New: err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestNewErrorsNeverHoldSecrets(t *testing.T) {
	t.Parallel()
	secret := "whsec_s3cr3t!!"
	_, err := provider.New(provider.Config{Name: "standard-webhooks", Secrets: []string{secret}})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("New error = %v, want one that does not name the secret", err)
	}
}

func TestErrorIsUsableWithErrorsAs(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "github", Secrets: []string{"s"}})
	err := p.Verify(req(http.Header{}, nil))
	var e *provider.Error
	if !errors.As(err, &e) || e.Reason != provider.ReasonMissingSignature {
		t.Fatalf("errors.As(%v) = %v, %+v", err, errors.As(err, &e), e)
	}
	if err.Error() == "" || !strings.Contains(err.Error(), provider.ReasonMissingSignature) {
		t.Fatalf("Error() = %q, want it to name the reason", err.Error())
	}
}

func TestHandshakeIsOnlyForSlack(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"url_verification","challenge":"abc"}`)
	for _, c := range []provider.Config{
		{Name: "none"},
		{Name: "github", Secrets: []string{"s"}},
		{Name: "shopify", Secrets: []string{"s"}},
		{Name: "stripe", Secrets: []string{"s"}},
		{Name: "standard-webhooks", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{Name: "hmac", Secrets: []string{"s"}, HMAC: provider.HMAC{Header: "X-Sig"}},
	} {
		if _, _, _, ok := mustNew(t, c).Handshake(req(http.Header{}, body)); ok {
			t.Errorf("%s answered a handshake", c.Name)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func errorsAs(err error, e **provider.Error) bool { return errors.As(err, e) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestConfigErrorsNameTheSettingAtFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cfg    provider.Config
		key    string
		secret int
	}{
		{"an unknown name", provider.Config{Name: "gogs", Secrets: []string{"s"}}, "name", 0},
		{"the second secret of svix", provider.Config{Name: "svix", Secrets: []string{swKey, "not base64!"}}, "secret", 2},
		{"a sendgrid key", provider.Config{Name: "sendgrid", Secrets: []string{"bm90IGEga2V5"}}, "secret", 1},
		{"twilio without public_url", provider.Config{Name: "twilio", Secrets: []string{"s"}}, "public_url", 0},
		{"meta without verify_token", provider.Config{Name: "meta", Secrets: []string{"s"}}, "verify_token", 0},
		{"a signature scheme without a header", provider.Config{Name: "signature", Secrets: []string{"s"}}, "scheme", 0},
		{"a negative tolerance", provider.Config{Name: "github", Secrets: []string{"s"}, Tolerance: -1}, "tolerance", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := provider.New(tc.cfg)
			ce, ok := errors.AsType[*provider.ConfigError](err)
			if !ok || ce.Key != tc.key || ce.Secret != tc.secret {
				t.Fatalf("New: %v (%+v), want key %s secret %d", err, ce, tc.key, tc.secret)
			}
		})
	}
}
