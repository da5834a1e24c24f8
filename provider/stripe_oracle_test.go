package provider_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/jethook/jethook/provider"
)

// Stripe's own Go library is the oracle: it signs and we verify; we sign and
// it verifies. It reads the real clock, so these tests do too.

func TestStripeOracleSignsWeVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_oracle","object":"event","api_version":"2025-06-30.basil"}`)
	now := time.Now()
	p := mustNew(t, provider.Config{Name: "stripe", Secrets: []string{stripeSecret}})

	t.Run("a fresh signature verifies and yields the event id", func(t *testing.T) {
		t.Parallel()
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: now})
		h := http.Header{"Stripe-Signature": {sp.Header}}
		if err := p.Verify(req(h, body)); err != nil {
			t.Fatalf("Verify(%q): %v", sp.Header, err)
		}
		if got := p.EventID(req(h, body)); got != "evt_oracle" {
			t.Fatalf("EventID = %q", got)
		}
	})
	t.Run("a signature with another secret is bad", func(t *testing.T) {
		t.Parallel()
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_other", Timestamp: now})
		if got := reason(t, p.Verify(req(http.Header{"Stripe-Signature": {sp.Header}}, body))); got != provider.ReasonBadSignature {
			t.Fatalf("reason %q", got)
		}
	})
	t.Run("an old signature is stale", func(t *testing.T) {
		t.Parallel()
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: now.Add(-time.Hour)})
		if got := reason(t, p.Verify(req(http.Header{"Stripe-Signature": {sp.Header}}, body))); got != provider.ReasonStaleTimestamp {
			t.Fatalf("reason %q", got)
		}
	})
	t.Run("a v0 scheme alone is not accepted", func(t *testing.T) {
		t.Parallel()
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: now, Scheme: "v0"})
		if err := p.Verify(req(http.Header{"Stripe-Signature": {sp.Header}}, body)); err == nil {
			t.Fatal("accepted a v0-only header")
		}
	})
	t.Run("either rotated secret verifies", func(t *testing.T) {
		t.Parallel()
		rotated := mustNew(t, provider.Config{Name: "stripe", Secrets: []string{"whsec_old", stripeSecret}})
		for _, s := range []string{"whsec_old", stripeSecret} {
			sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: s, Timestamp: now})
			if err := rotated.Verify(req(http.Header{"Stripe-Signature": {sp.Header}}, body)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestStripeOracleVerifiesWhatWeSign(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_oracle","object":"event","api_version":"2025-06-30.basil"}`)
	p := mustNew(t, provider.Config{Name: "stripe", Secrets: []string{stripeSecret}})
	sign := func(at time.Time) string {
		h := http.Header{}
		if err := p.Sign(req(h, body), stripeSecret, at); err != nil {
			t.Fatal(err)
		}
		return h.Get("Stripe-Signature")
	}
	if err := webhook.ValidatePayloadWithTolerance(body, sign(time.Now()), stripeSecret, 5*time.Minute); err != nil {
		t.Fatalf("stripe-go rejected our signature: %v", err)
	}
	if _, err := webhook.ConstructEventWithOptions(body, sign(time.Now()), stripeSecret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true}); err != nil {
		t.Fatalf("stripe-go ConstructEvent rejected our signature: %v", err)
	}
	if err := webhook.ValidatePayloadWithTolerance(body, sign(time.Now()), "whsec_other", 5*time.Minute); err == nil {
		t.Fatal("stripe-go accepted our signature under another secret")
	}
	if err := webhook.ValidatePayloadWithTolerance(body, sign(time.Now().Add(-time.Hour)), stripeSecret, 5*time.Minute); err == nil {
		t.Fatal("stripe-go accepted our hour-old signature")
	}
}
