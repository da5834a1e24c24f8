package forward

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

// Attribute keys of jethook's own span attributes.
const (
	attrAttempt     = attribute.Key("jethook.attempt")
	attrOutcome     = attribute.Key("jethook.outcome")
	attrReason      = attribute.Key("jethook.outcome_reason")
	attrNext        = attribute.Key("jethook.next_attempt_at")
	attrDLReason    = attribute.Key("jethook.dead_letter_reason")
	attrFilterError = attribute.Key("jethook.filter_error")
	attrScript      = attribute.Key("jethook.transform.script")
	attrChanged     = attribute.Key("jethook.transform.changed")
	attrHeaders     = attribute.Key("jethook.transform.headers")
)

// eventContext is ctx with e's stored trace context as its parent: every
// attempt of an event joins the trace of the ingress span that stored it.
func eventContext(ctx context.Context, e *store.Envelope) context.Context {
	return telemetry.Restore(ctx, telemetry.Stored{Traceparent: e.Traceparent, Tracestate: e.Tracestate})
}

// clientSpan is the option of every attempt span, made once.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// attemptAttrs are the attributes every attempt span to destination d of
// route r has, made once per destination: the route, the destination and
// its URL, redacted (it may carry a credential), with its host and port.
func attemptAttrs(r policy.Route, d policy.Destination) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.URLFull(policy.RedactURL(d.URL)),
		telemetry.AttrRoute.String(r.Name),
		telemetry.AttrDestination.String(d.Name),
	}
	if u, err := url.Parse(d.URL); err == nil {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		attrs = append(attrs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	}
	return attrs
}

// startAttempt starts an attempt's client span (HTTP client semantic
// conventions). Its attributes are set once, when the attempt ends
// (endAttempt).
func (d *destination) startAttempt(ctx context.Context, e *store.Envelope) (context.Context, trace.Span) {
	return d.f.Tracer.Start(eventContext(ctx, e), attemptMethod(e), clientSpan...)
}

// attemptMethod is the method an attempt of e sends.
func attemptMethod(e *store.Envelope) string {
	if e.Method == "" {
		return "POST"
	}
	return e.Method
}

// endAttempt records attempt n of e and what it came to, and ends its
// span: the destination, the method, the event and the attempt number;
// the status and the outcome; what the destination's transform decided
// (the script and the parts and header names it changed, never a value);
// and, when the event waits for another attempt, when that is due. The
// URL is the destination's, without the sender's query, which may carry
// a credential. The attributes are set in one call, at the end
// (telemetry.SetAttributes).
func (d *destination) endAttempt(span trace.Span, e *store.Envelope, n int, o Outcome, next time.Time) {
	telemetry.SetAttributes(span, func(attrs []attribute.KeyValue) []attribute.KeyValue {
		attrs = append(attrs, d.spanAttrs...)
		attrs = append(attrs,
			semconv.HTTPRequestMethodKey.String(attemptMethod(e)),
			telemetry.AttrEventID.String(e.EventID),
			attrAttempt.Int(n))
		if n > 1 {
			attrs = append(attrs, semconv.HTTPRequestResendCount(n-1))
		}
		switch kind := o.Kind.String(); {
		case o.Dropped:
			attrs = append(attrs, attrOutcome.String("dropped"), attrReason.String("the transform returned null"))
		case o.Reason == kind: // "delivered": the reason says nothing more
			attrs = append(attrs, attrOutcome.String(kind))
		default:
			attrs = append(attrs, attrOutcome.String(kind), attrReason.String(o.Reason))
		}
		if o.Sent != nil {
			attrs = append(attrs, attrScript.String(o.Sent.Script), attrChanged.StringSlice(o.Sent.Changed), attrHeaders.StringSlice(o.Sent.Headers))
		}
		if o.Status != 0 {
			attrs = append(attrs, semconv.HTTPResponseStatusCode(o.Status))
		}
		if !next.IsZero() {
			attrs = append(attrs, attrNext.String(next.UTC().Format(time.RFC3339Nano)))
		}
		if o.Kind != Delivered {
			attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(o)))
		}
		return attrs
	})
	if o.Kind != Delivered {
		span.SetStatus(codes.Error, o.Reason)
	}
	span.End()
}

// errorType is the semantic conventions' error.type of a failed attempt:
// the status code when the backend answered, else the kind of failure.
func errorType(o Outcome) string {
	if o.Status != 0 {
		return strconv.Itoa(o.Status)
	}
	if ne, ok := errors.AsType[net.Error](o.Err); ok && ne.Timeout() {
		return "timeout"
	}
	if o.Err != nil {
		return "_OTHER"
	}
	return o.Kind.String()
}

// traceDeadLetter records a stored dead letter as a span of the event's
// trace, with the reason and the attempts, never the body.
func (d *destination) traceDeadLetter(ctx context.Context, e *store.Envelope, n int, reason string, o Outcome) {
	if d.f.Tracer == nil {
		return
	}
	_, span := d.f.Tracer.Start(eventContext(ctx, e), "dead letter", trace.WithAttributes(
		telemetry.AttrRoute.String(d.route.Name),
		telemetry.AttrDestination.String(d.dest.Name),
		telemetry.AttrEventID.String(e.EventID),
		attrAttempt.Int(n),
		attrDLReason.String(reason),
		attrReason.String(o.Reason),
	))
	span.End()
}

// traceFiltered records, as a span of the event's trace, that the
// destination's filter did not match the event (or failed on it: kind
// names how), so it is acked without an attempt.
func (d *destination) traceFiltered(ctx context.Context, e *store.Envelope, kind string) {
	if d.f.Tracer == nil {
		return
	}
	attrs := []attribute.KeyValue{telemetry.AttrRoute.String(d.route.Name), telemetry.AttrDestination.String(d.dest.Name), telemetry.AttrEventID.String(e.EventID)}
	if kind != "" {
		attrs = append(attrs, attrFilterError.String(kind))
	}
	_, span := d.f.Tracer.Start(eventContext(ctx, e), "filtered", trace.WithAttributes(attrs...))
	span.End()
}
