package provider

import "net/http"

// twitchHandshake answers EventSub's webhook_callback_verification, which is
// signed like any event, with the challenge as text. Revocations are
// ordinary events: stored and delivered.
// https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#responding-to-a-challenge-request
var twitchHandshake = &handshake{
	match: func(r *Request) bool {
		return r.Header.Get("Twitch-Eventsub-Message-Type") == "webhook_callback_verification"
	},
	answer: func(_ *signed, r *Request) (int, string, []byte) {
		c, _ := jsonPointer(r.Body, "/challenge")
		return http.StatusOK, textPlain, []byte(c)
	},
}
