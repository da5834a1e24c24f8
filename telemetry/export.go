package telemetry

import (
	"context"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// exporter is an OTLP span exporter that sends with one of the SDK's own
// OTLP clients (otlptracehttp or otlptracegrpc, which read every
// OTEL_EXPORTER_OTLP_* setting: endpoint, headers, timeout, compression,
// TLS, retries) and differs from the SDK's exporter in one thing: it
// encodes each span to its OTLP protobuf bytes itself, straight from the
// SDK's ReadOnlySpan, instead of building a tree of protobuf objects (four
// or more allocations per attribute) for the client to encode. The client
// gets the usual []*tracepb.ResourceSpans, whose spans are empty messages
// carrying those bytes as their unknown fields, which protobuf writes out
// as they are: on the wire the request is the one the SDK's exporter
// sends. Spans, buffer and messages are reused from one export to the
// next; the clients keep nothing of a request once UploadTraces returns.
type exporter struct {
	client otlptrace.Client

	mu        sync.Mutex // one export at a time: they share buf and spans
	buf       []byte
	spans     []*tracepb.Span
	resources map[*resource.Resource]*resourcepb.Resource
	scopes    map[instrumentation.Scope]*commonpb.InstrumentationScope
	stopOnce  sync.Once
}

// newExporter starts client and returns an exporter sending with it.
func newExporter(ctx context.Context, client otlptrace.Client) (*exporter, error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return &exporter{
		client:    client,
		resources: make(map[*resource.Resource]*resourcepb.Resource),
		scopes:    make(map[instrumentation.Scope]*commonpb.InstrumentationScope),
	}, nil
}

// ExportSpans sends ss in one request, grouped by resource and
// instrumentation scope as OTLP requires.
func (x *exporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	rss := x.encode(ss)
	if len(rss) == 0 {
		return nil
	}
	if err := x.client.UploadTraces(ctx, rss); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown stops the client; the batch processor has exported what it
// held before it calls this.
func (x *exporter) Shutdown(ctx context.Context) error {
	var err error
	x.stopOnce.Do(func() { err = x.client.Stop(ctx) })
	return err
}

// encode returns ss as the ResourceSpans of one export request.
func (x *exporter) encode(ss []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type group struct {
		res   *resource.Resource
		scope instrumentation.Scope
		spans []int // indexes into ss
	}
	var groups []*group
	for i, s := range ss {
		if s == nil {
			continue
		}
		res, scope := s.Resource(), s.InstrumentationScope()
		var g *group
		for _, h := range groups {
			if h.res == res && h.scope == scope {
				g = h
				break
			}
		}
		if g == nil {
			g = &group{res: res, scope: scope}
			groups = append(groups, g)
		}
		g.spans = append(g.spans, i)
	}

	// Encode every span into buf first, then point the messages at it:
	// buf may move while it grows.
	x.buf = x.buf[:0]
	ends := make([]int, 0, len(ss))
	for _, g := range groups {
		for _, i := range g.spans {
			x.buf = appendSpan(x.buf, ss[i])
			ends = append(ends, len(x.buf))
		}
	}
	for len(x.spans) < len(ends) {
		x.spans = append(x.spans, new(tracepb.Span))
	}
	for i, end := range ends {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		x.spans[i].ProtoReflect().SetUnknown(protoreflect.RawFields(x.buf[start:end:end]))
	}

	var rss []*tracepb.ResourceSpans
	byRes := make(map[*resource.Resource]*tracepb.ResourceSpans)
	n := 0
	for _, g := range groups {
		rs := byRes[g.res]
		if rs == nil {
			rs = &tracepb.ResourceSpans{Resource: x.resource(g.res), SchemaUrl: g.res.SchemaURL()}
			byRes[g.res] = rs
			rss = append(rss, rs)
		}
		rs.ScopeSpans = append(rs.ScopeSpans, &tracepb.ScopeSpans{
			Scope:     x.scope(g.scope),
			Spans:     x.spans[n : n+len(g.spans) : n+len(g.spans)],
			SchemaUrl: g.scope.SchemaURL,
		})
		n += len(g.spans)
	}
	return rss
}

// resource is r's OTLP message, encoded once per resource.
func (x *exporter) resource(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return nil
	}
	if m, ok := x.resources[r]; ok {
		return m
	}
	var b []byte
	for iter := r.Iter(); iter.Next(); {
		b = appendKeyValue(b, 1, iter.Attribute())
	}
	m := new(resourcepb.Resource)
	m.ProtoReflect().SetUnknown(b)
	x.resources[r] = m
	return m
}

// scope is s's OTLP message, encoded once per instrumentation scope; nil
// for the empty scope.
func (x *exporter) scope(s instrumentation.Scope) *commonpb.InstrumentationScope {
	if s == (instrumentation.Scope{}) {
		return nil
	}
	if m, ok := x.scopes[s]; ok {
		return m
	}
	var b []byte
	b = appendString(b, 1, s.Name)
	b = appendString(b, 2, s.Version)
	for iter := s.Attributes.Iter(); iter.Next(); {
		b = appendKeyValue(b, 3, iter.Attribute())
	}
	m := new(commonpb.InstrumentationScope)
	m.ProtoReflect().SetUnknown(b)
	x.scopes[s] = m
	return m
}

// The encoders below append OTLP protobuf fields
// (opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto)
// as protobuf-go would marshal the messages the SDK's exporter builds:
// scalars at their zero value are left out, except inside a oneof.

// appendSpan appends the fields of s's Span message.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, 1, tid[:])
	b = appendBytes(b, 2, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, 4, psid[:])
	}
	b = appendString(b, 5, s.Name())
	b = appendVarint(b, 6, uint64(spanKind(s.SpanKind())))
	b = appendFixed64(b, 7, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, 8, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, 9, kv)
	}
	b = appendVarint(b, 10, uint64(clampUint32(s.DroppedAttributes())))
	for _, e := range s.Events() {
		var at int
		b, at = openMessage(b, 11)
		b = appendFixed64(b, 1, unixNano(e.Time.UnixNano()))
		b = appendString(b, 2, e.Name)
		for _, kv := range e.Attributes {
			b = appendKeyValue(b, 3, kv)
		}
		b = appendVarint(b, 4, uint64(clampUint32(e.DroppedAttributeCount)))
		b = closeMessage(b, at)
	}
	b = appendVarint(b, 12, uint64(clampUint32(s.DroppedEvents())))
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		var at int
		b, at = openMessage(b, 13)
		b = appendBytes(b, 1, ltid[:])
		b = appendBytes(b, 2, lsid[:])
		for _, kv := range l.Attributes {
			b = appendKeyValue(b, 4, kv)
		}
		b = appendVarint(b, 5, uint64(clampUint32(l.DroppedAttributeCount)))
		b = appendFixed32(b, 6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = closeMessage(b, at)
	}
	b = appendVarint(b, 14, uint64(clampUint32(s.DroppedLinks())))
	st := s.Status()
	var at int
	b, at = openMessage(b, 15)
	b = appendString(b, 2, st.Description)
	b = appendVarint(b, 3, uint64(statusCode(st.Code)))
	b = closeMessage(b, at)
	return appendFixed32(b, 16, spanFlags(sc.TraceFlags(), parent))
}

