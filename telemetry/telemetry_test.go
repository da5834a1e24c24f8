package telemetry_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/jethook/jethook/telemetry"
	"github.com/jethook/jethook/telemetry/otlptest"
)

func TestTracingIsOnOnlyWhenTheEnvironmentNamesWhereToExport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set is off", nil, false},
		{"a service name alone is off", map[string]string{"OTEL_SERVICE_NAME": "hooks"}, false},
		{"an OTLP endpoint is on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"a traces endpoint is on", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"an exporter named is on", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{"the none exporter is off", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{"a disabled SDK is off", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := telemetry.Enabled(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("Enabled = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSetupReturnsNoProviderWhenTracingIsOff(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	tp, err := telemetry.Setup(context.Background(), "v1.2.3")
	if err != nil || tp != nil {
		t.Fatalf("Setup = %v, %v; want no provider", tp, err)
	}
}

// The provider Setup builds from the OTEL_* variables exports over OTLP/HTTP,
// under the service name and resource attributes the environment gives.
func TestSetupExportsToTheEndpointTheEnvironmentNames(t *testing.T) {
	recv := otlptest.Start(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", "hooks-eu")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	tp, err := telemetry.Setup(context.Background(), "v1.2.3")
	if err != nil || tp == nil {
		t.Fatalf("Setup = %v, %v", tp, err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "one")
	span.End()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	spans := recv.Await(t, 5*time.Second, "the span", func(s []otlptest.Span) bool { return len(s) == 1 })
	if spans[0].Name != "one" || spans[0].Service != "hooks-eu" {
		t.Errorf("span %q of service %q, want one of hooks-eu", spans[0].Name, spans[0].Service)
	}
}

// Setup's OTLP exporters send with the SDK's own clients, so every
// OTEL_EXPORTER_OTLP_* setting holds: here the headers, over HTTP with
// gzip and over gRPC.
func TestSetupHonoursTheOTLPExporterSettings(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20t0ken,x-tenant=eu")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	// exportOne exports one span named name through the provider Setup
	// builds, and shuts it down, which sends it.
	exportOne := func(t *testing.T, name string) {
		t.Helper()
		tp, err := telemetry.Setup(context.Background(), "v1.2.3")
		if err != nil || tp == nil {
			t.Fatalf("Setup = %v, %v", tp, err)
		}
		_, span := tp.Tracer("test").Start(context.Background(), name, trace.WithAttributes(attribute.String("k", "v")))
		span.End()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("over HTTP, compressed", func(t *testing.T) {
		recv := otlptest.Start(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
		t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
		exportOne(t, "over http")
		spans := recv.Await(t, 5*time.Second, "the span", func(s []otlptest.Span) bool { return len(s) == 1 })
		if spans[0].Name != "over http" || spans[0].Attributes["k"] != "v" {
			t.Errorf("span %+v, want over http with k=v", spans[0])
		}
		h := recv.Header()
		if h.Get("Authorization") != "Bearer t0ken" || h.Get("X-Tenant") != "eu" || h.Get("Content-Encoding") != "gzip" {
			t.Errorf("request headers %v, want the configured ones and gzip", h)
		}
	})

	t.Run("over gRPC", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		recv := &grpcReceiver{}
		srv := grpc.NewServer()
		collector.RegisterTraceServiceServer(srv, recv)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(srv.Stop)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "")
		exportOne(t, "over grpc")
		recv.mu.Lock()
		defer recv.mu.Unlock()
		if len(recv.names) != 1 || recv.names[0] != "over grpc" || !slices.Equal(recv.md.Get("x-tenant"), []string{"eu"}) {
			t.Errorf("received spans %q with metadata %v, want one, over grpc, with x-tenant eu", recv.names, recv.md)
		}
	})
}

// grpcReceiver is an OTLP/gRPC trace service that keeps the names of the
// spans it receives and the metadata of the last request.
type grpcReceiver struct {
	collector.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
	md    metadata.MD
}

func (r *grpcReceiver) Export(ctx context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.md, _ = metadata.FromIncomingContext(ctx)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.names = append(r.names, s.GetName())
			}
		}
	}
	return &collector.ExportTraceServiceResponse{}, nil
}

func TestAStoredTraceContextRestoresTheSameParent(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "ingress")
	defer span.End()
	stored := telemetry.Store(ctx)
	if !strings.Contains(stored.Traceparent, span.SpanContext().TraceID().String()) {
		t.Fatalf("stored %q, want the trace id %s", stored.Traceparent, span.SpanContext().TraceID())
	}
	restored := trace.SpanContextFromContext(telemetry.Restore(context.Background(), stored))
	if restored.TraceID() != span.SpanContext().TraceID() || restored.SpanID() != span.SpanContext().SpanID() || !restored.IsRemote() {
		t.Errorf("restored %v, want the ingress span %v as a remote parent", restored, span.SpanContext())
	}
	if got := telemetry.Store(context.Background()); got != (telemetry.Stored{}) {
		t.Errorf("a context without a span stored %+v", got)
	}
	if ctx := context.Background(); telemetry.Restore(ctx, telemetry.Stored{}) != ctx {
		t.Error("an empty stored context changed ctx")
	}
}

