package forward

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

// Preview is the request a destination would get for an event on its
// first attempt, its transform applied: what `jethook transform test` and
// the dashboard's event page show. It names no credential: the
// destination URL's query and user are left out of URL, and Basic auth
// made from them is shown as such.
type Preview struct {
	Method string `json:"method"`
	// URL is the destination's scheme, host and path (as the transform
	// set it); Query the query string sent, its part from the
	// destination URL replaced by "…".
	URL    string      `json:"url"`
	Query  string      `json:"query,omitempty"`
	Header http.Header `json:"headers"`
	Body   string      `json:"body"`
	// Transformed is true when the destination has a transform.
	Transformed bool `json:"transformed"`
	// Dropped is true when the transform returned null: the event would
	// be filtered there.
	Dropped bool `json:"dropped,omitempty"`
	// Error is the transform's error (transform_error: …): the event
	// would be dead-lettered there.
	Error string `json:"error,omitempty"`
	// Console is what the script printed with console.log and its kin.
	Console string `json:"console,omitempty"`
	// Sent is what an attempt log's record of this request would say: an
	// attempt whose record has the same body SHA-256 sent this body.
	Sent *store.Sent `json:"sent,omitempty"`
}

// Preview makes the request the running destination would send for e, with
// t's script instead of its own when t is not nil (compiled under the
// destination's limits). Nothing is sent or stored.
func (f *Forwarder) Preview(route, destination string, e *store.Envelope, t *policy.Transform) (Preview, error) {
	d, err := f.find(route, destination)
	if err != nil {
		return Preview{}, err
	}
	dest, tf := d.dest, d.transform
	if t != nil {
		dest.Transform = t
		if tf, err = newTransform(d.route, dest); err != nil {
			return Preview{}, err
		}
	}
	return preview(f, d.route, dest, tf, e)
}

// PreviewConfig is Preview for route r's destination dst of a loaded
// configuration, run here rather than by a running jethook.
func PreviewConfig(r policy.Route, dst policy.Destination, e *store.Envelope, now time.Time) (Preview, error) {
	tf, err := newTransform(r, dst)
	if err != nil {
		return Preview{}, err
	}
	return preview(&Forwarder{Now: func() time.Time { return now }}, r, dst, tf, e)
}

func preview(f *Forwarder, r policy.Route, dst policy.Destination, tf *destTransform, e *store.Envelope) (Preview, error) {
	if f.Now == nil {
		f.Now = time.Now
	}
	d := &destination{f: f, route: r, dest: dst, transform: tf}
	req, err := newRequest(context.Background(), dst.URL, e, 1)
	if err != nil {
		return Preview{}, err
	}
	p := Preview{Transformed: tf != nil}
	body := e.Body
	if tf != nil {
		var console bytes.Buffer
		var o Outcome
		var ok bool
		body, o, ok = d.transformed(req, e, 1, &console)
		p.Console = console.String()
		switch {
		case !ok && o.Dropped:
			p.Dropped = true
			return p, nil
		case !ok && o.Transform != nil:
			p.Error = o.Transform.Error()
			return p, nil
		case !ok:
			return p, errors.New(o.Reason)
		}
		p.Sent = o.Sent
	}
	if rs := dst.Resign; rs != nil {
		if err := resign(req.Header, e.EventID, body, rs, f.Now()); err != nil {
			return Preview{}, err
		}
	}
	p.Method, p.Header, p.Body = req.Method, req.Header.Clone(), string(body)
	u := *req.URL
	u.User, u.RawQuery = nil, ""
	p.URL = policy.RedactURL(u.String())
	p.Query = req.URL.RawQuery
	if own, err := url.Parse(dst.URL); err == nil && own.RawQuery != "" && strings.HasPrefix(p.Query, own.RawQuery) {
		p.Query = "…" + strings.TrimPrefix(p.Query, own.RawQuery)
	}
	if req.URL.User != nil && len(e.Header["Authorization"]) == 0 && p.Header.Get("Authorization") != "" {
		p.Header.Set("Authorization", "Basic … (from the destination URL)")
	}
	return p, nil
}
