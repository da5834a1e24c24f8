package provider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/jethook/jethook/provider"
)

func TestGitHub(t *testing.T) {
	t.Parallel()
	checkPreset(t, preset{
		cfg:       provider.Config{Name: "github", Secrets: []string{"It's a Secret to Everybody"}},
		wrong:     "It's a Secret to Nobody",
		sigHeader: "X-Hub-Signature-256",
	})
}

// TestGitHubVector is GitHub's published example.
// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries#testing-the-webhook-payload-validation
func TestGitHubVector(t *testing.T) {
	t.Parallel()
	const (
		secret = "It's a Secret to Everybody"
		body   = "Hello, World!"
		sig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	p := mustNew(t, provider.Config{Name: "github", Secrets: []string{secret}})
	t.Run("the published signature verifies", func(t *testing.T) {
		h := http.Header{"X-Hub-Signature-256": {sig}}
		if err := p.Verify(req(h, []byte(body))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("upper-case hex verifies too", func(t *testing.T) {
		h := http.Header{"X-Hub-Signature-256": {"sha256=" + strings.ToUpper(sig[len("sha256="):])}}
		if err := p.Verify(req(h, []byte(body))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Sign produces the published signature", func(t *testing.T) {
		h := http.Header{}
		if err := p.Sign(req(h, []byte(body)), secret, epoch); err != nil {
			t.Fatal(err)
		}
		if got := h.Get("X-Hub-Signature-256"); got != sig {
			t.Fatalf("signature %q, want %q", got, sig)
		}
	})
}

func TestGitHubRejectsMalformedSignatures(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "github", Secrets: []string{"s"}})
	for _, tc := range []struct{ sig, want string }{
		{"757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", provider.ReasonMalformedSignature},
		{"sha1=0123", provider.ReasonMalformedSignature},
		{"sha256=", provider.ReasonBadSignature},
		{"sha256=zz", provider.ReasonBadSignature},
	} {
		if got := reason(t, p.Verify(req(http.Header{"X-Hub-Signature-256": {tc.sig}}, nil))); got != tc.want {
			t.Errorf("signature %q: reason %q, want %q", tc.sig, got, tc.want)
		}
	}
}

func TestGitHubEventID(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "github", Secrets: []string{"s"}})
	h := http.Header{}
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	if got := p.EventID(req(h, nil)); got != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Fatalf("EventID = %q", got)
	}
	if got := p.EventID(req(http.Header{}, nil)); got != "" {
		t.Fatalf("EventID without header = %q", got)
	}
	signed := http.Header{}
	if err := p.Sign(req(signed, nil), "s", epoch); err != nil {
		t.Fatal(err)
	}
	if id := p.EventID(req(signed, nil)); len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Fatalf("Sign set delivery id %q, want a UUID", id)
	}
}

func FuzzGitHubHeader(f *testing.F) {
	const secret = "It's a Secret to Everybody"
	body := []byte("Hello, World!")
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	for _, s := range []string{want, strings.ToUpper(want), "", "sha256=", "sha256", want[:len(want)-1], want + "0", "sha1=" + want[7:], " " + want} {
		f.Add(s)
	}
	p := mustNew(f, provider.Config{Name: "github", Secrets: []string{secret}})
	f.Fuzz(func(t *testing.T, sig string) {
		err := p.Verify(req(http.Header{"X-Hub-Signature-256": {sig}}, body))
		if err == nil && !strings.EqualFold(sig, want) {
			t.Fatalf("accepted %q, the correct signature is %q", sig, want)
		}
		reason(t, err)
	})
}
