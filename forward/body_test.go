package forward_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/jethook/jethook/store"
)

// Bodies that are not text, not UTF-8 or not what their Content-Type says
// go through ingress, JetStream and the forwarder untouched: the backend
// gets the same bytes and the same Content-Type.
func TestBinaryAndInvalidUTF8BodiesReachTheBackendByteForByte(t *testing.T) {
	t.Parallel()
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	noise := make([]byte, 256<<10)
	rnd := rand.New(rand.NewPCG(7, 7))
	for i := range noise {
		noise[i] = byte(rnd.Uint32())
	}
	cases := []struct {
		name, ctype string
		body        []byte
	}{
		{"every byte value", "application/octet-stream", every},
		{"every byte value backwards, labelled JSON", "application/json", reversed(every)},
		{"NULs", "text/plain", []byte("\x00\x00\x00nul\x00in the middle\x00")},
		{"invalid UTF-8", "text/plain; charset=utf-8", []byte("caf\xe9 \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80 \xff\xfe\xfd")},
		{"not JSON though it says so", "application/json", []byte(`{"unterminated": [1, 2,`)},
		{"JSON with a BOM and a trailing NUL", "application/json; charset=utf-8", []byte("\xef\xbb\xbf{\"a\":1}\x00")},
		{"an HTTP request inside the body", "text/plain", []byte("0\r\n\r\nPOST /admin HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")},
		{"CRs, LFs and only whitespace", "text/plain", []byte("\r\n\r\n \t\r\r\n\n")},
		{"an empty body", "application/json", nil},
		{"256 KiB of noise", "application/octet-stream", noise},
	}
	b := newBackend(t, status(http.StatusOK))
	r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{})
	ids := map[string]int{} // event id → case
	for i, c := range cases {
		code, resp := r.post("/hooks/shop", http.Header{"Content-Type": {c.ctype}}, c.body)
		var ack struct{ ID string }
		if code != http.StatusOK || json.Unmarshal([]byte(resp), &ack) != nil || ack.ID == "" {
			t.Fatalf("%s: ingress answered %d %s", c.name, code, resp)
		}
		ids[ack.ID] = i
	}
	eventually(t, "every body delivered", func() bool { return b.count() >= len(cases) })
	seen := map[string]bool{}
	for _, h := range b.all() {
		id := h.header.Get("X-Webhook-Id")
		i, ok := ids[id]
		if !ok || seen[id] {
			t.Errorf("unexpected delivery of %q (known %v, seen %v)", id, ok, seen[id])
			continue
		}
		seen[id] = true
		c := cases[i]
		if !bytes.Equal(h.body, c.body) {
			t.Errorf("%s: backend got %d bytes %q…, want %d bytes %q…", c.name, len(h.body), head(h.body), len(c.body), head(c.body))
		}
		if h.length != int64(len(c.body)) {
			t.Errorf("%s: Content-Length %d, want %d", c.name, h.length, len(c.body))
		}
		if got := h.header.Values("Content-Type"); len(got) != 1 || got[0] != c.ctype {
			t.Errorf("%s: Content-Type %q, want %q", c.name, got, c.ctype)
		}
	}
	if dls := r.deadLetters(); len(dls) != 0 {
		t.Errorf("%d dead letters", len(dls))
	}
}

func reversed(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[len(b)-1-i] = c
	}
	return out
}

func head(b []byte) []byte { return b[:min(len(b), 24)] }
