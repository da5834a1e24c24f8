package forward

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/transform"
)

// destTransform is a destination's compiled transform and the kinds of
// error it has logged (at most len(transform.Kinds)).
type destTransform struct {
	s *transform.Script

	mu     sync.Mutex
	logged map[string]bool
}

// newTransform compiles d's transform for route r; nil when it has none.
// The pool keeps as many machines as the destination has requests in
// flight.
func newTransform(r policy.Route, d policy.Destination) (*destTransform, error) {
	t := d.Transform
	if t == nil {
		return nil, nil
	}
	l := t.Limits(r.MaxBody)
	l.Pool = d.Concurrency
	s, err := transform.Compile(t.Name, t.Script, t.Env, l)
	if err != nil {
		return nil, err
	}
	return &destTransform{s: s, logged: make(map[string]bool, len(transform.Kinds))}, nil
}

// firstOf reports whether kind is logged for the first time.
func (dt *destTransform) firstOf(kind string) bool {
	dt.mu.Lock()
	defer dt.mu.Unlock()
	if dt.logged[kind] {
		return false
	}
	dt.logged[kind] = true
	return true
}

// transformInput is the request the destination's transform starts from: req as
// newRequest built it, with the body of e (and whether the ingress found
// it to be JSON, so that the run does not check again), minus the Basic auth the
// destination URL's credentials made (a script sees no credential). Its
// headers are req's own, not a copy: a run never changes them, and req
// gets the run's headers after.
func transformInput(req *http.Request, e *store.Envelope) *transform.Request {
	h := req.Header
	if req.URL.User != nil && len(e.Header["Authorization"]) == 0 {
		h = h.Clone()
		h.Del("Authorization")
	}
	return &transform.Request{Method: req.Method, Path: req.URL.EscapedPath(), Query: req.URL.RawQuery, Header: h, Body: e.Body, JSON: e.JSON}
}

// transformed runs the destination's transform on attempt n's request and
// makes req into what it returned. It returns the body to send, and in
// o.Sent what the script made of the request; ok is false when there is
// nothing to send: o says why (Dropped, or a transform error).
// console, when not nil, gets what the script prints.
func (d *destination) transformed(req *http.Request, e *store.Envelope, n int, console io.Writer) (body []byte, o Outcome, ok bool) {
	in := transformInput(req, e)
	out, err := d.transform.s.Run(in, transform.Context{
		Route: d.route.Name, Destination: d.dest.Name, EventID: e.EventID, Attempt: n,
		ReceivedAt: e.ReceivedAt, Now: d.f.Now(), Console: console,
	})
	if err != nil {
		te := &transform.Error{Kind: transform.KindThrew, Msg: err.Error()}
		errors.As(err, &te)
		return nil, Outcome{Kind: Permanent, Err: te, Reason: "transform_error: " + te.Kind, Unsent: true, Transform: te}, false
	}
	if out == nil {
		return nil, Outcome{Unsent: true, Dropped: true}, false
	}
	auth := req.Header.Get("Authorization")
	fromURL := req.URL.User != nil && len(e.Header["Authorization"]) == 0
	h := out.Header
	for _, name := range hopHeaders {
		delete(h, name) // canonical already, as a run's headers are
	}
	// The backend dedups on these: they stay jethook's. A run that left
	// them as they came keeps them.
	setOne(h, "X-Webhook-Id", e.EventID)
	setOne(h, "X-Webhook-Attempt", strconv.Itoa(n))
	sent := d.transform.sent(in, out) // before the credentials the script never saw
	if fromURL && h.Get("Authorization") == "" {
		h.Set("Authorization", auth)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""}
	}
	req.Header = h
	req.Method = out.Method
	if p, err := url.PathUnescape(out.Path); err == nil {
		req.URL.Path, req.URL.RawPath = p, out.Path
	}
	req.URL.RawQuery = out.Query
	req.Body = io.NopCloser(bytes.NewReader(out.Body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out.Body)), nil }
	req.ContentLength = int64(len(out.Body))
	if len(out.Body) == 0 {
		req.Body, req.GetBody = http.NoBody, nil
	}
	return out.Body, Outcome{Sent: sent}, true
}

// setOne makes v the one value of header name in h, leaving a value that
// already is as it is.
func setOne(h http.Header, name, v string) {
	if vs := h[name]; len(vs) != 1 || vs[0] != v {
		h[name] = []string{v}
	}
}

// sentChanged holds the lists of Sent.Changed, one for each set of parts
// changed (bit i: part i of sentParts), made once: an attempt's record
// shares its list.
var sentChanged = func() (lists [1 << len(sentParts)][]string) {
	for set := range lists {
		for i, part := range sentParts {
			if set&(1<<i) != 0 {
				lists[set] = append(lists[set], part)
			}
		}
		lists[set] = slices.Clip(lists[set])
	}
	return lists
}()

