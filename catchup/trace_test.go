package catchup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// With tracing on, a pass is a span, and an event it stores carries that
// span's trace context, so the event's attempts join the pass's trace.
func TestACatchUpPassIsASpanAndItsEventsJoinItsTrace(t *testing.T) {
	t.Parallel()
	f := newFakeStripe(t)
	r, _ := stripeRigEvery(t, t.TempDir(), f, "1h")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r.tracer = tp.Tracer("test")
	f.add("evt_missed_traced", time.Now().Unix()-60)

	cu, _ := r.start()
	passes(t, cu, "st", 1)

	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "catch-up stripe" {
		t.Fatalf("spans %v, want one catch-up stripe", spans)
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["jethook.route"] != "st" || attrs["jethook.catch_up.recovered"] != "1" {
		t.Errorf("span attributes %v, want route st, 1 recovered", attrs)
	}
	e, _, err := r.store.Event(context.Background(), "evt_missed_traced", "st")
	if err != nil {
		t.Fatal(err)
	}
	sc := spans[0].SpanContext
	if !strings.Contains(e.Traceparent, sc.TraceID().String()+"-"+sc.SpanID().String()) {
		t.Errorf("stored traceparent %q, want the pass's span %s", e.Traceparent, sc.SpanID())
	}
}