// spanKind is k's Span.SpanKind: the SDK numbers the kinds as OTLP does.
func spanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return tracepb.Span_SPAN_KIND_UNSPECIFIED
	}
	return tracepb.Span_SpanKind(k)
}

// statusCode is c's Status.StatusCode.
func statusCode(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	}
	return tracepb.Status_STATUS_CODE_UNSET
}

// spanFlags is OTLP's flags field: the W3C trace flags, and whether the
// parent (for a link: the linked span) is remote, which is always known.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	flags := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		flags |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return flags
}

func unixNano(ns int64) uint64 { return uint64(max(0, ns)) }

func clampUint32(v int) uint32 {
	if v < 0 {
		return 0
	}
	if int64(v) > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}

// appendKeyValue appends field num holding kv as a KeyValue message.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, at := openMessage(b, num)
	b = appendString(b, 1, string(kv.Key))
	b = appendAnyValue(b, 2, kv.Value)
	return closeMessage(b, at)
}

// appendAnyValue appends field num holding v as an AnyValue message.
func appendAnyValue(b []byte, num protowire.Number, v attribute.Value) []byte {
	b, at := openMessage(b, num)
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		b = protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		b = appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		b = appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		b = appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		b = appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		b = appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		var at int
		b, at = openMessage(b, 6)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, 1, kv)
		}
		b = closeMessage(b, at)
	case attribute.EMPTY:
	default:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, "INVALID")
	}
	return closeMessage(b, at)
}

// appendArray appends AnyValue's array_value holding vs, each made a
// value by value.
func appendArray[T any](b []byte, vs []T, value func(T) attribute.Value) []byte {
	b, at := openMessage(b, 5)
	for _, v := range vs {
		b = appendAnyValue(b, 1, value(v))
	}
	return closeMessage(b, at)
}

// openMessage appends the tag of field num holding a message and a
// one-byte length, to be set by closeMessage(b, at) once the message's
// fields are appended after it.
func openMessage(b []byte, num protowire.Number) (_ []byte, at int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return append(b, 0), len(b) + 1
}

// closeMessage sets the length of the message opened at at, moving its
// fields up when the length takes more than one byte.
func closeMessage(b []byte, at int) []byte {
	n := len(b) - at
	size := protowire.SizeVarint(uint64(n))
	if size > 1 {
		b = append(b, make([]byte, size-1)...)
		copy(b[at+size-1:], b[at:at+n])
	}
	protowire.AppendVarint(b[:at-1], uint64(n))
	return b
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}
