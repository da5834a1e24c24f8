package provider

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"time"
)

// generic verifies one header holding Prefix + encode(HMAC(secret, body)),
// the scheme of many smaller providers. RFC 2104 defines HMAC.
// https://www.rfc-editor.org/rfc/rfc2104
type generic struct {
	noHandshake
	keys     [][]byte
	header   string
	prefix   string
	idHeader string
	newHash  func() hash.Hash
	base64   bool
}

func newGeneric(c HMAC, keys [][]byte) (generic, error) {
	if !validHeaderName(c.Header) {
		return generic{}, fmt.Errorf("hmac: header %q is not a valid header name", c.Header)
	}
	if c.IDHeader != "" && !validHeaderName(c.IDHeader) {
		return generic{}, fmt.Errorf("hmac: id header %q is not a valid header name", c.IDHeader)
	}
	g := generic{keys: keys, header: c.Header, prefix: c.Prefix, idHeader: c.IDHeader}
	switch strings.ToLower(c.Algorithm) {
	case "", "sha256":
		g.newHash = sha256.New
	case "sha1":
		g.newHash = sha1.New
	case "sha512":
		g.newHash = sha512.New
	default:
		return generic{}, fmt.Errorf("hmac: algorithm %q (want sha1, sha256 or sha512)", c.Algorithm)
	}
	switch strings.ToLower(c.Encoding) {
	case "", "hex":
	case "base64":
		g.base64 = true
	default:
		return generic{}, fmt.Errorf("hmac: encoding %q (want hex or base64)", c.Encoding)
	}
	return g, nil
}

// validHeaderName reports whether s is a non-empty RFC 9110 token (§5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// Verify checks the configured header against every secret.
func (g generic) Verify(h http.Header, body []byte) error {
	sig := h.Get(g.header)
	if sig == "" {
		return fail(ReasonMissingSignature, g.header+" header is missing")
	}
	enc, ok := strings.CutPrefix(sig, g.prefix)
	if !ok {
		return fail(ReasonMalformedSignature, "signature lacks the configured prefix")
	}
	for _, k := range g.keys {
		if g.equal(enc, mac(g.newHash, k, body)) {
			return nil
		}
	}
	return fail(ReasonBadSignature, "no secret matches")
}

func (g generic) equal(enc string, want []byte) bool {
	if g.base64 {
		return hmac.Equal([]byte(enc), []byte(base64.StdEncoding.EncodeToString(want)))
	}
	return hexEqual(enc, want)
}

func (g generic) encode(sum []byte) string {
	if g.base64 {
		return base64.StdEncoding.EncodeToString(sum)
	}
	return hex.EncodeToString(sum)
}

// EventID returns the IDHeader's value, or "" when none is configured.
func (g generic) EventID(h http.Header, _ []byte) string {
	if g.idHeader == "" {
		return ""
	}
	return h.Get(g.idHeader)
}

// Sign sets the signature header, and a fresh id in IDHeader (when
// configured) if h lacks one.
func (g generic) Sign(h http.Header, body []byte, secret string, _ time.Time) error {
	if secret == "" {
		return errors.New("hmac: empty secret")
	}
	h.Set(g.header, g.prefix+g.encode(mac(g.newHash, []byte(secret), body)))
	if g.idHeader != "" {
		setID(h, g.idHeader)
	}
	return nil
}
