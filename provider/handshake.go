package provider

import (
	"encoding/json"
)

// handshake is a sender's verification request, answered by jethook
// instead of stored.
type handshake struct {
	// match reports whether r is the handshake.
	match func(r *Request) bool
	// check authenticates a handshake that carries no signature (a GET);
	// nil means the handshake is signed like any event and Verify checks it.
	check func(p *signed, r *Request) error
	// answer is the response: status, content type and body.
	answer func(p *signed, r *Request) (int, string, []byte)
}

const (
	textPlain = "text/plain; charset=utf-8"
	appJSON   = "application/json"
)

// jsonAnswer encodes v; v holds only strings, so it cannot fail.
func jsonAnswer(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
