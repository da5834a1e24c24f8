package provider

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// SendGrid Event Webhook headers.
// https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features
const (
	HeaderSendGridSignature = "X-Twilio-Email-Event-Webhook-Signature"
	HeaderSendGridTimestamp = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// sendgrid verifies the signed Event Webhook: the signature header is a
// base64 ASN.1 ECDSA signature of SHA-256(timestamp + body), checked with
// the verification key SendGrid shows (base64 DER of an EC public key).
type sendgrid struct {
	noHandshake
	keys []*ecdsa.PublicKey
	clock
}

func newSendGrid(c Config, clk clock) (Provider, error) {
	p := sendgrid{clock: clk}
	for i, s := range c.Secrets {
		k, err := sendgridKey(s)
		if err != nil {
			return nil, secretError(i, err)
		}
		p.keys = append(p.keys, k)
	}
	return p, nil
}

// sendgridKey parses a base64 DER (PKIX) ECDSA public key.
func sendgridKey(s string) (*ecdsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("the verification key is not base64")
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("the verification key is not a public key")
	}
	ec, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, errors.New("the verification key is not an ECDSA key")
	}
	return ec, nil
}

// Verify checks the signature first and the timestamp second.
func (p sendgrid) Verify(r *Request) error {
	sig := r.Header.Get(HeaderSendGridSignature)
	if sig == "" {
		return fail(ReasonMissingSignature, HeaderSendGridSignature+" header is missing")
	}
	ts := r.Header.Get(HeaderSendGridTimestamp)
	if ts == "" {
		return fail(ReasonMissingTimestamp, HeaderSendGridTimestamp+" header is missing")
	}
	der, err := base64.StdEncoding.Strict().DecodeString(sig)
	if err != nil {
		return fail(ReasonMalformedSignature, HeaderSendGridSignature+" is not base64")
	}
	sec, ok := parseUnix(ts)
	if !ok {
		return fail(ReasonMalformedSignature, HeaderSendGridTimestamp+" is not Unix seconds")
	}
	sum := sendgridDigest(ts, r.Body)
	matched := false
	for _, k := range p.keys {
		if ecdsa.VerifyASN1(k, sum, der) {
			matched = true
			break
		}
	}
	if !matched {
		return fail(ReasonBadSignature, "no key matches")
	}
	return p.within(time.Unix(sec, 0))
}

func sendgridDigest(ts string, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(ts))
	h.Write(body)
	return h.Sum(nil)
}

// EventID is "": a SendGrid post batches many events, each with its own
// sg_event_id.
func (sendgrid) EventID(*Request) string { return "" }

// SignedDigest is "": without an event id, the id is a hash of the body.
func (sendgrid) SignedDigest(*Request) string { return "" }

// Sign signs as SendGrid does, which needs SendGrid's private key: secret
// must be a base64 DER (PKCS #8) EC private key, whose public key the
// route holds. The route's own secret, a public key, cannot sign.
func (sendgrid) Sign(r *Request, secret string, now time.Time) error {
	der, err := base64.StdEncoding.DecodeString(secret)
	if err != nil {
		return fmt.Errorf("sendgrid: %w: pass a base64 PKCS #8 EC private key", ErrNoSigning)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	ec, ok := k.(*ecdsa.PrivateKey)
	if err != nil || !ok {
		return fmt.Errorf("sendgrid: %w: the route holds SendGrid's public key; pass a base64 PKCS #8 EC private key", ErrNoSigning)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := ecdsa.SignASN1(rand.Reader, ec, sendgridDigest(ts, r.Body))
	if err != nil {
		return err
	}
	r.Header.Set(HeaderSendGridTimestamp, ts)
	r.Header.Set(HeaderSendGridSignature, base64.StdEncoding.EncodeToString(sig))
	return nil
}
