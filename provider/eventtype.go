package provider

import (
	"bytes"
	"net/http"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/jethook/jethook/payload"
)

// typeHeaders are the headers in which senders name the event type, as
// their presets know them: GitHub, Gitea, Forgejo and Gogs, GitLab,
// Shopify, Bitbucket, WooCommerce, Twitch.
var typeHeaders = []string{
	"X-GitHub-Event", "X-Gitea-Event", "X-Forgejo-Event", "X-Gogs-Event", "X-Gitlab-Event",
	"X-Shopify-Topic", "Shopify-Topic", "X-Event-Key", "X-Wc-Webhook-Topic", "Twitch-Eventsub-Subscription-Type",
}

// typeFields are the body fields, as paths of object keys, in which
// senders name the event type: Slack's event callbacks (event.type,
// before its envelope's type), Stripe, Standard Webhooks, Svix, Linear
// and Square (type), Paddle, PagerDuty and Mux (event_type,
// event.event_type), Zoom, Calendly, Typeform and Razorpay (event), Lemon
// Squeezy (meta.event_name), Okta (eventType), Sentry (action).
var typeFields = [][]string{
	{"event", "type"}, {"type"}, {"event_type"}, {"event", "event_type"}, {"event"},
	{"meta", "event_name"}, {"eventType"}, {"topic"}, {"action"},
}

// maxTypeLen bounds the type EventType returns: a sender writes it.
const maxTypeLen = 100

// EventType is the event type a webhook names, found where the presets'
// senders put it: the first of typeHeaders it carries, else the first of
// typeFields in its JSON object body that holds a string. Empty when it
// names none. A body nested deeper than payload.MaxDepth is not read.
func EventType(header http.Header, body []byte) string {
	if t, ok := headerType(header); ok {
		return t
	}
	if !object(body) || payload.TooDeep(body) || !gjson.ValidBytes(body) {
		return ""
	}
	return bodyType(body)
}

// EventTypeOfJSON is EventType for a body known to be valid JSON nested
// no deeper than payload.MaxDepth (filter.IsJSON, which the ingress
// records on what it stores): it reads the body without checking it
// again, which is most of what EventType costs on a 1 KiB body.
func EventTypeOfJSON(header http.Header, body []byte) string {
	if t, ok := headerType(header); ok {
		return t
	}
	if !object(body) {
		return ""
	}
	return bodyType(body)
}

// object reports whether body begins as a JSON object does.
func object(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// headerType is the type the first of typeHeaders header carries names.
func headerType(header http.Header) (string, bool) {
	for _, name := range typeHeaders {
		if v := strings.TrimSpace(header.Get(name)); v != "" {
			return clipType(v), true
		}
	}
	return "", false
}

// bodyType is the type the first of typeFields that holds a string in the
// JSON object body names.
func bodyType(body []byte) string {
	// Read in place, not a copy of the body: what is returned is copied
	// (clipType).
	root := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
	for _, path := range typeFields {
		v := root
		for _, k := range path {
			if v = member(v, k); !v.Exists() {
				break
			}
		}
		if v.Type == gjson.String && strings.TrimSpace(v.Str) != "" {
			return clipType(v.Str)
		}
	}
	return ""
}

// clipType bounds a type a sender wrote to maxTypeLen bytes of UTF-8, in
// a string of its own.
func clipType(s string) string {
	if len(s) > maxTypeLen {
		s = s[:maxTypeLen]
	}
	return strings.Clone(strings.ToValidUTF8(s, ""))
}
