package provider_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/jethook/jethook/provider"
)

// gitlabRequest is what GitLab sends with a secret token and, when sign,
// a signing token: the token as it is, Idempotency-Key and webhook-id
// equal, and webhook-signature over id.timestamp.body with swSecret.
func gitlabRequest(token string, sign bool, body string) *provider.Request {
	const id = "5c8d5a8e-0f7a-4c1b-9e9a-2b1f0e0c2d3e"
	h := http.Header{}
	h.Set("X-Gitlab-Token", token)
	h.Set("X-Gitlab-Event", "Push Hook")
	h.Set("Idempotency-Key", id)
	h.Set("X-Gitlab-Event-UUID", "a1b2c3")
	if sign {
		ts := strconv.FormatInt(epoch.Unix(), 10)
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", swSig(id, ts, []byte(body)))
	}
	return req(h, []byte(body))
}

func TestGitLabSigningToken(t *testing.T) {
	t.Parallel()
	const body = `{"object_kind":"push","ref":"refs/heads/main"}`
	signing := provider.Config{Name: "gitlab", Secrets: []string{"tok"}, SigningSecret: swSecret, Now: fixed(epoch)}
	tokenOnly := provider.Config{Name: "gitlab", Secrets: []string{"tok"}, Now: fixed(epoch)}

	t.Run("the token alone verifies a route without a signing secret", func(t *testing.T) {
		p := mustNew(t, tokenOnly)
		if err := p.Verify(gitlabRequest("tok", false, body)); err != nil {
			t.Fatal(err)
		}
		if got := p.EventID(gitlabRequest("tok", false, body)); got != "5c8d5a8e-0f7a-4c1b-9e9a-2b1f0e0c2d3e" {
			t.Fatalf("EventID = %q, want the Idempotency-Key", got)
		}
	})
	t.Run("a token and a signature verify a route with a signing secret", func(t *testing.T) {
		if err := mustNew(t, signing).Verify(gitlabRequest("tok", true, body)); err != nil {
			t.Fatal(err)
		}
	})
	cases := []struct {
		name   string
		r      *provider.Request
		reason string
	}{
		{"the token alone is refused when a signing secret is set", gitlabRequest("tok", false, body), provider.ReasonMissingSignature},
		{"a changed body is refused", func() *provider.Request {
			r := gitlabRequest("tok", true, body)
			r.Body = []byte(`{"object_kind":"push","ref":"refs/heads/evil"}`)
			return r
		}(), provider.ReasonBadSignature},
		{"a wrong token is refused though the signature holds", gitlabRequest("other", true, body), provider.ReasonBadSignature},
		{"a signature under another id is refused", func() *provider.Request {
			r := gitlabRequest("tok", true, body)
			r.Header.Set("webhook-id", "another")
			return r
		}(), provider.ReasonBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := reason(t, mustNew(t, signing).Verify(c.r)); got != c.reason {
				t.Fatalf("reason %q, want %q", got, c.reason)
			}
		})
	}
	t.Run("a stale signature is refused", func(t *testing.T) {
		late := signing
		late.Now = fixed(epoch.Add(provider.DefaultTolerance + 1))
		if got := reason(t, mustNew(t, late).Verify(gitlabRequest("tok", true, body))); got != provider.ReasonStaleTimestamp {
			t.Fatalf("reason %q, want %q", got, provider.ReasonStaleTimestamp)
		}
	})
	t.Run("a replay under a new Idempotency-Key keeps the signed id", func(t *testing.T) {
		p := mustNew(t, signing)
		r := gitlabRequest("tok", true, body)
		r.Header.Set("Idempotency-Key", "fresh")
		if err := p.Verify(r); err != nil {
			t.Fatal(err)
		}
		if got := p.EventID(r); got != "5c8d5a8e-0f7a-4c1b-9e9a-2b1f0e0c2d3e" {
			t.Fatalf("EventID = %q, want the signed webhook-id", got)
		}
	})
	t.Run("Sign makes a request that verifies", func(t *testing.T) {
		p := mustNew(t, signing)
		r := req(http.Header{}, []byte(body))
		if err := p.Sign(r, "tok", epoch); err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(r); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSigningSecretConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  provider.Config
	}{
		{"a preset that signs with its secret takes none", provider.Config{Name: "github", Secrets: []string{"s"}, SigningSecret: swSecret}},
		{"a signing secret that is not base64 is refused", provider.Config{Name: "gitlab", Secrets: []string{"s"}, SigningSecret: "whsec_not base64!"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := provider.New(c.cfg)
			var ce *provider.ConfigError
			if !errors.As(err, &ce) || ce.Key != "signing_secret" {
				t.Fatalf("err = %v, want a ConfigError on signing_secret", err)
			}
		})
	}
}
