package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// zoomHandshake answers Zoom's endpoint.url_validation event, which is
// signed like any event, with the plainToken and its hex HMAC-SHA256 under
// the secret token the request is signed with.
// https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint
var zoomHandshake = &handshake{
	match: func(r *Request) bool {
		ev, _ := jsonPointer(r.Body, "/event")
		return ev == "endpoint.url_validation"
	},
	answer: func(p *signed, r *Request) (int, string, []byte) {
		plain, _ := jsonPointer(r.Body, "/payload/plainToken")
		return http.StatusOK, appJSON, jsonAnswer(map[string]string{
			"plainToken":     plain,
			"encryptedToken": hex.EncodeToString(mac(sha256.New, p.keyOf(r), []byte(plain))),
		})
	},
}
