// Package provider verifies inbound webhooks the way each sender signs them.
// It holds one preset per provider (GitHub, Shopify, Stripe, Slack, Standard
// Webhooks, a generic HMAC header, and none): each checks the raw request's
// signature in constant time, extracts the provider's own event id for
// deduplication, and answers verification handshakes. It also re-signs
// deliveries with the Standard Webhooks scheme for backends ([Resign]).
package provider

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"time"
)

// Preset names accepted in [Config].Name.
const (
	NameNone             = "none"
	NameGitHub           = "github"
	NameShopify          = "shopify"
	NameStripe           = "stripe"
	NameSlack            = "slack"
	NameStandardWebhooks = "standard-webhooks"
	NameHMAC             = "hmac"
)

// DefaultTolerance is how far a signed timestamp may be from now, in either
// direction, when [Config].Tolerance is zero. Stripe, Slack and Standard
// Webhooks all recommend five minutes.
const DefaultTolerance = 5 * time.Minute

// Config selects and parameterizes a preset (filled from a policies.yaml route).
type Config struct {
	// Name is one of none, github, shopify, stripe, slack, standard-webhooks
	// or hmac. The empty name means none, so the zero Config verifies nothing.
	Name string
	// Secrets are the shared signing secrets; a request signed with any one of
	// them verifies, so a secret can be rotated without downtime.
	Secrets []string
	// Tolerance bounds |now - signed timestamp| for stripe, slack and
	// standard-webhooks; 0 means [DefaultTolerance].
	Tolerance time.Duration
	// HMAC parameterizes the generic scheme (Name == "hmac").
	HMAC HMAC
	// Now returns the current time; nil means time.Now. Tests inject a clock.
	Now func() time.Time
}

// HMAC describes a generic "HMAC of the raw body in one header" scheme, the
// shape most smaller providers use.
type HMAC struct {
	// Header carries the signature, for example X-Signature. Required.
	Header string
	// Algorithm is sha1, sha256 or sha512; empty means sha256.
	Algorithm string
	// Encoding of the MAC in the header: hex or base64 (standard alphabet,
	// padded); empty means hex. Hex is compared case-insensitively.
	Encoding string
	// Prefix, when set, must precede the encoded MAC (for example "sha256=").
	Prefix string
	// IDHeader, when set, names the header holding the provider's event id.
	IDHeader string
}

// Reasons a request fails verification. They are short, stable, safe to return
// to the client and to use as a metric label.
const (
	ReasonMissingSignature   = "missing_signature"
	ReasonMissingTimestamp   = "missing_timestamp"
	ReasonBadSignature       = "bad_signature"
	ReasonStaleTimestamp     = "stale_timestamp"
	ReasonMalformedSignature = "malformed_signature"
	// ReasonBadBody is for a body that cannot be verified at all, such as one
	// the caller could not read in full; no preset returns it for a body it has.
	ReasonBadBody = "bad_body"
)

// Error is a verification failure. Callers branch on Reason with errors.As.
type Error struct {
	// Reason is one of the Reason constants.
	Reason string
	// Detail says what was wrong in a few words. It never holds secrets,
	// body bytes or header values, so it is safe to log.
	Detail string
}

// Error returns a short human message: the reason and its detail.
func (e *Error) Error() string {
	if e.Detail == "" {
		return "webhook verification: " + e.Reason
	}
	return "webhook verification: " + e.Reason + ": " + e.Detail
}

func fail(reason, detail string) *Error { return &Error{Reason: reason, Detail: detail} }

// Provider verifies, identifies and answers one provider's webhooks.
type Provider interface {
	// Verify checks the raw request. Signatures are compared in constant time
	// (hmac.Equal). A nil error means the request is authentic; otherwise
	// the error is an *Error.
	Verify(h http.Header, body []byte) error
	// EventID is the provider's own id for dedup, "" when the request has none:
	// github X-GitHub-Delivery; shopify X-Shopify-Webhook-Id, else
	// X-Shopify-Event-Id; stripe JSON body "id"; slack JSON body "event_id"
	// (form-encoded slash commands have none); standard-webhooks webhook-id;
	// hmac the IDHeader if set.
	EventID(h http.Header, body []byte) string
	// Handshake answers a provider's verification request without storing it.
	// Call it only after Verify succeeded. ok is false when the request is an
	// ordinary event (always, except for Slack's url_verification).
	Handshake(h http.Header, body []byte) (status int, contentType string, resp []byte, ok bool)
	// Sign sets the headers the provider would send for body, using secret and
	// now (for `jethook send` and tests). Schemes with an event id header set a
	// fresh id when h lacks one.
	Sign(h http.Header, body []byte, secret string, now time.Time) error
}

