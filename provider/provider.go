// Package provider verifies inbound webhooks the way each sender signs them.
// A declarative [Scheme] says where a signature and its timestamp live, what
// string is signed and how; most presets ([Presets] lists them all: GitHub,
// Stripe, Svix, Zoom, Paddle…) are a Scheme plus a test, and the few that
// need code (Twilio's sorted form parameters, SendGrid's ECDSA key, GitLab's
// token beside a signature) have a file of their own. Each preset checks the raw request in constant time, extracts
// the sender's event id for deduplication, and answers its verification
// handshake. [Resign] re-signs deliveries with Standard Webhooks for
// backends.
package provider

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a signed timestamp may be from now, in either
// direction, when neither [Config].Tolerance nor the preset sets one. Stripe,
// Slack and Standard Webhooks all recommend five minutes.
const DefaultTolerance = 5 * time.Minute

// Config selects and parameterizes a preset (filled from a policies.yaml route).
type Config struct {
	// Name is a preset name ([Presets]). The empty name means none, so the
	// zero Config verifies nothing.
	Name string
	// Secrets are the shared signing secrets; a request signed with any one of
	// them verifies, so a secret can be rotated without downtime.
	Secrets []string
	// Tolerance bounds |now - signed timestamp| for presets that sign a
	// timestamp; 0 means the preset's own ([Info].Tolerance).
	Tolerance time.Duration
	// PublicURL is the URL the sender calls, as it calls it (scheme, host,
	// path; no query): presets that sign the URL (twilio, square, hubspot)
	// need it, since jethook usually sits behind a load balancer. The
	// request's query string is appended to it.
	PublicURL string
	// VerifyToken is the token a subscription handshake must present (meta).
	VerifyToken string
	// SigningSecret, for presets whose secret is a token ([Info].SigningSecret:
	// gitlab), is the "whsec_<base64>" key of the Standard Webhooks
	// signature the sender adds; when set, that signature is required too.
	SigningSecret string
	// HMAC parameterizes the generic body HMAC (Name == "hmac").
	HMAC HMAC
	// Scheme declares the signature of Name == "signature".
	Scheme Scheme
	// Now returns the current time; nil means time.Now. Tests inject a clock.
	Now func() time.Time
}

// HMAC describes a generic "HMAC of the raw body in one header" scheme, the
// shape most smaller providers use. It is shorthand for a [Scheme].
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

// Request is what a preset sees of an inbound webhook.
type Request struct {
	Method string
	// URL is the request URL as received; only its query is used, appended
	// to [Config].PublicURL where a preset signs the URL.
	URL    *url.URL
	Header http.Header
	Body   []byte
}

// query returns the request's query values (none for a nil URL).
func (r *Request) query() url.Values {
	if r.URL == nil {
		return url.Values{}
	}
	return r.URL.Query()
}

// rawQuery returns the request's query string, without "?".
func (r *Request) rawQuery() string {
	if r.URL == nil {
		return ""
	}
	return r.URL.RawQuery
}

// Reasons a request fails verification. They are short, stable, safe to return
// to the client and to use as a metric label.
const (
	ReasonMissingSignature   = "missing_signature"
	ReasonMissingTimestamp   = "missing_timestamp"
	ReasonBadSignature       = "bad_signature"
	ReasonStaleTimestamp     = "stale_timestamp"
	ReasonMalformedSignature = "malformed_signature"
	// ReasonBadVerifyToken is a subscription handshake with the wrong token
	// (answered 403, as Meta asks).
	ReasonBadVerifyToken = "bad_verify_token"
	// ReasonNotHandshake is a GET on a route whose sender only GETs for its
	// handshake, without the handshake's parameters (answered 400).
	ReasonNotHandshake = "not_a_handshake"
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
	// Status is the HTTP status to answer; 0 means 401 Unauthorized.
	Status int
}

// Error returns a short human message: the reason and its detail.
func (e *Error) Error() string {
	if e.Detail == "" {
		return "webhook verification: " + e.Reason
	}
	return "webhook verification: " + e.Reason + ": " + e.Detail
}

// ErrNoSigning is returned by Sign for presets jethook cannot sign for with
// the route's secret (SendGrid verifies with a public key).
var ErrNoSigning = errors.New("cannot sign with this secret")

func fail(reason, detail string) *Error { return &Error{Reason: reason, Detail: detail} }

// Provider verifies, identifies and answers one provider's webhooks.
type Provider interface {
	// Verify checks the raw request. Signatures are compared in constant time
	// (hmac.Equal). A nil error means the request is authentic; otherwise
	// the error is an *Error.
	Verify(r *Request) error
	// EventID is the provider's own id for dedup, "" when the request has
	// none ([Info].ID says where each preset takes it from).
	EventID(r *Request) string
	// SignedDigest is the hex SHA-256 of what r's signature covers, for a
	// preset whose event id comes from something the signature does not
	// cover (an id header): changing that id does not make a captured
	// request new, so the caller dedups on this digest too. It is "" when
	// the id is signed, or taken from the signed body, and for presets
	// that sign nothing a replay could be told apart by. Call it only
	// after Verify succeeded.
	SignedDigest(r *Request) string
	// Handshake answers a provider's verification request without storing it.
	// Call it only after Verify succeeded. ok is false when the request is an
	// ordinary event.
	Handshake(r *Request) (status int, contentType string, resp []byte, ok bool)
	// Sign sets the headers the provider would send for r.Body, using secret
	// and now (for `jethook send` and tests); presets that sign inside the
	// body (mailgun, linear) rewrite r.Body. Schemes with an event id header
	// set a fresh id when r lacks one.
	Sign(r *Request, secret string, now time.Time) error
}