// Restore reads every stored trace context as the W3C Trace Context
// propagator would, the form Store writes and any other, valid or not.
func TestRestoreReadsWhatThePropagatorWouldExtract(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, s := range []telemetry.Stored{
		{Traceparent: tp},
		{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"},
		{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04"},
		{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff"},
		{Traceparent: tp, Tracestate: "vendor=abc,other=1"},
		{Traceparent: tp, Tracestate: "not a tracestate"},
		{Traceparent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"},
		{Traceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"},
		{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g"},
		{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736x00f067aa0ba902b7-01"},
		{Traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future"},
		{Traceparent: "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{Traceparent: tp + "-extra"},
		{Traceparent: tp[:54]},
		{Traceparent: "garbage"},
	} {
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
			propagation.MapCarrier{"traceparent": s.Traceparent, "tracestate": s.Tracestate}))
		got := trace.SpanContextFromContext(telemetry.Restore(context.Background(), s))
		if !got.Equal(want) || got.IsRemote() != want.IsRemote() {
			t.Errorf("Restore(%+v) = %v, want the propagator's %v", s, got, want)
		}
	}
}

func TestInjectReplacesTheSendersTraceContext(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "attempt")
	defer span.End()
	h := http.Header{
		"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"Tracestate":  {"sender=stale"},
	}
	telemetry.Inject(ctx, h)
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if got := h.Values("Traceparent"); len(got) != 1 || got[0] != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	if got := h.Values("Tracestate"); len(got) != 0 {
		t.Errorf("the sender's tracestate stayed: %q", got)
	}
	state, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	parent := trace.ContextWithRemoteSpanContext(context.Background(), span.SpanContext().WithTraceState(state))
	ctx, child := tp.Tracer("test").Start(parent, "attempt")
	defer child.End()
	telemetry.Inject(ctx, h)
	if got := h.Values("Tracestate"); len(got) != 1 || got[0] != "vendor=abc" {
		t.Errorf("tracestate %q, want the span's vendor=abc", got)
	}
	kept := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	telemetry.Inject(context.Background(), kept)
	if kept.Get("Traceparent") == "" {
		t.Error("without a span, the sender's traceparent was dropped")
	}
}

func TestLogLinesCarryTheSpanOfTheirContext(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewTextHandler(&out, nil))).With("route", "shop")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "ingress")
	defer span.End()
	log.InfoContext(ctx, "stored")
	log.Info("no span")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	sc := span.SpanContext()
	if want := "trace_id=" + sc.TraceID().String() + " span_id=" + sc.SpanID().String(); !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "route=shop") {
		t.Errorf("line %q, want %q and the logger's attributes", lines[0], want)
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("a line without a span has a trace id: %q", lines[1])
	}
}

// Each documented exporter setting builds a provider; a protocol the Go
// SDK cannot speak is an error at startup, not silence.
func TestSetupTakesTheDocumentedExportersAndRefusesAnUnknownOne(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{"OTLP over gRPC", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true},
		{"OTLP over HTTP", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true},
		{"an unknown OTLP protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "udp"}, false},
		{"an unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "carrier-pigeon"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				t.Setenv(k, tc.env[k])
			}
			tp, err := telemetry.Setup(context.Background(), "v1.2.3")
			if (err == nil) != tc.ok || (tp != nil) != tc.ok {
				t.Fatalf("Setup = %v, %v; want ok %v", tp, err, tc.ok)
			}
			if tp != nil {
				_ = tp.Shutdown(context.Background())
			}
		})
	}
}

// Store writes the same traceparent and tracestate as the W3C Trace
// Context propagator would, sampled or not, with a tracestate or without.
func TestAStoredTraceContextIsWhatThePropagatorWrites(t *testing.T) {
	t.Parallel()
	state, err := trace.ParseTraceState("vendor=abc,other=1")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []trace.SpanContextConfig{
		{TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 15: 0x36}, SpanID: trace.SpanID{0x00, 0xf0, 7: 0xb7}, TraceFlags: trace.FlagsSampled},
		{TraceID: trace.TraceID{1, 15: 0xff}, SpanID: trace.SpanID{0xab, 7: 1}, TraceFlags: 0, TraceState: state},
		{TraceID: trace.TraceID{0xff, 15: 1}, SpanID: trace.SpanID{7: 0xfe}, TraceFlags: 0xff},
	} {
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(sc))
		h := http.Header{}
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
		want := telemetry.Stored{Traceparent: h.Get("Traceparent"), Tracestate: h.Get("Tracestate")}
		if got := telemetry.Store(ctx); got != want {
			t.Errorf("Store = %+v, want %+v", got, want)
		}
	}
}

// SetAttributes gives each recording span exactly what its caller
// appended, though the slice it appends to is reused from span to span,
// and asks nothing of a span that does not record.
func TestSetAttributesGivesEachSpanItsOwnAttributes(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	for i := range 3 {
		_, span := tp.Tracer("test").Start(context.Background(), "span")
		telemetry.SetAttributes(span, func(attrs []attribute.KeyValue) []attribute.KeyValue {
			for j := range 3 - i {
				attrs = append(attrs, attribute.Int(fmt.Sprint("k", j), i))
			}
			return attrs
		})
		span.End()
	}
	for i, sp := range rec.Ended() {
		got := sp.Attributes()
		if len(got) != 3-i {
			t.Errorf("span %d has %d attributes, want %d: %v", i, len(got), 3-i, got)
		}
		for _, kv := range got {
			if kv.Value.AsInt64() != int64(i) {
				t.Errorf("span %d: %s = %v, want %d", i, kv.Key, kv.Value.AsInt64(), i)
			}
		}
	}
	unsampled := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}))
	_, span := tp.Tracer("test").Start(unsampled, "not recorded")
	telemetry.SetAttributes(span, func(attrs []attribute.KeyValue) []attribute.KeyValue {
		t.Error("attributes were made for a span that does not record")
		return attrs
	})
	span.End()
}
