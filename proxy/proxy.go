// Package proxy is jethook's ingress: an http.Handler that routes a webhook
// by path, enforces the method and body limits, verifies the provider's
// signature, answers provider handshakes, and answers 200 only after the
// store has acknowledged the payload. It never talks to the backend.
package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

// Handler is the public webhook endpoint. Create it with New; swap its
// routes at run time with Reload.
type Handler struct {
	// Store persists accepted webhooks.
	Store *store.Store
	// Logger gets rejected and failed requests (never bodies or secrets).
	Logger *slog.Logger
	// Now stamps the received time; nil is time.Now.
	Now func() time.Time
	// RetryAfter is what a 503 asks the provider to wait (default 5s).
	RetryAfter time.Duration
	// Metrics counts received, rejected and stored webhooks; nil counts
	// nothing.
	Metrics *metrics.Metrics
	// MaxInFlightBytes bounds the request bodies held in memory at once,
	// across all requests, so that no number of requests can exhaust
	// memory: a body holds only what it has sent (see firstRead). A
	// request that finds no room waits up to a second for others to end,
	// then gets 503 overloaded with Retry-After, never an out-of-memory
	// crash. It must hold every route's max_body. 0 is InFlightBytes of
	// the Go memory limit when the first request arrives.
	MaxInFlightBytes int64
	// TrustedProxies are the load balancers in front: from a client in one
	// of them, X-Forwarded-Proto and X-Forwarded-Host name the scheme and
	// host the provider called, and the backend gets them as they came.
	// From any other client jethook's own view replaces them (vouch).
	TrustedProxies []netip.Prefix
	// PublicHost is the host (and port) providers call jethook at; the
	// backend gets it as X-Forwarded-Host unless a trusted proxy names
	// another. Empty, only a trusted proxy names one.
	PublicHost string
	// Tracer, when not nil, makes an ingress span of each request that
	// continues the sender's traceparent, and stores its trace context
	// with the webhook (package telemetry). Nil traces nothing, at no cost.
	Tracer trace.Tracer

	routes   atomic.Pointer[map[string]*route]
	once     sync.Once
	inflight *budget
}

type route struct {
	policy.Route
	verifier provider.Provider
	span     routeSpan // trace.go
}

// New returns a handler serving cfg's routes.
func New(cfg *policy.Config, st *store.Store, log *slog.Logger) (*Handler, error) {
	h := &Handler{Store: st, Logger: log}
	if h.Logger == nil {
		h.Logger = slog.New(slog.DiscardHandler)
	}
	if err := h.Reload(cfg); err != nil {
		return nil, err
	}
	return h, nil
}

// Reload replaces the routes atomically; requests in flight finish on the
// routes they started with.
func (h *Handler) Reload(cfg *policy.Config) error {
	table := make(map[string]*route, len(cfg.Routes))
	for _, r := range cfg.Routes {
		c := r.ProviderConfig()
		c.Now = h.Now
		v, err := provider.New(c)
		if err != nil {
			return fmt.Errorf("route %q: %w", r.Name, err)
		}
		table[r.Path] = &route{Route: r, verifier: v, span: newRouteSpan(r)}
	}
	h.routes.Store(&table)
	return nil
}

