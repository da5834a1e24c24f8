// Package otlptest is an OTLP/HTTP trace receiver for tests: an
// httptest.Server that decodes the protobuf export requests an OpenTelemetry
// SDK sends to /v1/traces and keeps their spans, so a test can check the
// traces jethook exports as a collector would receive them.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex as traceparent writes them and
// its attributes as strings (an array's elements joined by commas).
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Error                     bool // status code ERROR
	Attributes                map[string]string
	Service                   string // the resource's service.name
}

// Receiver is a running OTLP/HTTP trace receiver. URL is its base URL,
// for OTEL_EXPORTER_OTLP_ENDPOINT.
type Receiver struct {
	*httptest.Server

	mu     sync.Mutex
	spans  []Span
	header http.Header
}

// Start starts a receiver, closed when the test ends.
func Start(t testing.TB) *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range ex.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					TraceID:    hex.EncodeToString(s.GetTraceId()),
					SpanID:     hex.EncodeToString(s.GetSpanId()),
					ParentID:   hex.EncodeToString(s.GetParentSpanId()),
					Name:       s.GetName(),
					Kind:       s.GetKind(),
					Error:      s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Attributes: attrs(s.GetAttributes()),
					Service:    service,
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.header = req.Header.Clone()
	r.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrs(kvs []*common.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *common.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *common.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *common.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *common.AnyValue_ArrayValue:
		var vs []string
		for _, e := range x.ArrayValue.GetValues() {
			vs = append(vs, value(e))
		}
		return strings.Join(vs, ",")
	default:
		return v.String()
	}
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Header returns the headers of the last export request received.
func (r *Receiver) Header() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.header.Clone()
}

// Await polls until match returns true for the spans received, or fails
// the test after within.
func (r *Receiver) Await(t testing.TB, within time.Duration, what string, match func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		spans := r.Spans()
		if match(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not received within %s; %d spans: %+v", what, within, len(spans), spans)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
