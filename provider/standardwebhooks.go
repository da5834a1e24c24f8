package provider

import (
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

// Resign sets fresh Standard Webhooks headers on h (webhook-id = id,
// webhook-timestamp = now, webhook-signature = "v1,<base64>"), replacing any
// existing ones, so a backend can verify each delivery attempt with a secret
// it shares with jethook whatever the original provider signed. secret is
// "whsec_<base64>"; raw base64 is accepted too. During a key change, more
// holds the other secrets: webhook-signature then carries one signature per
// secret, space-separated, as the scheme allows, so a backend that knows
// any one of them verifies the request.
// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#signature-scheme
func Resign(h http.Header, id string, body []byte, secret string, now time.Time, more ...string) error {
	if id == "" {
		return errors.New("standard-webhooks: empty webhook id")
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sigs := make([]string, 0, 1+len(more))
	for _, s := range append([]string{secret}, more...) {
		key, err := standardKey(s)
		if err != nil {
			return err
		}
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac(sha256.New, key, []byte(id+"."+ts+"."), body)))
	}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, ts)
	h.Set(HeaderWebhookSignature, strings.Join(sigs, " "))
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
		return nil, errors.New("the secret is neither whsec_<base64> nor base64")
	}
	if len(key) == 0 {
		return nil, errors.New("the secret's key is empty")
	}
	return key, nil
}
