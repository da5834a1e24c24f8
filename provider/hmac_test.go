package provider_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
	"testing"

	"github.com/jethook/jethook/provider"
)

func TestHMAC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  provider.HMAC
	}{
		{"with defaults", provider.HMAC{Header: "X-Signature"}},
		{"sha1 hex with a prefix", provider.HMAC{Header: "X-Hub-Signature", Algorithm: "sha1", Prefix: "sha1="}},
		{"sha512 base64 with an id header", provider.HMAC{Header: "X-Sig", Algorithm: "sha512", Encoding: "base64", IDHeader: "X-Event-Id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkPreset(t, preset{
				cfg:       provider.Config{Name: "hmac", Secrets: []string{"s3cret"}, HMAC: tc.cfg},
				wrong:     "s3cre7",
				sigHeader: tc.cfg.Header,
			})
		})
	}
}

// TestHMACMatchesAnIndependentHMAC checks every algorithm and encoding against
// crypto/hmac directly, in both directions.
func TestHMACMatchesAnIndependentHMAC(t *testing.T) {
	t.Parallel()
	const secret = "It's a Secret to Everybody"
	body := []byte("Hello, World!")
	for _, alg := range []struct {
		name string
		h    func() hash.Hash
	}{{"sha1", sha1.New}, {"sha256", sha256.New}, {"sha512", sha512.New}, {"SHA256", sha256.New}} {
		m := hmac.New(alg.h, []byte(secret))
		m.Write(body)
		sum := m.Sum(nil)
		for enc, sig := range map[string]string{"hex": hex.EncodeToString(sum), "base64": base64.StdEncoding.EncodeToString(sum)} {
			t.Run(alg.name+" "+enc, func(t *testing.T) {
				t.Parallel()
				cfg := provider.HMAC{Header: "X-Sig", Algorithm: alg.name, Encoding: enc, Prefix: alg.name + "="}
				p := mustNew(t, provider.Config{Name: "hmac", Secrets: []string{secret}, HMAC: cfg})
				if err := p.Verify(req(http.Header{"X-Sig": {alg.name + "=" + sig}}, body)); err != nil {
					t.Fatal(err)
				}
				h := http.Header{}
				if err := p.Sign(req(h, body), secret, epoch); err != nil {
					t.Fatal(err)
				}
				if got := h.Get("X-Sig"); got != alg.name+"="+sig {
					t.Fatalf("Sign = %q, want %q", got, alg.name+"="+sig)
				}
			})
		}
	}
}

func TestHMACPrefixAndEventID(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "hmac", Secrets: []string{"s"}, HMAC: provider.HMAC{Header: "X-Sig", Prefix: "sha256=", IDHeader: "X-Id"}})
	h := http.Header{}
	if err := p.Sign(req(h, nil), "s", epoch); err != nil {
		t.Fatal(err)
	}
	if id := p.EventID(req(h, nil)); id == "" {
		t.Fatal("Sign set no id in the IDHeader")
	}
	h.Set("X-Id", "evt-7")
	if got := p.EventID(req(h, nil)); got != "evt-7" {
		t.Fatalf("EventID = %q", got)
	}
	h.Set("X-Sig", strings.TrimPrefix(h.Get("X-Sig"), "sha256="))
	if got := reason(t, p.Verify(req(h, nil))); got != provider.ReasonMalformedSignature {
		t.Fatalf("without the prefix: reason %q", got)
	}
	q := mustNew(t, provider.Config{Name: "hmac", Secrets: []string{"s"}, HMAC: provider.HMAC{Header: "X-Sig"}})
	if got := q.EventID(req(http.Header{"X-Id": {"evt-7"}}, nil)); got != "" {
		t.Fatalf("EventID without IDHeader = %q", got)
	}
}

// FuzzHMACHeader checks that no signature header is accepted unless it is the
// prefix followed by the correct MAC (hex in either case, or exact base64).
func FuzzHMACHeader(f *testing.F) {
	const secret = "s3cret"
	body := []byte(`{"a":1}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	sum := m.Sum(nil)
	hexWant, b64Want := "sha256="+hex.EncodeToString(sum), "sha256="+base64.StdEncoding.EncodeToString(sum)
	for _, s := range []string{hexWant, b64Want, strings.ToUpper(hexWant), hexWant[7:], b64Want[7:], "sha256=", "", hexWant + " ", b64Want[:len(b64Want)-1]} {
		f.Add(s, false)
		f.Add(s, true)
	}
	newP := func(enc string) provider.Provider {
		return mustNew(f, provider.Config{Name: "hmac", Secrets: []string{secret}, HMAC: provider.HMAC{Header: "X-Sig", Encoding: enc, Prefix: "sha256="}})
	}
	hexP, b64P := newP("hex"), newP("base64")
	f.Fuzz(func(t *testing.T, sig string, useBase64 bool) {
		h := http.Header{"X-Sig": {sig}}
		if useBase64 {
			err := b64P.Verify(req(h, body))
			reason(t, err)
			if err == nil && sig != b64Want {
				t.Fatalf("base64: accepted %q, want %q", sig, b64Want)
			}
			return
		}
		err := hexP.Verify(req(h, body))
		reason(t, err)
		if err == nil && !strings.EqualFold(sig, hexWant) {
			t.Fatalf("hex: accepted %q, want %q", sig, hexWant)
		}
	})
}
