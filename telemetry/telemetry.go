// Package telemetry turns jethook's OpenTelemetry traces on from the
// standard OTEL_* environment variables and carries a webhook's trace
// context from the ingress span, through the store, to every delivery
// attempt. With none of those variables set tracing is off: no provider is
// built and the ingress and the forwarder start no span at all. Spans go
// out over OTLP through the SDK's own clients, encoded by jethook
// (export.go).
package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Enabled reports whether the environment asks for traces: an
// OTEL_TRACES_EXPORTER other than "none", or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and
// OTEL_SDK_DISABLED not "true". The specification's default exporter is
// OTLP to localhost; jethook exports nothing unless told where to.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return true
	}
}

// Setup builds the tracer provider the environment asks for, or returns
// nil when tracing is off (Enabled). The exporter is chosen by
// OTEL_TRACES_EXPORTER ("otlp", the default once an endpoint is set, or
// "console") and OTEL_EXPORTER_OTLP_PROTOCOL ("http/protobuf", the
// default, or "grpc"); the sampler by OTEL_TRACES_SAMPLER; the service by
// OTEL_SERVICE_NAME (default "jethook") and OTEL_RESOURCE_ATTRIBUTES. The
// caller shuts the provider down, which sends the spans still batched.
func Setup(ctx context.Context, version string) (*sdktrace.TracerProvider, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	exp, err := spanExporter(ctx, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("jethook"), semconv.ServiceVersion(version)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	// The sampler is the SDK's reading of OTEL_TRACES_SAMPLER (default
	// parentbased_always_on); the batch processor reads OTEL_BSP_*.
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newBatcher(exp, os.Getenv)), sdktrace.WithResource(res)), nil
}

// spanExporter is the exporter OTEL_TRACES_EXPORTER names. For OTLP over
// http/protobuf or grpc it is jethook's (exporter), which sends with the
// SDK's own client for the protocol, configured by OTEL_EXPORTER_OTLP_*
// as the SDK's exporter would be; every other choice is autoexport's.
func spanExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	if exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp != "" && exp != "otlp" {
		return autoexport.NewSpanExporter(ctx)
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "http/protobuf":
		return newExporter(ctx, otlptracehttp.NewClient())
	case "grpc":
		return newExporter(ctx, otlptracegrpc.NewClient())
	}
	return autoexport.NewSpanExporter(ctx) // which names what it does not support
}

// SetAttributes sets on span, if it records, the attributes add appends
// to the slice it is given, in one call: the SDK copies what each call
// passes into the span's own slice, which grows on every call, and keeps
// nothing of the slice passed, which is reused. The samplers of
// OTEL_TRACES_SAMPLER decide without attributes, so a span needs none at
// its start and can have them all set when it ends.
func SetAttributes(span trace.Span, add func([]attribute.KeyValue) []attribute.KeyValue) {
	if !span.IsRecording() {
		return
	}
	p := attrPool.Get().(*[]attribute.KeyValue)
	attrs := add((*p)[:0])
	span.SetAttributes(attrs...)
	clear(attrs) // let the values go
	*p = attrs[:0]
	attrPool.Put(p)
}

// attrPool holds the slices SetAttributes builds attributes in.
var attrPool = sync.Pool{New: func() any { return new([]attribute.KeyValue) }}

// The span attributes the ingress, the forwarder, catch-up and the admin
// API share: the route and destination a span is about and the event it
// concerns.
const (
	AttrRoute       = attribute.Key("jethook.route")
	AttrDestination = attribute.Key("jethook.destination")
	AttrEventID     = attribute.Key("jethook.event_id")
)

// propagator is W3C Trace Context (traceparent and tracestate), the one
// format jethook reads from senders and writes to backends.
var propagator propagation.TraceContext

// Extract returns ctx with the trace context a request's traceparent and
// tracestate headers carry, if they carry a valid one.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, headerCarrier(h))
}

// headerCarrier reads traceparent and tracestate from a request's headers
// by their canonical names, which propagation.HeaderCarrier would make
// anew from the lower-case keys on every request.
type headerCarrier http.Header

