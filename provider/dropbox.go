package provider

import "net/http"

// dropboxChallenge answers Dropbox's verification GET ?challenge=…, which
// carries no signature, by echoing the challenge as text, as Dropbox asks
// (with nosniff, which jethook sets on every handshake answer). It reaches
// nothing, so anyone sending it gains nothing.
// https://www.dropbox.com/developers/reference/webhooks#documentation
var dropboxChallenge = &handshake{
	match: func(r *Request) bool {
		return isGet(r) && r.query().Get("challenge") != ""
	},
	check: func(*signed, *Request) error { return nil },
	answer: func(_ *signed, r *Request) (int, string, []byte) {
		return http.StatusOK, textPlain, []byte(r.query().Get("challenge"))
	},
}
