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

// Shopify's events webhooks name the same headers without "X-"; the
// @shopify/shopify-api SDK accepts both (ShopifyEventsHeader in its
// lib/types.ts), and so does the preset.
const (
	headerShopifyHmacNew      = "Shopify-Hmac-Sha256"
	headerShopifyWebhookIDNew = "Shopify-Webhook-Id"
	headerShopifyEventIDNew   = "Shopify-Event-Id"
	headerShopifyTopicNew     = "Shopify-Topic"
)

// shopifyEventID is X-Shopify-Event-Id, the header Shopify's "Ignore
// duplicate webhooks" names: the same value across webhooks means a
// duplicate. It is joined with the topic, so that one event which triggers
// webhooks of two topics on the same route keeps both. Without it, the
// id is X-Shopify-Webhook-Id (unique per webhook, kept across retries).
// Each header is read under its older name first, then its newer one.
// https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates
func shopifyEventID(r *Request) string {
	if id := firstHeader(r, HeaderShopifyEventID, headerShopifyEventIDNew); id != "" {
		if topic := firstHeader(r, HeaderShopifyTopic, headerShopifyTopicNew); topic != "" {
			return topic + ":" + id
		}
		return id
	}
	return firstHeader(r, HeaderShopifyWebhookID, headerShopifyWebhookIDNew)
}

// firstHeader returns the value of the first of names r carries.
func firstHeader(r *Request, names ...string) string {
	for _, n := range names {
		if v := r.Header.Get(n); v != "" {
			return v
		}
	}
	return ""
}
