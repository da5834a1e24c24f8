package provider

import "net/http"

// slackHandshake answers the Events API url_verification request, which is
// signed like any event, with its challenge as text.
// https://docs.slack.dev/reference/events/url_verification
var slackHandshake = &handshake{
	match: func(r *Request) bool {
		t, _ := jsonPointer(r.Body, "/type")
		c, _ := jsonPointer(r.Body, "/challenge")
		return t == "url_verification" && c != ""
	},
	answer: func(_ *signed, r *Request) (int, string, []byte) {
		c, _ := jsonPointer(r.Body, "/challenge")
		return http.StatusOK, textPlain, []byte(c)
	},
}
