package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Slack headers. Verifying requests from Slack:
// https://docs.slack.dev/authentication/verifying-requests-from-slack
const (
	HeaderSlackSignature = "X-Slack-Signature"
	HeaderSlackTimestamp = "X-Slack-Request-Timestamp"
)

// slack verifies X-Slack-Signature: "v0=" + hex HMAC-SHA256(signing secret,
// "v0:" + X-Slack-Request-Timestamp + ":" + body), and answers the Events
// API url_verification handshake.
// https://docs.slack.dev/authentication/verifying-requests-from-slack
type slack struct {
	keys [][]byte
	clock
}

const slackVersion = "v0"

// Verify checks the signature first and the timestamp second, so
// stale_timestamp always means an authentic but old (or early) request.
func (p slack) Verify(h http.Header, body []byte) error {
	sig := h.Get(HeaderSlackSignature)
	if sig == "" {
		return fail(ReasonMissingSignature, HeaderSlackSignature+" header is missing")
	}
	ts := h.Get(HeaderSlackTimestamp)
	if ts == "" {
		return fail(ReasonMissingTimestamp, HeaderSlackTimestamp+" header is missing")
	}
	hexSig, ok := strings.CutPrefix(sig, slackVersion+"=")
	if !ok {
		return fail(ReasonMalformedSignature, HeaderSlackSignature+" lacks the v0= prefix")
	}
	if _, ok := parseUnix(ts); !ok {
		return fail(ReasonMalformedSignature, HeaderSlackTimestamp+" is not Unix seconds")
	}
	matched := false
	for _, k := range p.keys {
		if hexEqual(hexSig, slackMAC(k, ts, body)) {
			matched = true
			break
		}
	}
	if !matched {
		return fail(ReasonBadSignature, "no secret matches")
	}
	return p.check(ts)
}

func slackMAC(key []byte, ts string, body []byte) []byte {
	return mac(sha256.New, key, []byte(slackVersion+":"+ts+":"), body)
}

// EventID returns the Events API "event_id" from a JSON body; slash commands
// and interactivity payloads are form-encoded and have none.
func (slack) EventID(_ http.Header, body []byte) string { return jsonString(body, "event_id") }

// Handshake answers the Events API url_verification request with its
// challenge as text/plain.
// https://docs.slack.dev/reference/events/url_verification
func (slack) Handshake(_ http.Header, body []byte) (int, string, []byte, bool) {
	var v struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &v) != nil || v.Type != "url_verification" || v.Challenge == "" {
		return 0, "", nil, false
	}
	return http.StatusOK, "text/plain; charset=utf-8", []byte(v.Challenge), true
}

// Sign sets X-Slack-Request-Timestamp to now and X-Slack-Signature.
func (slack) Sign(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return errors.New("slack: empty signing secret")
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h.Set(HeaderSlackTimestamp, ts)
	h.Set(HeaderSlackSignature, slackVersion+"="+hex.EncodeToString(slackMAC([]byte(secret), ts, body)))
	return nil
}
