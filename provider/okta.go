package provider

import "net/http"

// headerOktaChallenge carries Okta's one-time event hook verification.
const headerOktaChallenge = "X-Okta-Verification-Challenge"

// oktaHandshake answers Okta's one-time verification GET, which carries the
// route's Authorization header like every event, with
// {"verification": <the challenge>}.
// https://developer.okta.com/docs/concepts/event-hooks/#one-time-verification-request
var oktaHandshake = &handshake{
	match: func(r *Request) bool {
		return isGet(r) && r.Header.Get(headerOktaChallenge) != ""
	},
	answer: func(_ *signed, r *Request) (int, string, []byte) {
		return http.StatusOK, appJSON, jsonAnswer(map[string]string{"verification": r.Header.Get(headerOktaChallenge)})
	},
}
