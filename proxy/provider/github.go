package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"
)

// GitHub headers. Validating webhook deliveries:
// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
const (
	HeaderGitHubSignature = "X-Hub-Signature-256"
	HeaderGitHubDelivery  = "X-GitHub-Delivery"
)

// github verifies X-Hub-Signature-256: "sha256=" + hex HMAC-SHA256(secret, body).
// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
type github struct {
	noHandshake
	keys [][]byte
}

const githubPrefix = "sha256="

// Verify checks X-Hub-Signature-256 against every secret.
func (p github) Verify(h http.Header, body []byte) error {
	sig := h.Get(HeaderGitHubSignature)
	if sig == "" {
		return fail(ReasonMissingSignature, HeaderGitHubSignature+" header is missing")
	}
	hexSig, ok := strings.CutPrefix(sig, githubPrefix)
	if !ok {
		return fail(ReasonMalformedSignature, HeaderGitHubSignature+" lacks the sha256= prefix")
	}
	for _, k := range p.keys {
		if hexEqual(hexSig, mac(sha256.New, k, body)) {
			return nil
		}
	}
	return fail(ReasonBadSignature, "no secret matches")
}

// EventID returns X-GitHub-Delivery, the GUID of the delivery.
func (github) EventID(h http.Header, _ []byte) string { return h.Get(HeaderGitHubDelivery) }

// Sign sets X-Hub-Signature-256, and X-GitHub-Delivery when h lacks one.
func (github) Sign(h http.Header, body []byte, secret string, _ time.Time) error {
	if secret == "" {
		return errors.New("github: empty secret")
	}
	h.Set(HeaderGitHubSignature, githubPrefix+hex.EncodeToString(mac(sha256.New, []byte(secret), body)))
	setID(h, HeaderGitHubDelivery)
	return nil
}