// sentParts are the parts of a request Sent.Changed names, in its order.
var sentParts = [...]string{"method", "path", "query", "body"}

// sent describes out, the request the script made of in, for the attempt
// log: no payload, no header value. The digest and the header names are
// written into one string, which they share.
func (dt *destTransform) sent(in, out *transform.Request) *store.Sent {
	changed := 0
	for i, c := range [len(sentParts)]bool{
		in.Method != out.Method,
		in.Path != out.Path,
		in.Query != out.Query,
		!bytes.Equal(in.Body, out.Body),
	} {
		if c {
			changed |= 1 << i
		}
	}
	// The headers the script set, changed or removed, as out and in
	// name them (canonical).
	names := make([]string, 0, store.MaxSentHeaders)
	size := 0
	for name, vs := range out.Header {
		if !slices.Equal(in.Header[name], vs) {
			names, size = append(names, name), size+len(name)
		}
	}
	for name := range in.Header {
		if _, ok := out.Header[name]; !ok {
			names, size = append(names, name), size+len(name)
		}
	}
	sum := sha256.Sum256(out.Body)
	var b strings.Builder
	b.Grow(2*sha256.Size + size)
	var digest [2 * sha256.Size]byte
	hex.Encode(digest[:], sum[:])
	b.Write(digest[:])
	for _, name := range names {
		for i := 0; i < len(name); i++ {
			c := name[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
	}
	all := b.String()
	s := &store.Sent{Script: dt.s.Digest(), BodySHA256: all[:len(digest)], BodySize: len(out.Body), Changed: sentChanged[changed]}
	if len(names) == 0 {
		return s
	}
	s.Headers = make([]string, len(names))
	all = all[len(digest):]
	for i, name := range names {
		s.Headers[i], all = all[:len(name)], all[len(name):]
	}
	slices.Sort(s.Headers)
	s.Headers = slices.Clip(s.Headers[:min(len(s.Headers), store.MaxSentHeaders)])
	return s
}

// guardedTransform is transformed, under the crash guard (guard): a
// webhook that jethook died on MaxCrashes times while the transform ran is
// not transformed again but fails as a transform_error of kind crashed.
func (d *destination) guardedTransform(req *http.Request, e *store.Envelope, n int, seq uint64) (body []byte, o Outcome, ok bool) {
	end, crashes := d.guard(e, seq, n, "transforming")
	if crashes >= MaxCrashes {
		te := &transform.Error{Kind: transform.KindCrashed, Msg: crashedText(crashes, "transforming")}
		return nil, Outcome{Kind: Permanent, Err: te, Reason: "transform_error: " + te.Kind, Unsent: true, Transform: te}, false
	}
	defer end()
	return d.transformed(req, e, n, nil)
}

// dropped settles an event the transform returned null for as filtered:
// logged, counted, acked, and no failure of the destination's.
func (d *destination) dropped(ctx context.Context, h held, e *store.Envelope) {
	route, dest := d.route.Name, d.dest.Name
	d.f.Store.LogAttempt(store.Attempt{Time: d.f.Now(), Route: route, Destination: dest, EventID: e.EventID, Attempt: h.n,
		Outcome: store.OutcomeFiltered, Error: "the transform returned null"})
	d.f.Metrics.Filtered(route, dest)
	d.gate.refund()
	if d.log.Enabled(ctx, slog.LevelDebug) {
		d.eventLog(e, h.n).Debug("dropped by the transform")
	}
	if err := h.m.Ack(); err != nil {
		d.eventLog(e, h.n).Warn("ack failed; the event comes back and is transformed again", "err", err)
	}
}

// OutcomeTransformError is the attempt log's outcome of an attempt whose
// transform failed: nothing was sent.
const OutcomeTransformError = "transform_error"

// transformFailed dead-letters an event its destination's transform failed
// on, with reason transform_error; once the script is fixed, a replay
// delivers it. The first failure of each kind is logged, with the kind and
// the script position, never what the script threw (it may quote the
// payload); the attempt log and the dead letter keep the whole message.
func (d *destination) transformFailed(ctx context.Context, h held, e *store.Envelope, o Outcome) {
	route, dest := d.route.Name, d.dest.Name
	te := o.Transform
	d.f.Store.LogAttempt(store.Attempt{Time: d.f.Now(), Route: route, Destination: dest, EventID: e.EventID, Attempt: h.n,
		Outcome: OutcomeTransformError, Error: te.Error()})
	d.f.Metrics.TransformFailed(route, dest, te.Kind)
	log := d.eventLog(e, h.n)
	if d.transform.firstOf(te.Kind) {
		log.Warn("transform failed; the event is dead-lettered (replay it once the script is fixed); logged once per kind",
			"kind", te.Kind, "at", te.At, "script", d.transform.s.Name())
	}
	o.Err = errors.New(o.Reason)
	o.Detail = te.Error()
	d.deadLetter(ctx, h, e, o, OutcomeTransformError, log)
}
