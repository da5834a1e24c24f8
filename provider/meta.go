package provider

import (
	"crypto/hmac"
	"net/http"
)

// metaHandshake answers Meta's subscription check (Facebook, Instagram,
// WhatsApp): GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…
// gets the challenge when verify_token matches the route's, 403 otherwise.
// https://developers.facebook.com/docs/graph-api/webhooks/getting-started#verification-requests
var metaHandshake = &handshake{
	match: func(r *Request) bool {
		return isGet(r) && r.query().Get("hub.mode") == "subscribe"
	},
	check: func(p *signed, r *Request) error {
		q := r.query()
		if !hmac.Equal([]byte(q.Get("hub.verify_token")), []byte(p.verifyToken)) {
			return &Error{Reason: ReasonBadVerifyToken, Detail: "hub.verify_token does not match the route's verify_token", Status: http.StatusForbidden}
		}
		if q.Get("hub.challenge") == "" {
			return &Error{Reason: ReasonNotHandshake, Detail: "hub.challenge is missing", Status: http.StatusBadRequest}
		}
		return nil
	},
	answer: func(_ *signed, r *Request) (int, string, []byte) {
		return http.StatusOK, textPlain, []byte(r.query().Get("hub.challenge"))
	},
}
