package telemetry

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// requestClient is an otlptrace.Client that keeps, instead of sending,
// each request as the bytes a client would send.
type requestClient struct {
	mu   sync.Mutex
	sent [][]byte
}

func (c *requestClient) Start(context.Context) error { return nil }
func (c *requestClient) Stop(context.Context) error  { return nil }

func (c *requestClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	raw, err := proto.Marshal(&collector.ExportTraceServiceRequest{ResourceSpans: rss})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.sent = append(c.sent, raw)
	c.mu.Unlock()
	return nil
}

// requests decodes the requests c was given, each in one order (the SDK's
// exporter groups spans through maps), as a collector would read them.
func (c *requestClient) requests(t *testing.T) []*collector.ExportTraceServiceRequest {
	t.Helper()
	var out []*collector.ExportTraceServiceRequest
	for _, raw := range c.sent {
		var req collector.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(req.ResourceSpans, func(a, b *tracepb.ResourceSpans) int {
			return cmp.Compare(prototext.Format(a.Resource), prototext.Format(b.Resource))
		})
		for _, rs := range req.ResourceSpans {
			slices.SortFunc(rs.ScopeSpans, func(a, b *tracepb.ScopeSpans) int {
				return cmp.Compare(a.GetScope().GetName(), b.GetScope().GetName())
			})
		}
		out = append(out, &req)
	}
	return out
}

// spanBatches are spans with every kind of content an OTLP span can
// carry, over two resources and three scopes, in two exports: the second
// smaller, so that what the exporter reuses from the first must not show.
func spanBatches() [][]sdktrace.ReadOnlySpan {
	res := resource.NewSchemaless(attribute.String("service.name", "jethook"), attribute.Int("n", 2))
	other := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.40.0", attribute.String("service.name", "other"))
	proxy := instrumentation.Scope{Name: "github.com/jethook/jethook/proxy", Version: "v1"}
	fwd := instrumentation.Scope{Name: "github.com/jethook/jethook/forward", SchemaURL: "https://opentelemetry.io/schemas/1.40.0",
		Attributes: attribute.NewSet(attribute.Bool("scoped", true))}
	ts, err := trace.ParseTraceState("vendor=abc,other=1")
	if err != nil {
		panic(err)
	}
	sc := func(tid, sid byte, flags trace.TraceFlags, remote bool, state trace.TraceState) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{tid, 1, 2, 3}, SpanID: trace.SpanID{sid, 9}, TraceFlags: flags, TraceState: state, Remote: remote,
		})
	}
	start := time.Date(2026, 12, 6, 1, 0, 0, 123456789, time.UTC)
	long := strings.Repeat("x", 20000) // a length of three varint bytes
	stubs := []tracetest.SpanStub{{
		Name:        "POST /hooks/shop",
		SpanContext: sc(1, 1, trace.FlagsSampled, false, ts),
		Parent:      sc(1, 7, trace.FlagsSampled, true, ts),
		SpanKind:    trace.SpanKindServer,
		StartTime:   start, EndTime: start.Add(3 * time.Millisecond),
		Attributes: []attribute.KeyValue{
			attribute.String("s", "value"), attribute.String("empty", ""), attribute.String("long", long),
			attribute.Bool("t", true), attribute.Bool("f", false),
			attribute.Int64("i", -42), attribute.Int64("zero", 0), attribute.Float64("d", 2.5),
			attribute.StringSlice("ss", []string{"a", "", "c"}), attribute.BoolSlice("bs", []bool{true, false}),
			attribute.Int64Slice("is", []int64{1, -1}), attribute.Float64Slice("ds", []float64{0, 1.5}),
			attribute.StringSlice("none", nil), {Key: "unset"},
		},
		Status:            sdktrace.Status{Code: codes.Ok},
		DroppedAttributes: 3,
		Resource:          res, InstrumentationScope: proxy,
	}, {
		Name:        "POST",
		SpanContext: sc(1, 2, trace.FlagsSampled|trace.FlagsRandom, false, trace.TraceState{}),
		Parent:      sc(1, 1, trace.FlagsSampled, false, trace.TraceState{}),
		SpanKind:    trace.SpanKindClient,
		StartTime:   start.Add(time.Second), EndTime: start.Add(2 * time.Second),
		Attributes: []attribute.KeyValue{attribute.Int("jethook.attempt", 2)},
		Events: []sdktrace.Event{
			{Name: "exception", Time: start.Add(1500 * time.Millisecond), Attributes: []attribute.KeyValue{attribute.String("exception.message", long)}, DroppedAttributeCount: 1},
			{Name: "bare"},
		},
		Links: []sdktrace.Link{
			{SpanContext: sc(5, 5, trace.FlagsSampled, true, ts), Attributes: []attribute.KeyValue{attribute.String("why", "replay")}, DroppedAttributeCount: 2},
			{SpanContext: sc(6, 6, 0, false, trace.TraceState{})},
		},
		Status:        sdktrace.Status{Code: codes.Error, Description: "server error"},
		DroppedEvents: 4, DroppedLinks: 5,
		Resource: res, InstrumentationScope: fwd,
	}, {
		Name:        "internal",
		SpanContext: sc(2, 3, 0, false, trace.TraceState{}),
		SpanKind:    trace.SpanKindInternal,
		StartTime:   start, EndTime: start,
		Resource: other, InstrumentationScope: instrumentation.Scope{},
	}, {
		Name:        "producer",
		SpanContext: sc(2, 4, trace.FlagsSampled, false, trace.TraceState{}),
		SpanKind:    trace.SpanKindProducer,
		Resource:    res, InstrumentationScope: proxy,
	}}
	first := tracetest.SpanStubs(stubs).Snapshots()
	second := tracetest.SpanStubs{stubs[3], stubs[1]}.Snapshots()
	return [][]sdktrace.ReadOnlySpan{first, second}
}

