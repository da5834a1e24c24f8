package provider_test

import (
	"cmp"
	"net/http"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

// idHeaders are every header a preset takes an event id from.
var idHeaders = []string{
	"X-Request-UUID", "X-Request-Id", "X-Forgejo-Delivery", "X-GitHub-Delivery", "X-Gitea-Delivery",
	"Idempotency-Key", "X-Gitlab-Event-UUID", "Linear-Delivery", "X-Razorpay-Event-Id", "Request-ID",
	provider.HeaderShopifyEventID, provider.HeaderShopifyWebhookID, "webhook-id", "svix-id",
	"Twitch-Eventsub-Message-Id", "X-WC-Webhook-Delivery-ID", provider.HeaderTwilioIdempotency,
}

// A captured request sent again with a new id in a header the signature
// does not cover still verifies; its SignedDigest must then be what it
// was, so that it is a duplicate. Presets whose header holds the secret
// itself are left out: one captured request forges anything there.
func TestAReplayUnderANewIDKeepsItsSignedDigest(t *testing.T) {
	t.Parallel()
	token := map[string]bool{"gitlab": true, "okta": true, "postmark": true}
	declared := []presetCase{
		{cfg: provider.Config{Name: "hmac", Secrets: []string{"s3cret"}, HMAC: provider.HMAC{Header: "X-Signature", IDHeader: "X-Request-Id"}}},
		{cfg: provider.Config{Name: "signature", Secrets: []string{"s3cret"}, Scheme: provider.Scheme{
			Headers: []string{"X-Signature"}, TimestampHeader: "X-Timestamp", Signed: "{timestamp}.{body}", IDHeaders: []string{"X-Request-Id"}}}},
	}
	for _, c := range append(presetCases(t), declared...) {
		if token[c.cfg.Name] {
			continue
		}
		t.Run(c.cfg.Name, func(t *testing.T) {
			t.Parallel()
			p := mustNew(t, c.cfg)
			orig := c.signedRequest(t, p, cmp.Or(c.sign, c.cfg.Secrets[0]), time.Now())
			if err := p.Verify(orig); err != nil {
				t.Fatalf("the signed request: %v", err)
			}
			id, want := p.EventID(orig), p.SignedDigest(orig)
			for _, h := range idHeaders {
				replay := clone(orig)
				replay.Header.Set(h, "replayed-"+h)
				if p.Verify(replay) != nil || p.EventID(replay) == id {
					continue // the id is signed, or not read from h
				}
				if got := p.SignedDigest(replay); got == "" || got != want {
					t.Errorf("%s changed: event id %q → %q, signed digest %q → %q; want the same, not empty", h, id, p.EventID(replay), want, got)
				}
			}
		})
	}
}

// A preset whose id the signature covers has no digest: its id already
// tells a replay from a new event.
func TestPresetsWithASignedIDHaveNoDigest(t *testing.T) {
	t.Parallel()
	for _, c := range presetCases(t) {
		switch c.cfg.Name {
		case "standard-webhooks", "svix", "twitch", "stripe", "mailgun":
		default:
			continue
		}
		p := mustNew(t, c.cfg)
		r := c.signedRequest(t, p, cmp.Or(c.sign, c.cfg.Secrets[0]), time.Now())
		if d := p.SignedDigest(r); d != "" {
			t.Errorf("%s: signed digest %q, want none", c.cfg.Name, d)
		}
	}
}

// Shopify sends one event under two topics as two webhooks with the same
// body; they stay two, while the same topic under a new id is a replay.
func TestShopifyTopicsKeepTheirOwnDigest(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "shopify", Secrets: []string{"s3cret"}})
	r := &provider.Request{Method: http.MethodPost, Header: http.Header{}, Body: []byte(`{"id":1}`)}
	if err := p.Sign(r, "s3cret", time.Now()); err != nil {
		t.Fatal(err)
	}
	r.Header.Set(provider.HeaderShopifyTopic, "orders/create")
	created := p.SignedDigest(r)
	r.Header.Set(provider.HeaderShopifyTopic, "orders/paid")
	if p.SignedDigest(r) == created {
		t.Error("two topics of one body share a digest")
	}
}
