package proxy

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

// Attribute keys of jethook's own span attributes.
const (
	attrRoute     = attribute.Key("jethook.route")
	attrProvider  = attribute.Key("jethook.provider")
	attrVerified  = attribute.Key("jethook.verified")
	attrReason    = attribute.Key("jethook.rejected")
	attrEventID   = attribute.Key("jethook.event_id")
	attrDuplicate = attribute.Key("jethook.duplicate")
	attrSequence  = attribute.Key("jethook.stream.sequence")
)

// startSpan starts the ingress span, a server span (HTTP server semantic
// conventions) that continues the sender's traceparent when it sent one,
// and returns r with the span in its context. Only the method, path and
// addresses go in: never the query (it may carry a token), a header, or
// the body.
func (h *Handler) startSpan(r *http.Request) (*http.Request, trace.Span) {
	ctx := telemetry.Extract(r.Context(), r.Header)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	ctx, span := h.Tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			semconv.HTTPRequestMethodKey.String(r.Method),
			semconv.URLPath(r.URL.Path),
			semconv.URLScheme(scheme),
			semconv.ClientAddress(r.RemoteAddr),
		))
	return r.WithContext(ctx), span
}

// spanRoute names the ingress span after the route it matched.
func (h *Handler) spanRoute(r *http.Request, rt *route) {
	if h.Tracer == nil {
		return
	}
	span := trace.SpanFromContext(r.Context())
	span.SetName(r.Method + " " + rt.Path)
	prov := rt.Provider
	if prov == "" {
		prov = "none"
	}
	span.SetAttributes(semconv.HTTPRoute(rt.Path), attrRoute.String(rt.Name), attrProvider.String(prov))
}

// spanVerified records that the request passed its provider's check.
func (h *Handler) spanVerified(r *http.Request) {
	if h.Tracer == nil {
		return
	}
	trace.SpanFromContext(r.Context()).SetAttributes(attrVerified.Bool(true))
}

// spanStored records what the store made of the webhook, and the trace
// context every attempt will continue.
func (h *Handler) spanStored(r *http.Request, env *store.Envelope, stored store.Stored) {
	if h.Tracer == nil {
		return
	}
	trace.SpanFromContext(r.Context()).SetAttributes(
		attrEventID.String(env.EventID),
		attrDuplicate.Bool(stored.Duplicate),
		attrSequence.Int64(int64(stored.Seq)),
		semconv.HTTPResponseStatusCode(http.StatusOK),
	)
}

// spanAnswered records an answer other than 200 and its reason; a 5xx
// marks the span as an error (HTTP server semantic conventions), a
// refused signature is recorded as not verified.
func (h *Handler) spanAnswered(r *http.Request, status int, reason string) {
	if h.Tracer == nil {
		return
	}
	span := trace.SpanFromContext(r.Context())
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if reason != "" {
		span.SetAttributes(attrReason.String(reason))
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		span.SetAttributes(attrVerified.Bool(false))
	}
	if status >= 500 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, reason)
	}
}
