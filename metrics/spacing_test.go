package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// The metrics of a destination a reload removes, the spacing of its
// exemplars among them, go with it: destinations added and removed over
// many reloads leave nothing behind, while those still configured keep
// theirs.
func TestARemovedDestinationLeavesNoExemplarSpacingBehind(t *testing.T) {
	t.Parallel()
	m := New(prometheus.NewRegistry())
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	for reload := range 50 {
		d := m.Destination("shop", fmt.Sprintf("app-%d", reload))
		d.Attempt("delivered", 200, time.Millisecond, sampled, time.Now())
		d.Delivered(time.Second, sampled)
		d.Remove()
	}
	m.Destination("shop", "kept").Attempt("delivered", 200, time.Millisecond, sampled, time.Now())

	var left []destKey
	m.dests.mu.Lock()
	for k := range m.dests.by {
		left = append(left, k)
	}
	m.dests.mu.Unlock()
	if len(left) != 1 || left[0] != (destKey{"shop", "kept"}) {
		t.Errorf("metrics kept for %v, want only shop/kept", left)
	}
}
