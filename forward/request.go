package forward

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/store"
)

// hopHeaders are meaningful only for one connection and are never
// forwarded (RFC 9110 §7.6.1), nor are the headers jethook sets itself.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Content-Length", "Host",
}

// newRequest builds one attempt's request: the original method, the body
// byte for byte, the original headers minus hop-by-hop ones, and jethook's
// X-Webhook-*, X-Forwarded-* and Jethook-Caught-Up headers, sent to dest with the query string
// the provider called appended. An error means no attempt can succeed; it
// never quotes dest, which may hold a credential.
func newRequest(ctx context.Context, dest string, e *store.Envelope, attempt int) (*http.Request, error) {
	u, err := parseDest(dest)
	if err != nil {
		return nil, err
	}
	return newRequestTo(ctx, u, e, attempt)
}

// newRequestTo is newRequest to a destination URL parsed already
// (parseDest), which it does not change: a destination's attempts parse
// its URL once, not once each.
func newRequestTo(ctx context.Context, dest *url.URL, e *store.Envelope, attempt int) (*http.Request, error) {
	method := e.Method
	if method == "" {
		method = http.MethodPost
	}
	u := appendQuery(dest, e.RequestURI)
	// The URL is set after: printed and parsed again, it cost a fifth
	// of the request's making.
	req, err := http.NewRequestWithContext(ctx, method, "", bytes.NewReader(e.Body))
	if err != nil {
		// Only the method can be wrong here, and the error must not
		// quote the URL (it may hold a credential).
		return nil, fmt.Errorf("destination %s: %s", policy.RedactURL(dest.String()), errText(err))
	}
	req.URL, req.Host = u, u.Host
	h, err := storedHeader(e.Header)
	if err != nil {
		return nil, err
	}
	for _, f := range h["Connection"] {
		for name := range strings.SplitSeq(f, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		delete(h, name) // canonical already, as storedHeader made h's keys
	}
	h.Set("X-Webhook-Id", e.EventID)
	h.Set("X-Webhook-Attempt", strconv.Itoa(attempt))
	// Only catch-up may say an event was caught up: a sender's own
	// Jethook-Caught-Up is dropped (docs/catch-up.md).
	h.Del("Jethook-Caught-Up")
	if e.CaughtUp != "" {
		h.Set("Jethook-Caught-Up", e.CaughtUp)
	}
	if ip, _, err := net.SplitHostPort(e.RemoteAddr); err == nil {
		if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		h.Set("X-Forwarded-For", ip)
	}
	// Only what the ingress vouched for (proxy.Handler.vouch): a stored
	// message without it says nothing of the scheme or the host.
	h.Del("X-Forwarded-Proto")
	h.Del("X-Forwarded-Host")
	if e.Proto != "" {
		h.Set("X-Forwarded-Proto", e.Proto)
	}
	if e.Host != "" {
		h.Set("X-Forwarded-Host", e.Host)
	}
	if _, ok := h["User-Agent"]; !ok {
		// An explicit empty value keeps Go's default User-Agent out.
		h["User-Agent"] = []string{""}
	}
	req.Header = h
	if u := req.URL.User; u != nil && h.Get("Authorization") == "" {
		// Credentials in the destination URL become Basic auth, as
		// http.Client would send them; a provider's own Authorization wins.
		pass, _ := u.Password()
		req.SetBasicAuth(u.Username(), pass)
	}
	req.ContentLength = int64(len(e.Body))
	return req, nil
}

// parseDest parses a destination URL; the error names it redacted
// (policy.RedactURL).
func parseDest(dest string) (*url.URL, error) {
	u, err := url.Parse(dest)
	if err != nil {
		return nil, fmt.Errorf("destination %s: %s", policy.RedactURL(dest), errText(err))
	}
	return u, nil
}

// appendQuery returns a copy of the destination URL dest with the query
// string of the URL the provider called (requestURI) appended after the
// destination's own; dest itself is not changed. The sender's query is
// taken as it came, except that a byte that would end or break the query,
// such as the "#" Go's server leaves in it, is percent-encoded
// (queryEscape): the backend gets every byte the sender sent, and the
// sender cannot add a fragment or make the URL unparsable.
func appendQuery(dest *url.URL, requestURI string) *url.URL {
	u := *dest
	_, q, ok := strings.Cut(requestURI, "?")
	if !ok || q == "" {
		return &u
	}
	q = queryEscape(q)
	switch {
	case u.RawQuery == "":
		u.RawQuery = q
	case strings.HasSuffix(u.RawQuery, "&"):
		u.RawQuery += q
	default:
		u.RawQuery += "&" + q
	}
	u.ForceQuery = false
	return &u
}

// queryEscape percent-encodes the bytes of q that would end or break a
// query (RFC 3986 §3.4): "#", space, controls and every byte outside
// ASCII. Everything else passes as it came, escapes too, even malformed
// ones ("%zz"): the backend sees the sender's query as sent.
func queryEscape(q string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	escaped := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c != '#' && c > ' ' && c < 0x7f {
			if escaped {
				b.WriteByte(c)
			}
			continue
		}
		if !escaped {
			escaped = true
			b.Grow(len(q) + 8)
			b.WriteString(q[:i])
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	if !escaped {
		return q
	}
	return b.String()
}

// storedHeader copies a stored message's original headers under their
// canonical names, so that "connection" or "x-webhook-id" is dropped or
// replaced like its canonical form. Ingress only stores headers net/http
// accepted, but a message may reach the stream by other ways; a name that
// is not a token or a value with a control character (RFC 9110 §5.1, §5.5)
// is an error, since net/http would refuse to send it on every attempt.
// The error names the header, never its value.
func storedHeader(stored map[string][]string) (http.Header, error) {
	h := make(http.Header, len(stored)+6)
	for k, vs := range stored {
		name := http.CanonicalHeaderKey(k)
		if !store.ValidHeaderName(name) {
			return nil, fmt.Errorf("stored header %q: not a valid header name", k)
		}
		for _, v := range vs {
			if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
				return nil, fmt.Errorf("stored header %s: control character in its value", name)
			}
		}
		h[name] = append(h[name], vs...)
	}
	return h, nil
}

// resign writes fresh Standard Webhooks headers to h for the event id and
// body, signed with each of the destination's secrets (the first, and
// during a key change the one before it).
func resign(h http.Header, id string, body []byte, rs *policy.Resign, now time.Time) error {
	more := make([]string, 0, len(rs.Secrets)-1)
	for _, s := range rs.Secrets[1:] {
		more = append(more, string(s))
	}
	return provider.Resign(h, id, body, string(rs.Secrets[0]), now, more...)
}
