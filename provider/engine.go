package provider

import (
	"cmp"
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
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scheme declares how a sender signs its webhooks: where the signature and
// its timestamp are, which string is signed, with which HMAC and encoding,
// and where the event id is. It is the `signature:` block of a route with
// provider signature, and most built-in presets are a Scheme too.
type Scheme struct {
	// Headers carry the signature; one of them is required, and all that
	// are present are read (DocuSign sends one per key, Shopify's may come
	// under two names). Sign sets the first.
	Headers []string
	// Prefix precedes each signature ("sha256=", "v0="); a signature without
	// it is malformed.
	Prefix string
	// Separator splits a header holding several elements: "," for Stripe's
	// "t=…,v1=…", ";" for Paddle's "ts=…;h1=…", " " for Standard Webhooks'
	// "v1,… v1,…". Empty means the header holds one signature.
	Separator string
	// Assign separates an element's key from its value; "" means "=".
	Assign string
	// SignatureKey is the key of the signature elements (v1, h1); elements
	// with other keys are ignored. Empty with a Separator: every element is
	// a signature.
	SignatureKey string
	// TimestampKey is the key of the timestamp element (t, ts).
	TimestampKey string
	// TimestampHeader is the header holding the timestamp.
	TimestampHeader string
	// TimestampJSON is a JSON pointer (RFC 6901) to the timestamp in the
	// body (Linear's /webhookTimestamp).
	TimestampJSON string
	// TimestampFormat is unix (seconds, the default), unix_ms or rfc3339.
	TimestampFormat string
	// SignatureJSON is a JSON pointer to the signature in the body, for
	// senders that sign inside the payload (Mailgun); it replaces Headers.
	SignatureJSON string
	// Signed is the signed string as a template of {body}, {timestamp},
	// {id}, {method}, {url}, {decoded_url}, {header:Name} and {json:/ptr};
	// "" means "{body}". See [template].
	Signed string
	// Algorithm is sha1, sha256 (the default) or sha512 for an HMAC, or
	// token when the header holds the secret itself (GitLab, Okta).
	Algorithm string
	// Encoding of the MAC: hex (the default, any case) or base64 (padded
	// standard alphabet). For token: plain (the default) or base64
	// (Postmark's "Basic " + base64 of user:password).
	Encoding string
	// SecretEncoding is raw (the default: the secret's bytes are the key)
	// or base64 (the key is the base64 after an optional "whsec_" prefix).
	SecretEncoding string
	// IDHeaders hold the event id; the first present wins.
	IDHeaders []string
	// IDJSON is a JSON pointer to the event id in the body, used when no
	// IDHeaders is present.
	IDJSON string
}

// Timestamp formats of [Scheme].TimestampFormat.
const (
	formatUnix   = "unix"
	formatUnixMs = "unix_ms"
	formatRFC    = "rfc3339"
)

// signed verifies a [Scheme]; presets add a handshake, an id rule and an
// id generator.
type signed struct {
	s         Scheme
	keys      [][]byte
	newHash   func() hash.Hash
	token     bool
	base64    bool
	tmpl      template
	publicURL string
	clock
	// hs answers the preset's handshake; nil for none.
	hs *handshake
	// verifyToken is what an unsigned handshake must present (meta).
	verifyToken string
	// eventID replaces the scheme's id rule (shopify).
	eventID func(r *Request) string
	// digestHeaders are unsigned headers that tell two deliveries of one
	// signed body apart and go into SignedDigest with it (shopify's topic).
	digestHeaders []string
	// newID makes an id for Sign; nil is newUUID.
	newID func() string
}

// compile checks s and returns its verifier over secrets.
func compile(s Scheme, secrets []string, c Config, clk clock) (*signed, error) {
	p := &signed{s: s, publicURL: c.PublicURL, clock: clk, verifyToken: c.VerifyToken, newID: newUUID}
	if s.SignatureJSON == "" && len(s.Headers) == 0 {
		return nil, errors.New("a signature header is required")
	}
	for _, h := range append(append([]string(nil), s.Headers...), s.IDHeaders...) {
		if !validHeaderName(h) {
			return nil, fmt.Errorf("header %q is not a valid header name", h)
		}
	}
	if s.TimestampHeader != "" && !validHeaderName(s.TimestampHeader) {
		return nil, fmt.Errorf("timestamp header %q is not a valid header name", s.TimestampHeader)
	}
	for _, ptr := range []string{s.TimestampJSON, s.SignatureJSON, s.IDJSON} {
		if ptr != "" && !strings.HasPrefix(ptr, "/") {
			return nil, fmt.Errorf("JSON pointer %q must start with /", ptr)
		}
	}
	sources := 0
	for _, v := range []string{s.TimestampKey, s.TimestampHeader, s.TimestampJSON} {
		if v != "" {
			sources++
		}
	}
	if sources > 1 {
		return nil, errors.New("give the timestamp one place: a key, a header or a JSON pointer")
	}
	if s.TimestampKey != "" && s.Separator == "" {
		return nil, errors.New("a timestamp key needs a separator")
	}
	if s.SignatureKey != "" && s.Separator == "" {
		return nil, errors.New("a signature key needs a separator")
	}
	switch s.TimestampFormat {
	case "", formatUnix, formatUnixMs, formatRFC:
	default:
		return nil, fmt.Errorf("timestamp format %q (want unix, unix_ms or rfc3339)", s.TimestampFormat)
	}
	switch strings.ToLower(s.Algorithm) {
	case "", "sha256":
		p.newHash = sha256.New
	case "sha1":
		p.newHash = sha1.New
	case "sha512":
		p.newHash = sha512.New
	case "token":
		p.token = true
	default:
		return nil, fmt.Errorf("algorithm %q (want sha1, sha256, sha512 or token)", s.Algorithm)
	}
	switch enc := strings.ToLower(s.Encoding); {
	case enc == "base64":
		p.base64 = true
	case enc == "" || (p.token && enc == "plain") || (!p.token && enc == "hex"):
	case p.token:
		return nil, fmt.Errorf("encoding %q (want plain or base64 for a token)", s.Encoding)
	default:
		return nil, fmt.Errorf("encoding %q (want hex or base64)", s.Encoding)
	}
	tmpl, err := parseTemplate(s.Signed)
	if err != nil {
		return nil, err
	}
	if p.token && (s.Signed != "" || sources > 0) {
		return nil, errors.New("a token signs nothing; leave signed and the timestamp out")
	}
	if s.SignatureJSON != "" && tmpl.uses(partBody) {
		return nil, errors.New("a signature inside the body cannot sign {body}")
	}
	if tmpl.uses(partID) && len(s.IDHeaders) == 0 {
		return nil, errors.New("{id} in signed needs an id header")
	}
	if tmpl.uses(partTimestamp) && sources == 0 {
		return nil, errors.New("{timestamp} in signed needs a timestamp key, header or JSON pointer")
	}
	if (tmpl.uses(partURL) || tmpl.uses(partDecodedURL)) && c.PublicURL == "" {
		return nil, errors.New("{url} in signed needs public_url")
	}
	p.tmpl = tmpl
	switch strings.ToLower(s.SecretEncoding) {
	case "", "raw":
		p.keys = rawKeys(secrets)
	case "base64":
		for i, sec := range secrets {
			k, err := standardKey(sec)
			if err != nil {
				return nil, secretError(i, err)
			}
			p.keys = append(p.keys, k)
		}
	default:
		return nil, fmt.Errorf("secret encoding %q (want raw or base64)", s.SecretEncoding)
	}
	if s.Assign == "" {
		p.s.Assign = "="
	}
	return p, nil
}

// SignsBody reports whether the signature covers the whole body: its
// signed template holds {body}. A token (the secret itself) signs nothing.
// An unparsable template reports false; [New] refuses it.
func (s Scheme) SignsBody() bool {
	if strings.EqualFold(s.Algorithm, "token") {
		return false
	}
	t, err := parseTemplate(s.Signed)
	return err == nil && t.uses(partBody)
}

// timestamped reports whether the scheme signs a timestamp.
func (s Scheme) timestamped() bool {
	return s.TimestampKey != "" || s.TimestampHeader != "" || s.TimestampJSON != ""
}

// Verify checks the signature first and the timestamp second, so
// stale_timestamp always means an authentic but old (or early) request.
func (p *signed) Verify(r *Request) error {
	if p.hs != nil {
		// Signed handshakes are matched only on a GET here, so an ordinary
		// event is not parsed twice.
		switch {
		case p.hs.check != nil && p.hs.match(r):
			return p.hs.check(p, r)
		case isGet(r) && !p.hs.match(r):
			return &Error{Reason: ReasonNotHandshake, Detail: "a GET here must be the sender's verification handshake", Status: http.StatusBadRequest}
		}
	}
	sigs, ts, err := p.signatures(r)
	if err != nil {
		return err
	}
	var at time.Time
	if p.s.timestamped() {
		if ts == "" {
			return fail(ReasonMissingTimestamp, p.timestampWhere()+" is missing")
		}
		if at, err = parseTime(p.s.TimestampFormat, ts); err != nil {
			return fail(ReasonMalformedSignature, p.timestampWhere()+" is not "+cmp.Or(p.s.TimestampFormat, formatUnix))
		}
	}
	parts, err := p.tmpl.render(r, ts, p.publicURL, p.s.IDHeaders)
	if err != nil {
		return err
	}
	if !p.match(parts, sigs) {
		return fail(ReasonBadSignature, "no secret matches")
	}
	if p.s.timestamped() {
		return p.within(at)
	}
	return nil
}

// match reports whether any key's MAC of parts (or, for a token, any
// secret) equals any of sigs, in constant time.
func (p *signed) match(parts [][]byte, sigs []string) bool {
	return p.matching(parts, sigs) != nil
}

// keyOf returns the key r is signed with, for a handshake answered under
// it (Zoom's encryptedToken); the first key when none matches.
func (p *signed) keyOf(r *Request) []byte {
	sigs, ts, err := p.signatures(r)
	if err != nil {
		return p.keys[0]
	}
	parts, err := p.tmpl.render(r, ts, p.publicURL, p.s.IDHeaders)
	if err != nil {
		return p.keys[0]
	}
	if k := p.matching(parts, sigs); k != nil {
		return k
	}
	return p.keys[0]
}

// matching returns the key whose MAC of parts (or, for a token, which
// itself) equals one of sigs, nil when none does.
func (p *signed) matching(parts [][]byte, sigs []string) []byte {
	for _, k := range p.keys {
		var want []byte
		if p.token {
			want = p.encode(k)
		} else {
			want = mac(p.newHash, k, parts...)
		}
		for _, s := range sigs {
			if p.token {
				if hmac.Equal([]byte(s), want) {
					return k
				}
				continue
			}
			if got, ok := p.decode(s); ok && hmac.Equal(got, want) {
				return k
			}
		}
	}
	return nil
}

// encode encodes a MAC (or a token) as the sender writes it.
func (p *signed) encode(b []byte) []byte {
	switch {
	case p.base64:
		return []byte(base64.StdEncoding.EncodeToString(b))
	case p.token:
		return b
	}
	return []byte(hex.EncodeToString(b))
}

// decode decodes one signature; ok is false when it is not well-formed.
func (p *signed) decode(s string) ([]byte, bool) {
	var b []byte
	var err error
	if p.base64 {
		b, err = base64.StdEncoding.Strict().DecodeString(s)
	} else {
		b, err = hex.DecodeString(s)
	}
	return b, err == nil && len(b) > 0
}

// timestampWhere names where the timestamp is, for messages.
func (p *signed) timestampWhere() string {
	switch {
	case p.s.TimestampHeader != "":
		return p.s.TimestampHeader + " header"
	case p.s.TimestampJSON != "":
		return "the body's timestamp"
	}
	return "the " + p.s.TimestampKey + " element of " + p.s.Headers[0]
}

// signatures returns the signatures and the timestamp (from its element,
// header or body field) of r.
func (p *signed) signatures(r *Request) (sigs []string, ts string, err error) {
	switch {
	case p.s.TimestampHeader != "":
		ts = r.Header.Get(p.s.TimestampHeader)
	case p.s.TimestampJSON != "":
		ts, _ = jsonScalar(r.Body, p.s.TimestampJSON)
	}
	if p.s.SignatureJSON != "" {
		sig, _ := jsonPointer(r.Body, p.s.SignatureJSON)
		if sig == "" {
			return nil, "", fail(ReasonMissingSignature, "the body has no signature at "+p.s.SignatureJSON)
		}
		sig, ok := strings.CutPrefix(sig, p.s.Prefix)
		if !ok {
			return nil, "", fail(ReasonMalformedSignature, "the body's signature lacks the "+p.s.Prefix+" prefix")
		}
		return []string{sig}, ts, nil
	}
	present := false
	for _, name := range p.s.Headers {
		v := r.Header.Get(name)
		if v == "" {
			continue
		}
		present = true
		if p.s.Separator == "" {
			sig, ok := strings.CutPrefix(v, p.s.Prefix)
			if !ok {
				return nil, "", fail(ReasonMalformedSignature, name+" lacks the "+p.s.Prefix+" prefix")
			}
			sigs = append(sigs, sig)
			continue
		}
		l, err := parseList(v, p.s.Separator, p.s.Assign, p.s.SignatureKey, p.s.TimestampKey)
		if err != nil {
			return nil, "", fail(ReasonMalformedSignature, name+" "+err.Error())
		}
		if p.s.TimestampKey != "" {
			if ts != "" && l.timestamp != "" && ts != l.timestamp {
				return nil, "", fail(ReasonMalformedSignature, "the signature headers disagree on the timestamp")
			}
			ts = cmp.Or(l.timestamp, ts)
		}
		for _, s := range l.signatures {
			s, ok := strings.CutPrefix(s, p.s.Prefix)
			if !ok {
				return nil, "", fail(ReasonMalformedSignature, name+" has a signature without the "+p.s.Prefix+" prefix")
			}
			sigs = append(sigs, s)
		}
	}
	if !present {
		return nil, "", fail(ReasonMissingSignature, p.s.Headers[0]+" header is missing")
	}
	if len(sigs) == 0 {
		return nil, "", fail(ReasonMissingSignature, p.s.Headers[0]+" has no "+p.s.SignatureKey+" signature")
	}
	return sigs, ts, nil
}

// parseTime parses a signed timestamp in format.
func parseTime(format, s string) (time.Time, error) {
	switch format {
	case formatRFC:
		return time.Parse(time.RFC3339Nano, s)
	case formatUnixMs:
		ms, ok := parseUnix(s)
		if !ok {
			return time.Time{}, errors.New("not Unix milliseconds")
		}
		return time.UnixMilli(ms), nil
	}
	sec, ok := parseUnix(s)
	if !ok {
		return time.Time{}, errors.New("not Unix seconds")
	}
	return time.Unix(sec, 0), nil
}

// formatTime writes now in format, as the sender would.
func formatTime(format string, now time.Time) string {
	switch format {
	case formatRFC:
		return now.UTC().Format(time.RFC3339Nano)
	case formatUnixMs:
		return strconv.FormatInt(now.UnixMilli(), 10)
	}
	return strconv.FormatInt(now.Unix(), 10)
}

// EventID returns the preset's id: the first present id header, else the
// body's field at the id pointer.
func (p *signed) EventID(r *Request) string {
	if p.eventID != nil {
		return p.eventID(r)
	}
	for _, h := range p.s.IDHeaders {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	if p.s.IDJSON != "" {
		v, _ := jsonPointer(r.Body, p.s.IDJSON)
		return v
	}
	return ""
}

// SignedDigest hashes the signed string (and digestHeaders) when the
// event id may come from outside it.
func (p *signed) SignedDigest(r *Request) string {
	if p.token || p.idSigned() {
		return ""
	}
	_, ts, err := p.signatures(r)
	if err != nil {
		return ""
	}
	parts, err := p.tmpl.render(r, ts, p.publicURL, p.s.IDHeaders)
	if err != nil {
		return ""
	}
	for _, h := range p.digestHeaders {
		parts = append(parts, []byte{0}, []byte(r.Header.Get(h)))
	}
	return digest(parts...)
}

// idSigned reports whether the event id, wherever it is taken from, is
// covered by the signature: {id} (or a {header:…} of each id header) is
// in the signed string, or the id is read from a signed body. A preset
// with no id at all counts as signed: its id is a hash of the body.
func (p *signed) idSigned() bool {
	if p.eventID != nil {
		return false
	}
	if len(p.s.IDHeaders) > 0 && !p.tmpl.uses(partID) {
		for _, h := range p.s.IDHeaders {
			if !p.tmpl.signsHeader(h) {
				return false
			}
		}
	}
	if p.s.IDJSON != "" && !p.tmpl.uses(partBody) && !slices.Contains(p.tmpl.pointers(), p.s.IDJSON) {
		return false
	}
	return true
}

// Handshake answers the preset's verification request, if r is one.
func (p *signed) Handshake(r *Request) (int, string, []byte, bool) {
	if p.hs == nil || !p.hs.match(r) {
		return 0, "", nil, false
	}
	status, ctype, body := p.hs.answer(p, r)
	return status, ctype, body, true
}

// Sign sets the signature (and timestamp and id) the sender would send.
func (p *signed) Sign(r *Request, secret string, now time.Time) error {
	if secret == "" {
		return errors.New("empty secret")
	}
	key := []byte(secret)
	if strings.EqualFold(p.s.SecretEncoding, "base64") {
		k, err := standardKey(secret)
		if err != nil {
			return err
		}
		key = k
	}
	if len(p.s.IDHeaders) > 0 {
		setID(r.Header, p.s.IDHeaders[0], p.newID)
	}
	ts := formatTime(p.s.TimestampFormat, now)
	if p.s.TimestampHeader != "" {
		r.Header.Set(p.s.TimestampHeader, ts)
	}
	if p.s.TimestampJSON != "" || p.s.SignatureJSON != "" || len(p.tmpl.pointers()) > 0 {
		if err := p.fillBody(r, ts); err != nil {
			return err
		}
	}
	var sig string
	if p.token {
		sig = string(p.encode(key))
	} else {
		parts, err := p.tmpl.render(r, ts, p.publicURL, p.s.IDHeaders)
		if err != nil {
			return err
		}
		sig = string(p.encode(mac(p.newHash, key, parts...)))
	}
	if p.s.SignatureJSON != "" {
		return setPointer(&r.Body, p.s.SignatureJSON, p.s.Prefix+sig, false)
	}
	v := p.s.Prefix + sig
	if p.s.Separator != "" {
		if p.s.SignatureKey != "" {
			v = p.s.SignatureKey + p.s.Assign + v
		}
		if p.s.TimestampKey != "" {
			v = p.s.TimestampKey + p.s.Assign + ts + p.s.Separator + v
		}
	}
	r.Header.Set(p.s.Headers[0], v)
	return nil
}

// fillBody writes the timestamp and any template field the body lacks
// (Mailgun's token) into a JSON object body.
func (p *signed) fillBody(r *Request, ts string) error {
	if p.s.TimestampJSON != "" {
		// Linear sends milliseconds as a number, Mailgun seconds as a string.
		if err := setPointer(&r.Body, p.s.TimestampJSON, ts, p.s.TimestampFormat == formatUnixMs); err != nil {
			return err
		}
	}
	for _, ptr := range p.tmpl.pointers() {
		if v, _ := jsonPointer(r.Body, ptr); v == "" {
			if err := setPointer(&r.Body, ptr, strings.ReplaceAll(newUUID(), "-", ""), false); err != nil {
				return err
			}
		}
	}
	return nil
}
