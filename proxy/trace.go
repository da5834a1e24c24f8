package proxy

import (
	"context"
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
// continues the sender's traceparent when it sent one, and returns ctx,
// r's context, with the span. Its attributes are set once, when the answer
// is known (setSpan).
func (h *Handler) startSpan(ctx context.Context, r *http.Request, rt *route) (context.Context, trace.Span) {
	ctx = telemetry.Extract(ctx, r.Header)
	name := r.Method
	if rt != nil {
		if n, ok := rt.span.names[r.Method]; ok {
			name = n
		} else {
			name += " " + rt.Path
		}
	}
	return h.Tracer.Start(ctx, name, serverSpan...)
}

// setSpan sets the attributes of r's ingress span, ctx's, if it records,
// once the answer is known (telemetry.SetAttributes): the request's
// (requestAttrs) and then what came of it, those add appends.
func (h *Handler) setSpan(ctx context.Context, r *http.Request, rt *route, add func([]attribute.KeyValue) []attribute.KeyValue) {
	if h.Tracer == nil {
		return
	}
	telemetry.SetAttributes(trace.SpanFromContext(ctx), func(attrs []attribute.KeyValue) []attribute.KeyValue {
		return add(requestAttrs(attrs, r, rt))
	})
}

// requestAttrs appends what the ingress span says of request r on route
// rt: only the method and the route or path, never the query (it may
// carry a token), a header, or the body. The scheme and the sender's
// address (url.scheme, client.address) are left out: with them a stored
// webhook's span would pass eight attributes, past which the SDK ends
// each span with a map of its attributes (three allocations) to drop
// duplicate keys.
func requestAttrs(attrs []attribute.KeyValue, r *http.Request, rt *route) []attribute.KeyValue {
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(r.Method))
	if rt == nil {
		return append(attrs, semconv.URLPath(r.URL.Path))
	}
	return append(attrs, rt.span.attrs...)
}

// spanStored records what the store made of the webhook and, on a route
// with a provider, that it passed the provider's check.
func (h *Handler) spanStored(ctx context.Context, r *http.Request, rt *route, env *store.Envelope, stored store.Stored) {
	h.setSpan(ctx, r, rt, func(attrs []attribute.KeyValue) []attribute.KeyValue {
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
		return attrs
	})
}

// spanAnswered records an answer other than 200 and its reason; a 5xx
// marks the span as an error (HTTP server semantic conventions), a
// signature refused on a route rt with a provider is recorded as not
// verified.
func (h *Handler) spanAnswered(ctx context.Context, r *http.Request, rt *route, status int, reason string) {
	h.setSpan(ctx, r, rt, func(attrs []attribute.KeyValue) []attribute.KeyValue {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status), attrReason.String(reason))
		if rt != nil && rt.span.verifies && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
			attrs = append(attrs, attrVerified.Bool(false))
		}
		if status >= 500 {
			attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			trace.SpanFromContext(ctx).SetStatus(codes.Error, reason)
		}
		return attrs
	})
}

// spanUnanswered records a request its sender hung up on before the
// answer: the request alone.
func (h *Handler) spanUnanswered(ctx context.Context, r *http.Request, rt *route) {
	h.setSpan(ctx, r, rt, func(attrs []attribute.KeyValue) []attribute.KeyValue { return attrs })
}