// maxEventID bounds a provider-supplied event id; a longer one is hashed.
const maxEventID = 200

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := (*h.routes.Load())[r.URL.Path]
	// ctx is r's context, with the ingress span when tracing is on: kept
	// beside r rather than put in a copy of it (r.WithContext), which
	// would cost a request's allocation.
	ctx := r.Context()
	if h.Tracer != nil {
		var span trace.Span
		ctx, span = h.startSpan(ctx, r, rt)
		defer span.End()
	}
	if rt == nil {
		h.reject(ctx, w, r, nil, http.StatusNotFound, "no_route", "no webhook route at this path")
		return
	}
	h.Metrics.Received(rt.Name)
	if !slices.Contains(rt.Methods, r.Method) {
		w.Header().Set("Allow", strings.Join(rt.Methods, ", "))
		h.reject(ctx, w, r, rt, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" not allowed on this route")
		return
	}
	if len(rt.AllowSources) > 0 && !h.allowedSource(r, rt.AllowSources) {
		// Before the body is read: a stranger costs a header parse.
		h.reject(ctx, w, r, rt, http.StatusForbidden, "source_not_allowed", "this route takes webhooks only from its provider's addresses")
		return
	}
	if r.ContentLength > rt.MaxBody {
		h.reject(ctx, w, r, rt, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over the route's limit of %d bytes", rt.MaxBody))
		return
	}
	h.once.Do(h.newBudget)
	body, err := h.inflight.read(ctx, http.MaxBytesReader(w, r.Body, rt.MaxBody), r.ContentLength, rt.MaxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			h.reject(ctx, w, r, rt, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over the route's limit of %d bytes", rt.MaxBody))
		case errors.Is(err, errOverBudget):
			// The rest of the body is read, into no buffer, before the
			// answer: answered in the middle of its upload, the sender
			// would see the connection closed under it half a second
			// later (net/http's wait for it to read the answer) if it is
			// slow to look, and never read the answer.
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, rt.MaxBody))
			w.Header().Set("Retry-After", fmt.Sprint(int(h.retryAfter().Seconds())))
			h.reject(ctx, w, r, rt, http.StatusServiceUnavailable, "overloaded", "too many request bodies in memory; retry later")
		default:
			h.reject(ctx, w, r, rt, http.StatusBadRequest, "body_unreadable", "request body could not be read")
		}
		return
	}
	defer h.inflight.put(cap(body))
	preq := &provider.Request{Method: r.Method, URL: r.URL, Header: r.Header, Body: body}
	if err := rt.verifier.Verify(preq); err != nil {
		status, reason, detail := http.StatusUnauthorized, "bad_signature", err.Error()
		var pe *provider.Error
		if errors.As(err, &pe) {
			reason, detail = pe.Reason, pe.Detail
			if pe.Status != 0 {
				status = pe.Status
			}
		}
		h.reject(ctx, w, r, rt, status, reason, "webhook not verified: "+detail)
		return
	}
	if status, ctype, resp, ok := rt.verifier.Handshake(preq); ok {
		h.spanAnswered(ctx, r, rt, status, "handshake")
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(status)
		_, _ = w.Write(resp)
		return
	}
	env := &store.Envelope{
		Route:      rt.Name,
		EventID:    eventID(rt.Name, rt.verifier.EventID(preq), body),
		Method:     r.Method,
		Host:       r.Host,
		Proto:      "http",
		RequestURI: r.URL.RequestURI(),
		RemoteAddr: r.RemoteAddr,
		ReceivedAt: h.now(),
		Header:     r.Header,
		Body:       body,
		// Checked once here, so that searches and filters reading this
		// webhook need not check it again.
		JSON: filter.IsJSON(body),
	}
	if d := rt.verifier.SignedDigest(preq); d != "" {
		// The event id is not signed: a captured webhook sent again
		// under a new id is still a duplicate of what was signed.
		env.SignedKey = "signed:" + d
	}
	if r.TLS != nil {
		env.Proto = "https"
	}
	h.vouch(r, env)
	if h.Tracer != nil {
		tc := telemetry.Store(ctx)
		env.Traceparent, env.Tracestate = tc.Traceparent, tc.Tracestate
	}
	start := time.Now()
	stored, err := h.Store.Publish(ctx, env)
	h.Metrics.Published(rt.Name, time.Since(start), stored.Duplicate, err, trace.SpanContextFromContext(ctx))
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			h.spanUnanswered(ctx, r, rt)
			return // the provider hung up; it will retry on its own
		}
		// A store that refuses writes says so itself, once (readiness,
		// jethook_store_refusing, alerts): a line per webhook would flood
		// the log for as long as it lasts.
		level := slog.LevelError
		if _, refusing := errors.AsType[*store.NotReadyError](err); refusing {
			level = slog.LevelDebug
		}
		h.Logger.Log(ctx, level, "store did not take the webhook", "route", rt.Name, "event_id", env.EventID, "err", err)
		w.Header().Set("Retry-After", fmt.Sprint(int(h.retryAfter().Seconds())))
		h.reject(ctx, w, r, rt, http.StatusServiceUnavailable, "store_unavailable", "the webhook was not stored; retry later")
		return
	}
	h.spanStored(ctx, r, rt, env, stored)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(acceptedJSON(env.EventID, stored.Duplicate))
}

