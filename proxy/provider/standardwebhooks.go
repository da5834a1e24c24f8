package provider

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers.
// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// standardSecretPrefix marks a Standard Webhooks secret; the base64 after it
// is the key.
const standardSecretPrefix = "whsec_"

// standardWebhooks verifies the Standard Webhooks scheme: webhook-signature is
// a space-separated list of "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>";
// entries of other versions (v1a) are ignored.
// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#verifying-webhook-authenticity
type standardWebhooks struct {
	noHandshake
	keys [][]byte
	clock
}

// Verify checks the signature first and the timestamp second, so
// stale_timestamp always means an authentic but old (or early) request.
func (p standardWebhooks) Verify(h http.Header, body []byte) error {
	list := h.Get(HeaderWebhookSignature)
	if list == "" {
		return fail(ReasonMissingSignature, HeaderWebhookSignature+" header is missing")
	}
	ts := h.Get(HeaderWebhookTimestamp)
	if ts == "" {
		return fail(ReasonMissingTimestamp, HeaderWebhookTimestamp+" header is missing")
	}
	id := h.Get(HeaderWebhookID)
	if id == "" {
		return fail(ReasonMalformedSignature, HeaderWebhookID+" header is missing")
	}
	if _, ok := parseUnix(ts); !ok {
		return fail(ReasonMalformedSignature, HeaderWebhookTimestamp+" is not Unix seconds")
	}
	var sigs []string
	for _, entry := range strings.Fields(list) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok {
			return fail(ReasonMalformedSignature, HeaderWebhookSignature+" has an entry without a version")
		}
		if version == "v1" {
			sigs = append(sigs, sig)
		}
	}
	if len(sigs) == 0 {
		return fail(ReasonMissingSignature, HeaderWebhookSignature+" has no v1 entry")
	}
	if !p.match(id, ts, body, sigs) {
		return fail(ReasonBadSignature, "no secret matches")
	}
	return p.check(ts)
}

func (p standardWebhooks) match(id, ts string, body []byte, sigs []string) bool {
	for _, k := range p.keys {
		want := []byte(base64.StdEncoding.EncodeToString(standardMAC(k, id, ts, body)))
		for _, s := range sigs {
			if hmac.Equal([]byte(s), want) {
				return true
			}
		}
	}
	return false
}

func standardMAC(key []byte, id, ts string, body []byte) []byte {
	return mac(sha256.New, key, []byte(id+"."+ts+"."), body)
}

// EventID returns webhook-id.
func (standardWebhooks) EventID(h http.Header, _ []byte) string { return h.Get(HeaderWebhookID) }

// Sign sets webhook-timestamp and webhook-signature, and a fresh webhook-id
// when h lacks one. secret is "whsec_<base64>" or raw base64.
func (standardWebhooks) Sign(h http.Header, body []byte, secret string, now time.Time) error {
	id := h.Get(HeaderWebhookID)
	if id == "" {
		id = NewMessageID()
	}
	return Resign(h, id, body, secret, now)
}

// Resign sets fresh Standard Webhooks headers on h (webhook-id = id,
// webhook-timestamp = now, webhook-signature = "v1,<base64>"), replacing any
// existing ones, so a backend can verify each delivery attempt with a secret
// it shares with jethook whatever the original provider signed. secret is
// "whsec_<base64>"; raw base64 is accepted too.
// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#signature-scheme
func Resign(h http.Header, id string, body []byte, secret string, now time.Time) error {
	if id == "" {
		return errors.New("standard-webhooks: empty webhook id")
	}
	key, err := standardKey(secret)
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, ts)
	h.Set(HeaderWebhookSignature, "v1,"+base64.StdEncoding.EncodeToString(standardMAC(key, id, ts, body)))
	return nil
}

// NewMessageID returns a fresh random webhook id of the form "msg_<base32>".
func NewMessageID() string { return "msg_" + rand.Text() }

// standardKey decodes a "whsec_<base64>" or raw base64 secret into its key.
// Errors never include the secret.
func standardKey(secret string) ([]byte, error) {
	b64 := strings.TrimPrefix(secret, standardSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		// Some senders print the key without padding; policy accepts it too.
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	if err != nil {
		return nil, errors.New("standard-webhooks: secret is not whsec_ followed by base64")
	}
	if len(key) == 0 {
		return nil, errors.New("standard-webhooks: secret is empty")
	}
	return key, nil
}
