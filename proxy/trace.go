package proxy

import (
	"net"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

// Attribute keys of jethook's own span attributes.
const (
	attrProvider  = attribute.Key("jethook.provider")
	attrVerified  = attribute.Key("jethook.verified")
	attrReason    = attribute.Key("jethook.rejected")
	attrDuplicate = attribute.Key("jethook.duplicate")
	attrSequence  = attribute.Key("jethook.stream.sequence")
)

// routeSpan is what the ingress spans of one route share, made once per
// route rather than once per request: their names by method and their
// attributes.
type routeSpan struct {
	names    map[string]string // "POST /hooks/shop", by method
	attrs    []attribute.KeyValue
	verifies bool // the route has a provider, whose check a stored webhook passed
}

func newRouteSpan(r policy.Route) routeSpan {
	names := make(map[string]string, len(r.Methods))
	for _, m := range r.Methods {
		names[m] = m + " " + r.Path
	}
	prov := r.Provider
	if prov == "" {
		prov = provider.NameNone
	}
	// Routes match whole paths: url.path is http.route, and said once.
	return routeSpan{names: names, attrs: []attribute.KeyValue{
		semconv.HTTPRoute(r.Path), telemetry.AttrRoute.String(r.Name), attrProvider.String(prov),
	}, verifies: prov != provider.NameNone}
}

// serverSpan is the option of every ingress span, made once.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// startSpan starts the ingress span, a server span (HTTP server semantic
// conventions) named after the route rt (nil: no route at this path) that
// continues the sender's traceparent when it sent one, and returns r with
// the span in its context. Only the method, path, route and addresses go
// in: never the query (it may carry a token), a header, or the body.
func (h *Handler) startSpan(r *http.Request, rt *route) (*http.Request, trace.Span) {
	ctx := telemetry.Extract(r.Context(), r.Header)
	name := r.Method
	if rt != nil {
		if n, ok := rt.span.names[r.Method]; ok {
			name = n
		} else {
			name += " " + rt.Path
		}
	}
	ctx, span := h.Tracer.Start(ctx, name, serverSpan...)
	if span.IsRecording() {
		// Set on the span rather than passed to Start, which would copy
		// them into its options first; the samplers of
		// OTEL_TRACES_SAMPLER decide without attributes.
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		attrs := make([]attribute.KeyValue, 0, 6)
		attrs = append(attrs,
			semconv.HTTPRequestMethodKey.String(r.Method),
			semconv.URLScheme(scheme),
			semconv.ClientAddress(clientAddress(r.RemoteAddr)))
		if rt != nil {
			attrs = append(attrs, rt.span.attrs...)
		} else {
			attrs = append(attrs, semconv.URLPath(r.URL.Path))
		}
		span.SetAttributes(attrs...)
	}
	return r.WithContext(ctx), span
}

// clientAddress is the host of a request's RemoteAddr, without the port
// (client.address in the semantic conventions).
func clientAddress(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// spanStored records what the store made of the webhook and, on a route
// with a provider, that it passed the provider's check.
func (h *Handler) spanStored(r *http.Request, rt *route, env *store.Envelope, stored store.Stored) {
	if h.Tracer == nil {
		return
	}
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	if rt.span.verifies {
		attrs = append(attrs, attrVerified.Bool(true))
	}
	attrs = append(attrs,
		telemetry.AttrEventID.String(env.EventID),
		attrSequence.Int64(int64(stored.Seq)),
		semconv.HTTPResponseStatusCode(http.StatusOK))
	if stored.Duplicate {
		attrs = append(attrs, attrDuplicate.Bool(true)) // a new webhook goes without
	}
	span.SetAttributes(attrs...)
}

// spanAnswered records an answer other than 200 and its reason; a 5xx
// marks the span as an error (HTTP server semantic conventions), a
// signature refused on a route rt with a provider is recorded as not
// verified.
func (h *Handler) spanAnswered(r *http.Request, rt *route, status int, reason string) {
	if h.Tracer == nil {
		return
	}
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, semconv.HTTPResponseStatusCode(status), attrReason.String(reason))
	if rt != nil && rt.span.verifies && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
		attrs = append(attrs, attrVerified.Bool(false))
	}
	if status >= 500 {
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, reason)
	}
	span.SetAttributes(attrs...)
}