// trusted reports whether remote (host:port) is in TrustedProxies.
func (h *Handler) trusted(remote string) bool {
	if len(h.TrustedProxies) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	return h.trustedAddr(ap.Addr().Unmap())
}

// trustedAddr reports whether ip is in TrustedProxies.
func (h *Handler) trustedAddr(ip netip.Addr) bool {
	for _, p := range h.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forwarded returns the scheme and host the trusted proxy in front says
// the provider called: the last entry of X-Forwarded-Proto and of
// X-Forwarded-Host, the one that proxy wrote (a proxy that appends puts its
// own after what the client sent). A missing or malformed value keeps proto
// or host.
func forwarded(hdr http.Header, proto, host string) (string, string) {
	last := func(name string) string {
		vs := hdr.Values(name)
		if len(vs) == 0 {
			return ""
		}
		v := vs[len(vs)-1]
		if i := strings.LastIndexByte(v, ','); i >= 0 {
			v = v[i+1:]
		}
		return strings.TrimSpace(v)
	}
	switch p := strings.ToLower(last("X-Forwarded-Proto")); p {
	case "http", "https":
		proto = p
	}
	if fh := last("X-Forwarded-Host"); fh != "" && !strings.ContainsFunc(fh, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		host = fh
	}
	return proto, host
}

// acceptedJSON is the 200 answer, {"id":"…","duplicate":false}: the event
// id jethook stored the webhook under, and whether it already had it. It
// is built by hand because it runs once per webhook; the id is printable
// ASCII (see eventID) and only '"' and '\' need escaping.
func acceptedJSON(id string, duplicate bool) []byte {
	b := make([]byte, 0, len(id)+40)
	b = append(b, `{"id":"`...)
	for i := 0; i < len(id); i++ {
		if id[i] == '"' || id[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, id[i])
	}
	b = append(b, `","duplicate":`...)
	b = strconv.AppendBool(b, duplicate)
	return append(b, "}\n"...)
}

// eventID is the provider's id when it is usable as a Nats-Msg-Id, else a
// SHA-256 of route and body, so an id-less redelivery still dedups.
func eventID(route, id string, body []byte) string {
	if id != "" && len(id) <= maxEventID && printableASCII(id) {
		return id
	}
	sum := sha256.New()
	sum.Write([]byte(route))
	sum.Write([]byte{0})
	if id != "" {
		sum.Write([]byte(id))
	} else {
		sum.Write(body)
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// reject answers r with status and msg; ctx is r's, with its ingress
// span.
func (h *Handler) reject(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *route, status int, reason, msg string) {
	name := ""
	if rt != nil {
		name = rt.Name
	}
	// 503s are counted (jethook_rejected_total) and have their own line
	// where it helps (store_unavailable above); others at 5xx and 401 are
	// worth a look.
	level := slog.LevelDebug
	if status == http.StatusUnauthorized || status >= 500 && status != http.StatusServiceUnavailable {
		level = slog.LevelWarn
	}
	h.Logger.Log(ctx, level, "webhook rejected", "route", name, "status", status, "reason", reason, "remote", r.RemoteAddr)
	h.Metrics.Rejected(name, reason)
	h.spanAnswered(ctx, r, rt, status, reason)
	writeJSON(w, status, rejected{Error: reason, Message: msg})
}

// rejected is every error answer: a stable reason and a sentence.
type rejected struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func (h *Handler) newBudget() {
	size := h.MaxInFlightBytes
	if size <= 0 {
		size = InFlightBytes(debug.SetMemoryLimit(-1))
	}
	h.inflight = newBudget(size)
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) retryAfter() time.Duration {
	if h.RetryAfter > 0 {
		return h.RetryAfter
	}
	return 5 * time.Second
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
