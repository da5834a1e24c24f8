package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"time"
)

// Shopify headers. Verify webhooks:
// https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook
const (
	HeaderShopifyHmac      = "X-Shopify-Hmac-Sha256"
	HeaderShopifyWebhookID = "X-Shopify-Webhook-Id"
	HeaderShopifyEventID   = "X-Shopify-Event-Id"
)

// shopify verifies X-Shopify-Hmac-Sha256: base64 HMAC-SHA256(secret, body).
// https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook
type shopify struct {
	noHandshake
	keys [][]byte
}

// Verify checks X-Shopify-Hmac-Sha256 against every secret.
func (p shopify) Verify(h http.Header, body []byte) error {
	sig := h.Get(HeaderShopifyHmac)
	if sig == "" {
		return fail(ReasonMissingSignature, HeaderShopifyHmac+" header is missing")
	}
	for _, k := range p.keys {
		want := base64.StdEncoding.EncodeToString(mac(sha256.New, k, body))
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return fail(ReasonBadSignature, "no secret matches")
}

// EventID returns X-Shopify-Webhook-Id (unique per webhook delivery), else
// X-Shopify-Event-Id (shared by the webhooks one event triggers).
// https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates
func (shopify) EventID(h http.Header, _ []byte) string {
	if id := h.Get(HeaderShopifyWebhookID); id != "" {
		return id
	}
	return h.Get(HeaderShopifyEventID)
}

// Sign sets X-Shopify-Hmac-Sha256, and X-Shopify-Webhook-Id when h lacks one.
func (shopify) Sign(h http.Header, body []byte, secret string, _ time.Time) error {
	if secret == "" {
		return errors.New("shopify: empty secret")
	}
	h.Set(HeaderShopifyHmac, base64.StdEncoding.EncodeToString(mac(sha256.New, []byte(secret), body)))
	setID(h, HeaderShopifyWebhookID)
	return nil
}
