package provider

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Twilio headers.
// https://www.twilio.com/docs/usage/webhooks/webhooks-security
const (
	HeaderTwilioSignature   = "X-Twilio-Signature"
	HeaderTwilioIdempotency = "I-Twilio-Idempotency-Token"
)

// twilio verifies X-Twilio-Signature: base64 HMAC-SHA1 (auth token) of the
// URL Twilio called followed by each form parameter's name and value,
// sorted by name. A JSON body is instead signed through the URL's
// bodySHA256 parameter, the hex SHA-256 of the body. As Twilio's own
// validators do, the URL is tried with and without its default port.
// https://www.twilio.com/docs/usage/webhooks/webhooks-security#validating-signatures-from-twilio
type twilio struct {
	noHandshake
	keys      [][]byte
	publicURL string
}

func newTwilio(c Config, _ clock) (Provider, error) {
	return twilio{keys: rawKeys(c.Secrets), publicURL: c.PublicURL}, nil
}

// Verify checks the signature over the URL and parameters against every
// secret.
func (p twilio) Verify(r *Request) error {
	sig := r.Header.Get(HeaderTwilioSignature)
	if sig == "" {
		return fail(ReasonMissingSignature, HeaderTwilioSignature+" header is missing")
	}
	got, err := base64.StdEncoding.Strict().DecodeString(sig)
	if err != nil {
		return fail(ReasonMalformedSignature, HeaderTwilioSignature+" is not base64")
	}
	u := signedURL(p.publicURL, r)
	params, err := p.params(r, u)
	if err != nil {
		return err
	}
	for _, candidate := range portVariants(u) {
		for _, k := range p.keys {
			if hmac.Equal(got, mac(sha1.New, k, []byte(candidate), []byte(params))) {
				return nil
			}
		}
	}
	return fail(ReasonBadSignature, "no secret matches")
}

// params is what follows the URL in the signed string: the sorted form
// parameters, or nothing when the URL carries bodySHA256 (checked here).
func (p twilio) params(r *Request, u string) (string, error) {
	if want := r.query().Get("bodySHA256"); want != "" {
		sum := sha256.Sum256(r.Body)
		if !hmac.Equal([]byte(strings.ToLower(want)), []byte(hex.EncodeToString(sum[:]))) {
			return "", fail(ReasonBadSignature, "bodySHA256 does not match the body")
		}
		return "", nil
	}
	if r.Method == http.MethodGet || len(r.Body) == 0 {
		return "", nil
	}
	form, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return "", fail(ReasonMalformedSignature, "the body is neither form parameters nor signed through bodySHA256")
	}
	return sortedParams(form), nil
}

// sortedParams concatenates name and value of each parameter, sorted by
// name; a repeated name contributes each of its values, sorted.
func sortedParams(form url.Values) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range form {
			if !yield(k) {
				return
			}
		}
	}) {
		vs := slices.Clone(form[k])
		slices.Sort(vs)
		for _, v := range vs {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	return b.String()
}

// portVariants returns u as given, with its scheme's default port added,
// and with any port removed.
func portVariants(u string) []string {
	out := []string{u}
	parsed, err := url.Parse(u)
	if err != nil {
		return out
	}
	host := parsed.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if parsed.Port() == "" {
		port := "80"
		if parsed.Scheme == "https" {
			port = "443"
		}
		with := *parsed
		with.Host = net.JoinHostPort(parsed.Hostname(), port)
		return append(out, with.String())
	}
	without := *parsed
	without.Host = host
	return append(out, without.String())
}

// EventID returns I-Twilio-Idempotency-Token, the same on Twilio's retries.
func (twilio) EventID(r *Request) string { return r.Header.Get(HeaderTwilioIdempotency) }

// SignedDigest covers what the signature does, the URL and the
// parameters: I-Twilio-Idempotency-Token is not signed.
func (p twilio) SignedDigest(r *Request) string {
	u := signedURL(p.publicURL, r)
	params, err := p.params(r, u)
	if err != nil {
		return ""
	}
	return digest([]byte(u), []byte(params))
}

// Sign sets X-Twilio-Signature over public_url and the form body (or, when
// the URL holds bodySHA256, the URL alone), and a fresh idempotency token
// when r lacks one.
func (p twilio) Sign(r *Request, secret string, _ time.Time) error {
	if secret == "" {
		return errors.New("empty secret")
	}
	u := signedURL(p.publicURL, r)
	params, err := p.params(r, u)
	if err != nil {
		return err
	}
	r.Header.Set(HeaderTwilioSignature, base64.StdEncoding.EncodeToString(mac(sha1.New, []byte(secret), []byte(u), []byte(params))))
	setID(r.Header, HeaderTwilioIdempotency, newUUID)
	return nil
}
