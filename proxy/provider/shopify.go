package provider

// Shopify headers.
// https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook
const (
	HeaderShopifyHmac       = "X-Shopify-Hmac-Sha256"
	HeaderShopifyWebhookID  = "X-Shopify-Webhook-Id"
	HeaderShopifyEventID    = "X-Shopify-Event-Id"
	HeaderShopifyTopic      = "X-Shopify-Topic"
	HeaderShopifyShopDomain = "X-Shopify-Shop-Domain"
	HeaderShopifyAPIVersion = "X-Shopify-API-Version"
)

// shopifyEventID is X-Shopify-Event-Id, the header Shopify's "Ignore
// duplicate webhooks" names: the same value across webhooks means a
// duplicate. It is joined with the topic, so that one event which triggers
// webhooks of two topics on the same route keeps both. Without it, the
// id is X-Shopify-Webhook-Id (unique per webhook, kept across retries).
// https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates
func shopifyEventID(r *Request) string {
	if id := r.Header.Get(HeaderShopifyEventID); id != "" {
		if topic := r.Header.Get(HeaderShopifyTopic); topic != "" {
			return topic + ":" + id
		}
		return id
	}
	return r.Header.Get(HeaderShopifyWebhookID)
}
