package provider

import (
	"encoding/json"
	"net/http"
)

// slackHandshake answers the Events API url_verification request, which is
// signed like any event, with its challenge as text.
// https://docs.slack.dev/reference/events/url_verification
var slackHandshake = &handshake{
	match: func(r *Request) bool {
		var v struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
		}
		return json.Unmarshal(r.Body, &v) == nil && v.Type == "url_verification" && v.Challenge != ""
	},
	answer: func(_ *signed, r *Request) (int, string, []byte) {
		c, _ := jsonPointer(r.Body, "/challenge")
		return http.StatusOK, textPlain, []byte(c)
	},
}
