package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HeaderStripeSignature carries Stripe's timestamp and signatures.
// https://docs.stripe.com/webhooks#verify-manually
const HeaderStripeSignature = "Stripe-Signature"

// stripe verifies Stripe-Signature: "t=<unix>,v1=<hex>[,v1=<hex>...]", where
// each v1 is hex HMAC-SHA256(secret, t + "." + body) and the whsec_ secret is
// the key as it is. Other schemes (v0) are ignored.
// https://docs.stripe.com/webhooks#verify-manually
type stripe struct {
	noHandshake
	keys [][]byte
	clock
}

// Verify checks the signature first and the timestamp second, so
// stale_timestamp always means an authentic but old (or early) request.
func (p stripe) Verify(h http.Header, body []byte) error {
	header := h.Get(HeaderStripeSignature)
	if header == "" {
		return fail(ReasonMissingSignature, HeaderStripeSignature+" header is missing")
	}
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return fail(ReasonMalformedSignature, HeaderStripeSignature+" has an element that is not key=value")
		}
		switch k {
		case "t":
			if ts != "" {
				return fail(ReasonMalformedSignature, HeaderStripeSignature+" has more than one timestamp")
			}
			if v == "" {
				return fail(ReasonMalformedSignature, HeaderStripeSignature+" has an empty timestamp")
			}
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" {
		return fail(ReasonMissingTimestamp, HeaderStripeSignature+" has no t= element")
	}
	if len(sigs) == 0 {
		return fail(ReasonMissingSignature, HeaderStripeSignature+" has no v1= element")
	}
	if _, ok := parseUnix(ts); !ok {
		return fail(ReasonMalformedSignature, HeaderStripeSignature+" timestamp is not Unix seconds")
	}
	if !p.match(ts, body, sigs) {
		return fail(ReasonBadSignature, "no secret matches")
	}
	return p.check(ts)
}

func (p stripe) match(ts string, body []byte, sigs []string) bool {
	for _, k := range p.keys {
		want := mac(sha256.New, k, []byte(ts), []byte("."), body)
		for _, s := range sigs {
			if hexEqual(s, want) {
				return true
			}
		}
	}
	return false
}

// EventID returns the event object's "id" (evt_...) from the JSON body.
func (stripe) EventID(_ http.Header, body []byte) string { return jsonString(body, "id") }

// Sign sets Stripe-Signature with timestamp now and one v1 signature.
func (stripe) Sign(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return errors.New("stripe: empty secret")
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := mac(sha256.New, []byte(secret), []byte(ts), []byte("."), body)
	h.Set(HeaderStripeSignature, "t="+ts+",v1="+hex.EncodeToString(sig))
	return nil
}
