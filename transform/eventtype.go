package transform

import (
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/jethook/jethook/provider"
)

// typeHeaders names, by provider preset, the header that carries the
// event's type.
var typeHeaders = map[string]string{
	provider.NameGitHub:      "X-GitHub-Event",
	provider.NameGitLab:      "X-Gitlab-Event",
	provider.NameShopify:     "X-Shopify-Topic",
	provider.NameBitbucket:   "X-Event-Key",
	provider.NameWooCommerce: "X-WC-Webhook-Topic",
	provider.NameTwitch:      "Twitch-Eventsub-Subscription-Type",
}

// EventType is the type of an event a route with provider preset provider
// received: the provider's event header (GitHub's X-GitHub-Event,
// Shopify's X-Shopify-Topic…), or else a string `type` at the top of a
// JSON body (Stripe, Standard Webhooks); "" when there is neither. The
// route's provider verified the request before it was stored.
func EventType(provider string, h http.Header, body []byte) string {
	if name, ok := typeHeaders[provider]; ok {
		return h.Get(name)
	}
	if r := gjson.GetBytes(body, "type"); r.Type == gjson.String {
		return r.String()
	}
	return ""
}