// ConfigError is a Config that New refuses. Key names the setting at
// fault, so that a caller can point at it: "name", "secret" (Secret is its
// 1-based index), "signing_secret", "public_url", "verify_token",
// "tolerance" or "scheme" (the `hmac:` or `signature:` block). Messages
// never hold a secret.
type ConfigError struct {
	Provider string
	Key      string
	Secret   int
	Err      error
}

func (e *ConfigError) Error() string {
	if e.Secret > 0 {
		return fmt.Sprintf("provider %s: secret %d: %v", e.Provider, e.Secret, e.Err)
	}
	return fmt.Sprintf("provider %s: %v", e.Provider, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// secretError is a ConfigError about secret i (0-based); New fills in
// the provider.
func secretError(i int, err error) *ConfigError {
	return &ConfigError{Key: "secret", Secret: i + 1, Err: err}
}

// New returns the preset c names. It fails with a *ConfigError for an
// unknown name, a preset other than none without secrets, an empty secret,
// a secret the preset cannot use, a missing public_url or verify_token the
// preset needs, an invalid scheme, or a negative tolerance.
func New(c Config) (Provider, error) {
	name := cmp.Or(c.Name, NameNone)
	p, ok := presets[name]
	if !ok {
		return nil, &ConfigError{Provider: c.Name, Key: "name", Err: fmt.Errorf("unknown name (want one of %s)", strings.Join(Names(), ", "))}
	}
	if c.Tolerance < 0 {
		return nil, &ConfigError{Provider: name, Key: "tolerance", Err: errors.New("tolerance must not be negative")}
	}
	if name == NameNone {
		return none{}, nil
	}
	if len(c.Secrets) == 0 {
		return nil, &ConfigError{Provider: name, Key: "secret", Err: errors.New("at least one secret is required")}
	}
	for i, s := range c.Secrets {
		if s == "" {
			return nil, &ConfigError{Provider: name, Key: "secret", Secret: i + 1, Err: errors.New("the secret is empty")}
		}
	}
	if p.PublicURL {
		if err := checkPublicURL(c.PublicURL); err != nil {
			return nil, &ConfigError{Provider: name, Key: "public_url", Err: err}
		}
	}
	if c.SigningSecret != "" && !p.SigningSecret {
		return nil, &ConfigError{Provider: name, Key: "signing_secret", Err: errors.New("the preset takes no signing secret")}
	}
	if p.VerifyToken && c.VerifyToken == "" {
		return nil, &ConfigError{Provider: name, Key: "verify_token", Err: errors.New("verify_token is required")}
	}
	clk := clock{now: c.Now, tolerance: c.Tolerance}
	if clk.now == nil {
		clk.now = time.Now
	}
	if clk.tolerance == 0 {
		clk.tolerance = cmp.Or(p.Tolerance, DefaultTolerance)
	}
	v, err := p.build(c, clk)
	if ce, ok := errors.AsType[*ConfigError](err); ok {
		ce.Provider = name
		return nil, ce
	}
	if err != nil {
		return nil, &ConfigError{Provider: name, Key: "scheme", Err: err}
	}
	return v, nil
}

// checkPublicURL accepts an absolute http(s) URL with a host and no query
// or fragment.
func checkPublicURL(s string) error {
	if s == "" {
		return errors.New("public_url is required: the URL the sender calls, as it calls it")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("public_url %q is not an absolute http or https URL", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#") {
		return fmt.Errorf("public_url %q must not hold a query or fragment (the request's query is appended)", s)
	}
	return nil
}

// digest is the hex SHA-256 of the concatenated parts.
func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
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

// clock checks signed timestamps against a tolerance window around now.
type clock struct {
	now       func() time.Time
	tolerance time.Duration
}

// within reports an error unless t is within the tolerance of now.
func (c clock) within(t time.Time) error {
	d := c.now().Sub(t)
	if d > c.tolerance || d < -c.tolerance {
		return fail(ReasonStaleTimestamp, "timestamp outside tolerance")
	}
	return nil
}

// parseUnix parses canonical non-negative decimal digits: no sign, no
// leading zero, at most 18 digits (so it never overflows).
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

// setID sets header name to newID() when h has no value for it, and returns
// the header's value.
func setID(h http.Header, name string, newID func() string) string {
	if h.Get(name) == "" {
		h.Set(name, newID())
	}
	return h.Get(name)
}

// newUUID returns a random (version 4) UUID, the form most senders use for
// delivery ids. RFC 9562 §5.4.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
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

// noHandshake is embedded by presets without a verification handshake.
type noHandshake struct{}

// Handshake reports ok=false: the request is an ordinary event.
func (noHandshake) Handshake(*Request) (int, string, []byte, bool) { return 0, "", nil, false }

// isGet reports whether r is a GET (or HEAD, which Go serves like GET).
func isGet(r *Request) bool {
	return slices.Contains([]string{http.MethodGet, http.MethodHead}, r.Method)
}
