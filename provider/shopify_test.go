package provider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/jethook/jethook/provider"
)

func TestShopify(t *testing.T) {
	t.Parallel()
	checkPreset(t, preset{
		cfg:       provider.Config{Name: "shopify", Secrets: []string{"shpss_0123456789abcdef"}},
		wrong:     "shpss_fedcba9876543210",
		sigHeader: "X-Shopify-Hmac-Sha256",
	})
}

func TestShopifyMatchesAnIndependentHMAC(t *testing.T) {
	t.Parallel()
	const secret = "hush"
	body := []byte(`{"id":820982911946154508,"email":"jon@example.com"}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	sig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	p := mustNew(t, provider.Config{Name: "shopify", Secrets: []string{secret}})
	if err := p.Verify(req(http.Header{"X-Shopify-Hmac-Sha256": {sig}}, body)); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := p.Sign(req(h, body), secret, epoch); err != nil {
		t.Fatal(err)
	}
	if got := h.Get("X-Shopify-Hmac-Sha256"); got != sig {
		t.Fatalf("Sign = %q, want %q", got, sig)
	}
}

func TestShopifyEventID(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "shopify", Secrets: []string{"s"}})
	for _, tc := range []struct {
		name string
		h    http.Header
		want string
	}{
		{"the event id wins, with the topic", http.Header{"X-Shopify-Webhook-Id": {"w1"}, "X-Shopify-Event-Id": {"e1"}, "X-Shopify-Topic": {"orders/create"}}, "orders/create:e1"},
		{"the event id alone without a topic", http.Header{"X-Shopify-Webhook-Id": {"w1"}, "X-Shopify-Event-Id": {"e1"}}, "e1"},
		{"the webhook id is the fallback", http.Header{"X-Shopify-Webhook-Id": {"w1"}}, "w1"},
		{"no header means no id", http.Header{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.EventID(req(tc.h, nil)); got != tc.want {
				t.Fatalf("EventID = %q, want %q", got, tc.want)
			}
		})
	}
	h := http.Header{}
	if err := p.Sign(req(h, nil), "s", epoch); err != nil {
		t.Fatal(err)
	}
	if h.Get("X-Shopify-Webhook-Id") == "" {
		t.Fatal("Sign set no X-Shopify-Webhook-Id")
	}
}

func FuzzShopifyHeader(f *testing.F) {
	const secret = "hush"
	body := []byte(`{"id":1}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	want := base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range []string{want, "", want[:len(want)-1], want + "=", " " + want, base64.RawStdEncoding.EncodeToString(m.Sum(nil)), base64.URLEncoding.EncodeToString(m.Sum(nil))} {
		f.Add(s)
	}
	p := mustNew(f, provider.Config{Name: "shopify", Secrets: []string{secret}})
	f.Fuzz(func(t *testing.T, sig string) {
		err := p.Verify(req(http.Header{"X-Shopify-Hmac-Sha256": {sig}}, body))
		if err == nil && sig != want {
			t.Fatalf("accepted %q, the correct signature is %q", sig, want)
		}
		reason(t, err)
	})
}

// TestShopifyNewerHeaderNames uses the vector of @shopify/shopify-api's
// webhook validation tests (lib/webhooks/__tests__/validate.test.ts): its
// test secret, body and HMAC, under the header names of Shopify's events
// webhooks, without "X-", which that SDK accepts beside the older ones.
func TestShopifyNewerHeaderNames(t *testing.T) {
	t.Parallel()
	const (
		secret = "test_secret_key"
		body   = `{"foo": "bar"}`
		sig    = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g="
	)
	p := mustNew(t, provider.Config{Name: "shopify", Secrets: []string{secret}})
	for _, tc := range []struct {
		name string
		h    http.Header
		id   string
	}{
		{"the older names", http.Header{
			"X-Shopify-Hmac-Sha256": {sig}, "X-Shopify-Topic": {"products/create"}, "X-Shopify-Webhook-Id": {"123456789"},
		}, "123456789"},
		{"only the newer names", http.Header{
			"Shopify-Hmac-Sha256": {sig}, "Shopify-Topic": {"Product"}, "Shopify-Event-Id": {"event-123"},
		}, "Product:event-123"},
		{"the newer webhook id without an event id", http.Header{
			"Shopify-Hmac-Sha256": {sig}, "Shopify-Webhook-Id": {"123456789"},
		}, "123456789"},
		{"both, as the SDK's events tests send them", http.Header{
			"X-Shopify-Hmac-Sha256": {sig}, "X-Shopify-Topic": {"products/create"}, "X-Shopify-Webhook-Id": {"123456789"},
			"Shopify-Hmac-Sha256": {sig}, "Shopify-Topic": {"Product"}, "Shopify-Event-Id": {"event-123"},
		}, "products/create:event-123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.Verify(req(tc.h, []byte(body))); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got := p.EventID(req(tc.h, []byte(body))); got != tc.id {
				t.Fatalf("EventID = %q, want %q", got, tc.id)
			}
			changed := req(tc.h, []byte(`{"foo": "baz"}`))
			if got := reason(t, p.Verify(changed)); got != provider.ReasonBadSignature {
				t.Fatalf("a changed body: reason %q, want %q", got, provider.ReasonBadSignature)
			}
		})
	}
	t.Run("a wrong HMAC under the newer name is refused", func(t *testing.T) {
		h := http.Header{"Shopify-Hmac-Sha256": {"B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7h="}}
		if got := reason(t, p.Verify(req(h, []byte(body)))); got != provider.ReasonBadSignature {
			t.Fatalf("reason %q, want %q", got, provider.ReasonBadSignature)
		}
	})
	t.Run("two topics of one event stay apart under the newer names", func(t *testing.T) {
		a := req(http.Header{"Shopify-Hmac-Sha256": {sig}, "Shopify-Topic": {"Product"}}, []byte(body))
		b := req(http.Header{"Shopify-Hmac-Sha256": {sig}, "Shopify-Topic": {"Inventory"}}, []byte(body))
		if p.SignedDigest(a) == p.SignedDigest(b) {
			t.Fatal("one signed body under two topics has one digest")
		}
	})
}
