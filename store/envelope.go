package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Envelope is one received webhook as jethook keeps it: the body byte for
// byte and the request facts a backend may need.
type Envelope struct {
	Route   string
	EventID string
	Method  string
	Host    string // the Host the provider called
	Proto   string // "http" or "https", as the provider saw it
	// RequestURI is the path and query the provider called
	// ("/hooks/shop?tenant=7"); empty in messages stored before jethook
	// kept it.
	RequestURI string
	RemoteAddr string // the provider's address (host:port)
	ReceivedAt time.Time
	// Header holds the original request headers, keys canonical as
	// net/http gives them. http.Header converts to and from it directly.
	Header map[string][]string
	Body   []byte
	// JSON says the ingress found Body to be JSON a filter reads as such
	// (filter.IsJSON), so that a search need not check it again for every
	// webhook it reads. False: not known.
	JSON bool
	// CaughtUp names the provider whose API catch-up fetched the event
	// from; empty for a webhook ingress received. Senders cannot set it.
	CaughtUp string
	// SignedKey, when set, is a second dedup key besides EventID: the
	// digest of what the sender signed, for senders whose event id the
	// signature does not cover. A captured webhook sent again under a new
	// id keeps it, and is a duplicate.
	SignedKey string
	// Traceparent and Tracestate are the W3C trace context of the ingress
	// span that stored the webhook, so that every attempt, after a
	// restart, a replay or on another replica, joins the same trace. Empty
	// when tracing was off (docs/observability.md).
	Traceparent string
	Tracestate  string
}

// Header names jethook writes on stored messages. Original request headers
// are kept under the "H-" prefix so they never collide with these or with
// NATS's own headers.
const (
	hdrEventID    = "Jethook-Event-Id"
	hdrMethod     = "Jethook-Method"
	hdrHost       = "Jethook-Host"
	hdrProto      = "Jethook-Proto"
	hdrURI        = "Jethook-Uri"
	hdrRemote     = "Jethook-Remote"
	hdrReceived   = "Jethook-Received"
	hdrCaughtUp   = "Jethook-Caught-Up"
	hdrSignedKey  = "Jethook-Signed-Key"
	hdrTraceState = "Jethook-Tracestate"
	hdrTrace      = "Jethook-Traceparent"
	hdrJSON       = "Jethook-Json"
	hdrOrigPrefix = "H-"
)

// layoutToken ends every subject jethook writes. Each route has one
// subject for its webhooks and each destination one for its replays, dead
// letters and attempts: JetStream keeps every distinct subject in memory,
// so per-event subjects would cost memory for every retained webhook. The
// index (index.go) finds an event by its id instead. Data written before
// this layout ends in an event token (32 hex digits) instead; the same
// wildcard filters match both.
const layoutToken = "v2"

// Subject is the subject route's webhooks are stored under.
func Subject(route string) string { return "webhooks." + route + "." + layoutToken }

// ReplaySubject is where a replay for one destination goes: a subject only
// that destination's consumer reads.
func ReplaySubject(route, destination string) string {
	return "replay." + route + "." + destination + "." + layoutToken
}

// EventToken was the last subject token of an event id in the earlier
// layout: the first 128 bits of the id's SHA-256, in hex. Tests use it to
// write data as that layout did.
func EventToken(eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return hex.EncodeToString(sum[:16])
}

func (e *Envelope) msg(subject string) *nats.Msg {
	h := make(nats.Header, len(e.Header)+8)
	for k, vs := range e.Header {
		h[hdrOrigPrefix+k] = vs
	}
	// One backing array for jethook's seven single-value headers: this
	// runs once per webhook.
	v := [...]string{e.EventID, e.Method, e.Host, e.Proto, e.RemoteAddr, e.ReceivedAt.UTC().Format(time.RFC3339Nano), e.RequestURI}
	vals := v[:]
	for i, k := range [...]string{hdrEventID, hdrMethod, hdrHost, hdrProto, hdrRemote, hdrReceived, hdrURI} {
		if vals[i] == "" && k == hdrURI {
			continue
		}
		h[k] = vals[i : i+1 : i+1]
	}
	if e.CaughtUp != "" {
		h[hdrCaughtUp] = []string{e.CaughtUp}
	}
	if e.SignedKey != "" {
		h[hdrSignedKey] = []string{e.SignedKey}
	}
	if e.JSON {
		h[hdrJSON] = []string{"1"}
	}
	if e.Traceparent != "" {
		h[hdrTrace] = []string{e.Traceparent}
		if e.Tracestate != "" {
			h[hdrTraceState] = []string{e.Tracestate}
		}
	}
	return &nats.Msg{Subject: subject, Header: h, Data: e.Body}
}

// decodeEnvelope reads an envelope back from a stored message's subject,
// headers and data.
func decodeEnvelope(subject string, h nats.Header, data []byte) (*Envelope, error) {
	route, err := routeOf(subject)
	if err != nil {
		return nil, err
	}
	e := &Envelope{
		Route:      route,
		EventID:    h.Get(hdrEventID),
		Method:     h.Get(hdrMethod),
		Host:       h.Get(hdrHost),
		Proto:      h.Get(hdrProto),
		RequestURI: h.Get(hdrURI),
		RemoteAddr: h.Get(hdrRemote),
		CaughtUp:   h.Get(hdrCaughtUp),
		SignedKey:  h.Get(hdrSignedKey),
		JSON:       h.Get(hdrJSON) != "",
		Header:     make(map[string][]string, originals(h)),
		Body:       data,
	}
	e.Traceparent, e.Tracestate = h.Get(hdrTrace), h.Get(hdrTraceState)
	if e.EventID == "" {
		return nil, fmt.Errorf("message on %s has no %s header", subject, hdrEventID)
	}
	if t, err := time.Parse(time.RFC3339Nano, h.Get(hdrReceived)); err == nil {
		e.ReceivedAt = t
	}
	for k, vs := range h {
		if name, ok := strings.CutPrefix(k, hdrOrigPrefix); ok {
			e.Header[name] = vs // h was decoded for this message alone
		}
	}
	return e, nil
}

// originals counts the original request headers in h: the size of the
// envelope's Header, which jethook's own headers would more than double
// (a map of up to 8 keys is one allocation, a larger one several).
func originals(h nats.Header) int {
	n := 0
	for k := range h {
		if strings.HasPrefix(k, hdrOrigPrefix) {
			n++
		}
	}
	return n
}

// routeOf returns the route token of webhooks.<route>.<token>,
// replay.<route>.<dest>.<token> or dlq.<route>.<dest>.<token>.
func routeOf(subject string) (string, error) {
	_, rest, _ := strings.Cut(subject, ".")
	route, _, _ := strings.Cut(rest, ".")
	if route == "" {
		return "", fmt.Errorf("subject %q names no route", subject)
	}
	return route, nil
}
