package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// Sample is what a preset's sender puts in a request besides its
// signature, so that `jethook send` can build one the backend, and the
// sender's SDK, take for the sender's own. The zero Sample is a JSON POST
// with no event header.
type Sample struct {
	// EventHeader names the header in which the sender names the event
	// (GitHub's X-GitHub-Event), "" when it names none in a header; Event
	// is the value sent when the caller names no event.
	EventHeader, Event string
	// Headers are other headers the sender's SDKs expect, with a typical
	// value: @shopify/shopify-api refuses a webhook without its shop domain
	// and API version, and Twitch's EventSub libraries read the
	// subscription type and version.
	Headers [][2]string
	// Form says the sender form-encodes a body that is not a JSON object:
	// Slack's slash commands and interactivity payloads, Twilio's
	// callbacks.
	Form bool
	// BodySHA256 says the sender signs a body that is not form-encoded
	// through the URL's bodySHA256 parameter, the hex SHA-256 of the body
	// (Twilio).
	BodySHA256 bool
}

// ErrNoEventHeader is returned by [Sample.Request] for an event given to
// a preset whose sender names none in a header.
var ErrNoEventHeader = errors.New("the sender names no event in a header")

// Request returns the request the sender would make with body to path,
// ready for [Provider.Sign]. Its headers are h's (h itself is not
// changed), with the event header set to event, or to s.Event when neither
// event nor h gives it; the other sample headers that h lacks; a
// Content-Type when h has none; and, where the signature needs it, a
// query. A non-empty event fails with [ErrNoEventHeader] when the sender
// has no event header.
func (s Sample) Request(method, path string, body []byte, event string, h http.Header) (*Request, error) {
	if event != "" && s.EventHeader == "" {
		return nil, ErrNoEventHeader
	}
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	if s.EventHeader != "" {
		if event != "" {
			h.Set(s.EventHeader, event)
		}
		setDefault(h, s.EventHeader, s.Event)
	}
	for _, kv := range s.Headers {
		setDefault(h, kv[0], kv[1])
	}
	contentType := "application/json"
	if s.Form && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		contentType = formType
	}
	setDefault(h, "Content-Type", contentType)
	u := &url.URL{Path: path}
	if s.BodySHA256 && !strings.HasPrefix(h.Get("Content-Type"), formType) {
		sum := sha256.Sum256(body)
		u.RawQuery = "bodySHA256=" + hex.EncodeToString(sum[:])
	}
	return &Request{Method: method, URL: u, Header: h, Body: body}, nil
}

// formType is the content type of a form-encoded body.
const formType = "application/x-www-form-urlencoded"

// setDefault sets header name to value when h has no value for it.
func setDefault(h http.Header, name, value string) {
	if h.Get(name) == "" {
		h.Set(name, value)
	}
}