// jethook's exporter hands the client requests that encode, byte for
// byte as a collector decodes them, what the SDK's OTLP exporter sends
// for the same spans, export after export.
func TestTheExporterSendsWhatTheSDKsExporterSends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var sdkClient, ourClient requestClient
	sdkExp, err := otlptrace.New(ctx, &sdkClient)
	if err != nil {
		t.Fatal(err)
	}
	ourExp, err := newExporter(ctx, &ourClient)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range spanBatches() {
		if err := sdkExp.ExportSpans(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if err := ourExp.ExportSpans(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	want, got := sdkClient.requests(t), ourClient.requests(t)
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("request %d:\n%s\nwant:\n%s", i, prototext.Format(got[i]), prototext.Format(want[i]))
		}
	}
	if err := ourExp.ExportSpans(ctx, nil); err != nil || len(ourClient.sent) != len(want) {
		t.Errorf("exporting no span: %v, %d requests; want no request", err, len(ourClient.sent)-len(want))
	}
}

// BenchmarkExport measures the encoding of an export of 512 ingress-like
// spans, the batch processor's default batch, by the SDK's exporter and
// by jethook's, each handing its request to a client that encodes it.
func BenchmarkExport(b *testing.B) {
	ctx := context.Background()
	start := time.Now()
	stub := tracetest.SpanStub{
		Name: "POST /hooks/{route}",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled,
		}),
		SpanKind:  trace.SpanKindServer,
		StartTime: start, EndTime: start.Add(time.Millisecond),
		Attributes: []attribute.KeyValue{
			attribute.String("http.request.method", "POST"), attribute.String("http.route", "/hooks/shop"),
			attribute.String("url.scheme", "http"), attribute.String("server.address", "127.0.0.1"),
			attribute.Int("server.port", 8080), attribute.String("jethook.route", "shop"),
			attribute.String("jethook.provider", "stripe"), attribute.Bool("jethook.verified", true),
			attribute.String("jethook.event_id", "evt_1NG8Du2eZvKYlo2CXr3T1lQk"), attribute.Int("jethook.sequence", 123456),
			attribute.Int("http.response.status_code", 202),
		},
		Resource:             resource.NewSchemaless(attribute.String("service.name", "jethook")),
		InstrumentationScope: instrumentation.Scope{Name: "github.com/jethook/jethook/proxy"},
	}.Snapshot()
	batch := make([]sdktrace.ReadOnlySpan, 512)
	for i := range batch {
		batch[i] = stub
	}
	for _, bc := range []struct {
		name string
		exp  func(otlptrace.Client) (sdktrace.SpanExporter, error)
	}{
		{"sdk", func(c otlptrace.Client) (sdktrace.SpanExporter, error) { return otlptrace.New(ctx, c) }},
		{"jethook", func(c otlptrace.Client) (sdktrace.SpanExporter, error) { return newExporter(ctx, c) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			exp, err := bc.exp(discardClient{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := exp.ExportSpans(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// discardClient encodes each request as a client would, and drops it.
type discardClient struct{}

func (discardClient) Start(context.Context) error { return nil }
func (discardClient) Stop(context.Context) error  { return nil }

func (discardClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	_, err := proto.Marshal(&collector.ExportTraceServiceRequest{ResourceSpans: rss})
	return err
}
