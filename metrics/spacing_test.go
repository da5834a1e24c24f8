package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// The exemplar spacing of a destination a reload removes goes with it:
// destinations added and removed over many reloads leave nothing behind,
// while those still configured keep theirs.
func TestARemovedDestinationLeavesNoExemplarSpacingBehind(t *testing.T) {
	t.Parallel()
	m := New(prometheus.NewRegistry())
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	for reload := range 50 {
		dest := fmt.Sprintf("app-%d", reload)
		m.Attempt("shop", dest, "delivered", 200, time.Millisecond, sampled)
		m.Delivered("shop", dest, time.Second, sampled)
		m.Removed("shop", dest)
	}
	m.Attempt("shop", "kept", "delivered", 200, time.Millisecond, sampled)
	m.Attempt("shop", "unsampled", "delivered", 200, time.Millisecond, trace.SpanContext{})

	var left []destKey
	m.spacings.Range(func(k, _ any) bool {
		left = append(left, k.(destKey))
		return true
	})
	if len(left) != 1 || left[0] != (destKey{"shop", "kept"}) {
		t.Errorf("exemplar spacing kept for %v, want only shop/kept", left)
	}
}