// New returns the preset c names. It fails for an unknown name, a preset
// other than none without secrets, an empty secret, invalid hmac settings,
// a negative tolerance, or a standard-webhooks secret that is not base64.
func New(c Config) (Provider, error) {
	if c.Tolerance < 0 {
		return nil, errors.New("provider: tolerance must not be negative")
	}
	name := c.Name
	if name == "" {
		name = NameNone
	}
	switch name {
	case NameNone:
		return none{}, nil
	case NameGitHub, NameShopify, NameStripe, NameSlack, NameStandardWebhooks, NameHMAC:
	default:
		return nil, fmt.Errorf("provider: unknown name %q (want none, github, shopify, stripe, slack, standard-webhooks or hmac)", c.Name)
	}
	if len(c.Secrets) == 0 {
		return nil, fmt.Errorf("provider %s: at least one secret is required", name)
	}
	for i, s := range c.Secrets {
		if s == "" {
			return nil, fmt.Errorf("provider %s: secret %d is empty", name, i+1)
		}
	}
	clk := clock{now: c.Now, tolerance: c.Tolerance}
	if clk.now == nil {
		clk.now = time.Now
	}
	if clk.tolerance == 0 {
		clk.tolerance = DefaultTolerance
	}
	switch name {
	case NameGitHub:
		return github{keys: rawKeys(c.Secrets)}, nil
	case NameShopify:
		return shopify{keys: rawKeys(c.Secrets)}, nil
	case NameStripe:
		return stripe{keys: rawKeys(c.Secrets), clock: clk}, nil
	case NameSlack:
		return slack{keys: rawKeys(c.Secrets), clock: clk}, nil
	case NameStandardWebhooks:
		keys := make([][]byte, len(c.Secrets))
		for i, s := range c.Secrets {
			k, err := standardKey(s)
			if err != nil {
				return nil, fmt.Errorf("provider %s: secret %d: %w", name, i+1, err)
			}
			keys[i] = k
		}
		return standardWebhooks{keys: keys, clock: clk}, nil
	default: // NameHMAC
		p, err := newGeneric(c.HMAC, rawKeys(c.Secrets))
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", name, err)
		}
		return p, nil
	}
}

// rawKeys returns the secrets' bytes, used as HMAC keys as they are.
func rawKeys(secrets []string) [][]byte {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	return keys
}

// mac returns the HMAC of the concatenated parts under key.
func mac(newHash func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(newHash, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// hexEqual reports in constant time whether got is the hex encoding of want,
// ignoring the ASCII case of the hex digits.
func hexEqual(got string, want []byte) bool {
	lower := []byte(got)
	for i, c := range lower {
		if 'A' <= c && c <= 'Z' {
			lower[i] = c + ('a' - 'A')
		}
	}
	return hmac.Equal(lower, []byte(hex.EncodeToString(want)))
}

// clock checks signed timestamps against a tolerance window around now.
type clock struct {
	now       func() time.Time
	tolerance time.Duration
}

// check validates a Unix-seconds timestamp header value: canonical decimal
// digits, within the tolerance of now in either direction.
func (c clock) check(ts string) error {
	t, ok := parseUnix(ts)
	if !ok {
		return fail(ReasonMalformedSignature, "timestamp is not Unix seconds")
	}
	d := c.now().Sub(time.Unix(t, 0))
	if d > c.tolerance || d < -c.tolerance {
		return fail(ReasonStaleTimestamp, "timestamp outside tolerance")
	}
	return nil
}

// parseUnix parses canonical non-negative decimal seconds: digits only, no
// sign, no leading zero, at most 18 digits (so it never overflows).
func parseUnix(s string) (int64, bool) {
	if s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	t, err := strconv.ParseInt(s, 10, 64)
	return t, err == nil
}

// jsonString returns the string value of a top-level key of a JSON object
// body, matched exactly, or "" when the body is not such an object.
func jsonString(body []byte, key string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(obj[key], &s) != nil {
		return ""
	}
	return s
}

// setID sets header name to a fresh random UUID when h has no value for it.
func setID(h http.Header, name string) {
	if h.Get(name) == "" {
		h.Set(name, newUUID())
	}
}

// newUUID returns a random (version 4) UUID, the form GitHub and Shopify use
// for delivery ids. RFC 9562 §5.4.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// noHandshake is embedded by presets without a verification handshake.
type noHandshake struct{}

// Handshake reports ok=false: the request is an ordinary event.
func (noHandshake) Handshake(http.Header, []byte) (int, string, []byte, bool) {
	return 0, "", nil, false
}