func (h headerCarrier) Get(key string) string {
	var vs []string
	switch key {
	case "traceparent":
		vs = h["Traceparent"]
	case "tracestate":
		vs = h["Tracestate"]
	default:
		return http.Header(h).Get(key)
	}
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func (h headerCarrier) Set(key, value string) { http.Header(h).Set(key, value) }

func (h headerCarrier) Keys() []string { return propagation.HeaderCarrier(h).Keys() }

// Inject sets the traceparent and tracestate headers of h to ctx's span,
// replacing whatever the sender had put there; with no valid span in ctx it
// leaves h as it is. It writes what propagation.TraceContext would, under
// the headers' canonical names, without the carrier's work on each key.
func Inject(ctx context.Context, h http.Header) {
	s := Store(ctx)
	if s.Traceparent == "" {
		return
	}
	h["Traceparent"] = []string{s.Traceparent}
	if s.Tracestate == "" {
		delete(h, "Tracestate")
		return
	}
	h["Tracestate"] = []string{s.Tracestate}
}

// Stored is a trace context as jethook stores it with a webhook: the W3C
// traceparent and tracestate values of the ingress span.
type Stored struct {
	Traceparent string
	Tracestate  string
}

// Store returns ctx's span context in its stored form; empty when ctx has
// no valid span. It writes what propagation.TraceContext would inject, in
// one allocation rather than its three.
func Store(ctx context.Context) Stored {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return Stored{}
	}
	return Stored{Traceparent: traceparent(sc), Tracestate: sc.TraceState().String()}
}

// traceparent is sc's W3C traceparent header value, version 00:
// "00-" trace-id "-" parent-id "-" trace-flags, in lower-case hex, with
// the flags the specification defines, sampled and random, alone (W3C
// Trace Context §3.2), as propagation.TraceContext writes it.
func traceparent(sc trace.SpanContext) string {
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	flags := [1]byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))}
	hex.Encode(b[53:], flags[:])
	return string(b[:])
}

// Restore returns ctx with the stored trace context s as its remote parent,
// or ctx unchanged when s holds none (a webhook stored while tracing was
// off starts a trace of its own on each attempt). It reads what
// propagation.TraceContext would extract: a traceparent in the form
// Store writes (version 00, lower-case hex) directly, any other through
// the propagator.
func Restore(ctx context.Context, s Stored) context.Context {
	if s.Traceparent == "" {
		return ctx
	}
	sc, ok := parseStored(s)
	if !ok {
		return propagator.Extract(ctx, &carrier{s})
	}
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// parseStored reads s as the propagator would when its traceparent has
// the one form Store writes, "00-" trace-id "-" parent-id "-" flags; ok
// is false for any other form. Every attempt of a stored webhook reads
// its parent here, without the propagator's carrier (an allocation an
// attempt) and its reads through it.
func parseStored(s Stored) (_ trace.SpanContext, ok bool) {
	tp := s.Traceparent
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	var scc trace.SpanContextConfig
	var flags [1]byte
	if !unhex(scc.TraceID[:], tp[3:35]) || !unhex(scc.SpanID[:], tp[36:52]) || !unhex(flags[:], tp[53:]) {
		return trace.SpanContext{}, false
	}
	if flags[0] > byte(trace.FlagsSampled|trace.FlagsRandom) {
		return trace.SpanContext{}, true // version 00 defines no other flag: no parent
	}
	scc.TraceFlags = trace.TraceFlags(flags[0])
	// As the propagator does: a tracestate that does not parse is
	// dropped, and the traceparent kept (W3C Trace Context §3.3).
	scc.TraceState, _ = trace.ParseTraceState(s.Tracestate)
	scc.Remote = true
	return trace.NewSpanContext(scc), true
}

// unhex decodes src, lower-case hex as W3C Trace Context requires, into
// dst, which is half its length; false if src holds anything else.
func unhex(dst []byte, src string) bool {
	for i := range dst {
		hi, ok1 := fromHex(src[2*i])
		lo, ok2 := fromHex(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// carrier is a propagation.TextMapCarrier over a Stored, without a map,
// for Restore.
type carrier struct{ Stored }

func (c *carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.Traceparent
	case "tracestate":
		return c.Tracestate
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.Traceparent = value
	case "tracestate":
		c.Tracestate = value
	}
}

func (c *carrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// LogHandler wraps h so that a record logged with a context holding a
// valid span carries its trace_id and span_id, which tracing tools use to
// link a log line to its trace.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}

func (l logHandler) WithGroup(name string) slog.Handler {
	return logHandler{l.Handler.WithGroup(name)}
}

// LogAttrs are the trace_id and span_id of span for a logger's With, or
// nothing when span is nil or not valid.
func LogAttrs(span trace.Span) []any {
	if span == nil {
		return nil
	}
	sc := span.SpanContext()
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}
