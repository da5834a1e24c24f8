package provider

import (
	"net/http"
	"strconv"
	"time"
)

// schemes are the presets that are data: a Scheme, and where needed a
// handshake or id rule (adjust). Each names the documentation it follows.
var schemes = []struct {
	info   Info
	scheme Scheme
	adjust func(*signed)
}{
	{Info{Name: NameBitbucket, Verifies: "X-Hub-Signature: sha256= hex HMAC-SHA256 of the body", ID: "X-Request-UUID header (Cloud), else X-Request-Id (Data Center)",
		Docs:   "https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/#Secure-webhooks",
		Sample: Sample{EventHeader: "X-Event-Key", Event: "repo:push"}},
		Scheme{Headers: []string{"X-Hub-Signature"}, Prefix: "sha256=", IDHeaders: []string{"X-Request-UUID", "X-Request-Id"}}, nil},
	{Info{Name: NameCalendly, Verifies: "Calendly-Webhook-Signature: t=…,v1=… hex HMAC-SHA256 of t.body", Tolerance: 3 * time.Minute,
		Docs: "https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures"},
		Scheme{Headers: []string{"Calendly-Webhook-Signature"}, Separator: ",", SignatureKey: "v1", TimestampKey: "t", Signed: "{timestamp}.{body}"}, nil},
	{Info{Name: NameDocuSign, Verifies: "X-DocuSign-Signature-1 (…-10): base64 HMAC-SHA256 of the body, one per Connect key",
		Docs: "https://developers.docusign.com/platform/webhooks/connect/hmac/"},
		Scheme{Headers: docusignHeaders(10), Encoding: "base64"}, nil},
	{Info{Name: NameDropbox, Verifies: "X-Dropbox-Signature: hex HMAC-SHA256 of the body with the app secret",
		Handshake: "GET ?challenge=…: the challenge, as text", Methods: []string{http.MethodGet, http.MethodPost},
		Docs: "https://www.dropbox.com/developers/reference/webhooks"},
		Scheme{Headers: []string{"X-Dropbox-Signature"}}, func(p *signed) { p.hs = dropboxChallenge }},
	{Info{Name: NameForgejo, Verifies: "X-Forgejo-Signature: hex HMAC-SHA256 of the body", ID: "X-Forgejo-Delivery header",
		Docs:   "https://forgejo.org/docs/latest/user/webhooks/",
		Sample: Sample{EventHeader: "X-Forgejo-Event", Event: "push"}},
		Scheme{Headers: []string{"X-Forgejo-Signature"}, IDHeaders: []string{"X-Forgejo-Delivery"}}, nil},
	{Info{Name: NameGitHub, Verifies: "X-Hub-Signature-256: sha256= hex HMAC-SHA256 of the body", ID: "X-GitHub-Delivery header",
		Docs:   "https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
		Sample: Sample{EventHeader: "X-GitHub-Event", Event: "ping"}},
		Scheme{Headers: []string{"X-Hub-Signature-256"}, Prefix: "sha256=", IDHeaders: []string{"X-GitHub-Delivery"}}, nil},
	{Info{Name: NameGitea, Verifies: "X-Gitea-Signature: hex HMAC-SHA256 of the body (Forgejo sends it too)", ID: "X-Gitea-Delivery header",
		Docs:   "https://docs.gitea.com/usage/webhooks",
		Sample: Sample{EventHeader: "X-Gitea-Event", Event: "push"}},
		Scheme{Headers: []string{"X-Gitea-Signature"}, IDHeaders: []string{"X-Gitea-Delivery"}}, nil},
	{Info{Name: NameHubSpot, Verifies: "X-HubSpot-Signature-v3: base64 HMAC-SHA256 of method + public_url + body + X-HubSpot-Request-Timestamp (ms)", PublicURL: true,
		Docs: "https://developers.hubspot.com/docs/apps/legacy-apps/authentication/validating-requests"},
		Scheme{Headers: []string{"X-HubSpot-Signature-v3"}, Encoding: "base64", TimestampHeader: "X-HubSpot-Request-Timestamp", TimestampFormat: formatUnixMs,
			Signed: "{method}{decoded_url}{body}{timestamp}"}, nil},
	{Info{Name: NameIntercom, Verifies: "X-Hub-Signature: sha1= hex HMAC-SHA1 of the body", ID: "body id (notif_…)",
		Docs: "https://developers.intercom.com/docs/references/webhooks/webhook-models#signed-notifications"},
		Scheme{Headers: []string{"X-Hub-Signature"}, Prefix: "sha1=", Algorithm: "sha1", IDJSON: "/id"}, nil},
	{Info{Name: NameLinear, Verifies: "Linear-Signature: hex HMAC-SHA256 of the body; body webhookTimestamp (ms) within tolerance", ID: "Linear-Delivery header", Tolerance: time.Minute,
		Docs: "https://linear.app/developers/webhooks#securing-webhooks"},
		Scheme{Headers: []string{"Linear-Signature"}, TimestampJSON: "/webhookTimestamp", TimestampFormat: formatUnixMs, IDHeaders: []string{"Linear-Delivery"}}, nil},
	{Info{Name: NameLemonSqueezy, Verifies: "X-Signature: hex HMAC-SHA256 of the body with the signing secret",
		Docs: "https://docs.lemonsqueezy.com/help/webhooks/signing-requests"},
		Scheme{Headers: []string{"X-Signature"}}, nil},
	{Info{Name: NameMailgun, Verifies: "body signature.signature: hex HMAC-SHA256 of signature.timestamp + signature.token", ID: "body signature.token (so a replayed signature is a duplicate)",
		Docs: "https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks"},
		Scheme{SignatureJSON: "/signature/signature", TimestampJSON: "/signature/timestamp", Signed: "{timestamp}{json:/signature/token}", IDJSON: "/signature/token"}, nil},
	{Info{Name: NameMeta, Verifies: "X-Hub-Signature-256: sha256= hex HMAC-SHA256 of the body with the app secret", Handshake: "GET hub.mode=subscribe: hub.challenge if hub.verify_token matches, else 403",
		Methods: []string{http.MethodGet, http.MethodPost}, VerifyToken: true,
		Docs: "https://developers.facebook.com/docs/graph-api/webhooks/getting-started"},
		Scheme{Headers: []string{"X-Hub-Signature-256"}, Prefix: "sha256="}, func(p *signed) { p.hs = metaHandshake }},
	{Info{Name: NameMux, Verifies: "Mux-Signature: t=…,v1=… hex HMAC-SHA256 of t.body", ID: "body id",
		Docs: "https://www.mux.com/docs/core/verify-webhook-signatures"},
		Scheme{Headers: []string{"Mux-Signature"}, Separator: ",", SignatureKey: "v1", TimestampKey: "t", Signed: "{timestamp}.{body}", IDJSON: "/id"}, nil},
	{Info{Name: NameOkta, Verifies: "Authorization header equals the secret", ID: "body eventId", Handshake: "GET with X-Okta-Verification-Challenge: {\"verification\": …}",
		Methods: []string{http.MethodGet, http.MethodPost},
		Docs:    "https://developer.okta.com/docs/concepts/event-hooks/"},
		Scheme{Headers: []string{"Authorization"}, Algorithm: "token", IDJSON: "/eventId"}, func(p *signed) { p.hs = oktaHandshake }},
	{Info{Name: NamePaddle, Verifies: "Paddle-Signature: ts=…;h1=… hex HMAC-SHA256 of ts:body", ID: "body event_id",
		Docs: "https://developer.paddle.com/webhooks/signature-verification"},
		Scheme{Headers: []string{"Paddle-Signature"}, Separator: ";", SignatureKey: "h1", TimestampKey: "ts", Signed: "{timestamp}:{body}", IDJSON: "/event_id"}, nil},
	{Info{Name: NamePagerDuty, Verifies: "X-PagerDuty-Signature: v1=… (one per secret) hex HMAC-SHA256 of the body", ID: "body event.id",
		Docs: "https://developer.pagerduty.com/docs/webhooks-overview#verifying-signatures"},
		Scheme{Headers: []string{"X-PagerDuty-Signature"}, Separator: ",", SignatureKey: "v1", IDJSON: "/event/id"}, nil},
	{Info{Name: NamePostmark, Verifies: "HTTP Basic authentication: the secret is user:password",
		Docs: "https://postmarkapp.com/developer/webhooks/webhooks-overview#protecting-your-webhook"},
		Scheme{Headers: []string{"Authorization"}, Prefix: "Basic ", Algorithm: "token", Encoding: "base64"}, nil},
	{Info{Name: NameRazorpay, Verifies: "X-Razorpay-Signature: hex HMAC-SHA256 of the body with the webhook secret", ID: "x-razorpay-event-id header",
		Docs: "https://razorpay.com/docs/webhooks/validate-test/"},
		Scheme{Headers: []string{"X-Razorpay-Signature"}, IDHeaders: []string{"X-Razorpay-Event-Id"}}, nil},
	{Info{Name: NameSentry, Verifies: "Sentry-Hook-Signature: hex HMAC-SHA256 of the body with the client secret", ID: "Request-ID header",
		Docs:   "https://docs.sentry.io/organization/integrations/integration-platform/webhooks/",
		Sample: Sample{EventHeader: "Sentry-Hook-Resource", Event: "issue"}},
		Scheme{Headers: []string{"Sentry-Hook-Signature"}, IDHeaders: []string{"Request-ID"}}, nil},
	{Info{Name: NameShopify, Verifies: "X-Shopify-Hmac-Sha256 (or Shopify-Hmac-Sha256): base64 HMAC-SHA256 of the body", ID: "X-Shopify-Event-Id with X-Shopify-Topic, else X-Shopify-Webhook-Id (each also without X-)",
		Docs: "https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook",
		Sample: Sample{EventHeader: HeaderShopifyTopic, Event: "orders/create", Headers: [][2]string{
			{HeaderShopifyShopDomain, "example.myshopify.com"},
			{HeaderShopifyAPIVersion, "2025-07"},
		}}},
		Scheme{Headers: []string{HeaderShopifyHmac, headerShopifyHmacNew}, Encoding: "base64", IDHeaders: []string{HeaderShopifyWebhookID, headerShopifyWebhookIDNew}},
		func(p *signed) {
			p.eventID, p.digestHeaders = shopifyEventID, []string{HeaderShopifyTopic, headerShopifyTopicNew}
		}},
	{Info{Name: NameSlack, Verifies: "X-Slack-Signature: v0= hex HMAC-SHA256 of v0:timestamp:body", ID: "body event_id (Events API)", Handshake: "url_verification: the challenge",
		Docs:   "https://docs.slack.dev/authentication/verifying-requests-from-slack",
		Sample: Sample{Form: true}},
		Scheme{Headers: []string{"X-Slack-Signature"}, Prefix: "v0=", TimestampHeader: "X-Slack-Request-Timestamp", Signed: "v0:{timestamp}:{body}", IDJSON: "/event_id"},
		func(p *signed) { p.hs = slackHandshake }},
	{Info{Name: NameSquare, Verifies: "x-square-hmacsha256-signature: base64 HMAC-SHA256 of public_url + body", ID: "body event_id", PublicURL: true,
		Docs: "https://developer.squareup.com/docs/webhooks/step3validate"},
		Scheme{Headers: []string{"x-square-hmacsha256-signature"}, Encoding: "base64", Signed: "{url}{body}", IDJSON: "/event_id"}, nil},
	{Info{Name: NameStandardWebhooks, Verifies: "webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>, key from whsec_<base64>", ID: "webhook-id header",
		Docs: "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md"},
		standardScheme("webhook-"), func(p *signed) { p.newID = NewMessageID }},
	{Info{Name: NameStripe, Verifies: "Stripe-Signature: t=…,v1=… hex HMAC-SHA256 of t.body", ID: "body id (evt_…)",
		Docs: "https://docs.stripe.com/webhooks#verify-manually"},
		Scheme{Headers: []string{"Stripe-Signature"}, Separator: ",", SignatureKey: "v1", TimestampKey: "t", Signed: "{timestamp}.{body}", IDJSON: "/id"}, nil},
	{Info{Name: NameSvix, Verifies: "svix-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>, key from whsec_<base64> (Clerk, Resend…)", ID: "svix-id header",
		Docs: "https://docs.svix.com/receiving/verifying-payloads/how-manual"},
		standardScheme("svix-"), func(p *signed) { p.newID = NewMessageID }},
	{Info{Name: NameTwitch, Verifies: "Twitch-Eventsub-Message-Signature: sha256= hex HMAC-SHA256 of id + timestamp + body", ID: "Twitch-Eventsub-Message-Id header",
		Handshake: "webhook_callback_verification: the challenge", Tolerance: 10 * time.Minute,
		Docs: "https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message",
		Sample: Sample{EventHeader: "Twitch-Eventsub-Message-Type", Event: "notification", Headers: [][2]string{
			{"Twitch-Eventsub-Subscription-Type", "channel.follow"},
			{"Twitch-Eventsub-Subscription-Version", "2"},
			{"Twitch-Eventsub-Message-Retry", "0"},
		}}},
		Scheme{Headers: []string{"Twitch-Eventsub-Message-Signature"}, Prefix: "sha256=", TimestampHeader: "Twitch-Eventsub-Message-Timestamp", TimestampFormat: formatRFC,
			IDHeaders: []string{"Twitch-Eventsub-Message-Id"}, Signed: "{id}{timestamp}{body}"}, func(p *signed) { p.hs = twitchHandshake }},
	{Info{Name: NameTypeform, Verifies: "Typeform-Signature: sha256= base64 HMAC-SHA256 of the body", ID: "body event_id",
		Docs: "https://www.typeform.com/developers/webhooks/secure-your-webhooks/"},
		Scheme{Headers: []string{"Typeform-Signature"}, Prefix: "sha256=", Encoding: "base64", IDJSON: "/event_id"}, nil},
	{Info{Name: NameVercel, Verifies: "x-vercel-signature: hex HMAC-SHA1 of the body", ID: "body id",
		Docs: "https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks"},
		Scheme{Headers: []string{"x-vercel-signature"}, Algorithm: "sha1", IDJSON: "/id"}, nil},
	{Info{Name: NameWooCommerce, Verifies: "X-WC-Webhook-Signature: base64 HMAC-SHA256 of the body", ID: "X-WC-Webhook-Delivery-ID header",
		Handshake: "the unsigned webhook_id=<id> ping on creation: 200, not stored",
		Docs:      "https://woocommerce.com/document/webhooks/",
		Sample:    Sample{EventHeader: "X-WC-Webhook-Topic", Event: "order.created"}},
		Scheme{Headers: []string{"X-WC-Webhook-Signature"}, Encoding: "base64", IDHeaders: []string{"X-WC-Webhook-Delivery-ID"}}, func(p *signed) { p.hs = woocommercePing }},
	{Info{Name: NameZoom, Verifies: "x-zm-signature: v0= hex HMAC-SHA256 of v0:timestamp:body with the secret token",
		Handshake: "endpoint.url_validation: plainToken and encryptedToken",
		Docs:      "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events"},
		Scheme{Headers: []string{"x-zm-signature"}, Prefix: "v0=", TimestampHeader: "x-zm-request-timestamp", Signed: "v0:{timestamp}:{body}"},
		func(p *signed) { p.hs = zoomHandshake }},
}

// standardScheme is Standard Webhooks under a header prefix ("webhook-",
// "svix-").
func standardScheme(prefix string) Scheme {
	return Scheme{Headers: []string{prefix + "signature"}, Separator: " ", Assign: ",", SignatureKey: "v1",
		TimestampHeader: prefix + "timestamp", IDHeaders: []string{prefix + "id"}, Signed: "{id}.{timestamp}.{body}",
		Encoding: "base64", SecretEncoding: "base64"}
}

// docusignHeaders are X-DocuSign-Signature-1 … -n.
func docusignHeaders(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "X-DocuSign-Signature-" + strconv.Itoa(i+1)
	}
	return out
}
