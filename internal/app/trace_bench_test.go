package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
	"github.com/jethook/jethook/telemetry"
)

// tracingMode is one way a benchmark runs jethook: tracing off, or on
// with every span exported over OTLP/HTTP (the provider telemetry.Setup
// builds) to a collector that discards what it gets. sampled is the flag of the traceparent the webhooks
// arrive with: with the SDK's default sampler (parent based), a sender's
// unsampled trace is not recorded, which should cost next to nothing.
type tracingMode struct {
	name     string
	provider *sdktrace.TracerProvider // nil: tracing off
	sampled  bool
}

func (m tracingMode) tracer() trace.Tracer {
	if m.provider == nil {
		return nil
	}
	return m.provider.Tracer("jethook")
}

// traceparent is the header the benchmarks' webhooks arrive with.
func (m tracingMode) traceparent() string {
	if m.sampled {
		return "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	}
	return "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
}

// flush exports the spans the provider holds, so that they are counted
// where they were made.
func (m tracingMode) flush(b *testing.B) {
	if m.provider == nil {
		return
	}
	if err := m.provider.ForceFlush(context.Background()); err != nil {
		b.Fatal(err)
	}
}

func tracingModes(b *testing.B) []tracingMode {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(sink.Close)
	// The provider jethook builds, from the OTEL_* variables alone.
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_TRACES_SAMPLER"} {
		b.Setenv(k, "")
	}
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
	tp, err := telemetry.Setup(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return []tracingMode{{name: "off", sampled: true}, {name: "on", provider: tp, sampled: true}, {name: "unsampled", provider: tp}}
}

// benchApp is jethook on one route, delivering to backend, its destination
// paused.
func benchApp(b *testing.B, backend string, m tracingMode) *app.App {
	a, err := app.New(context.Background(), parse(b, oneRoute, backend),
		app.Options{Store: storetest.Open(b, store.Options{}), FetchWait: 100 * time.Millisecond, Tracer: m.tracer()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(time.Second) })
	if err := a.Forwarder.Pause("shop", "app"); err != nil {
		b.Fatal(err)
	}
	return a
}

// ingest sends webhook i of a benchmark to a's ingress.
func ingest(b *testing.B, a *app.App, m tracingMode, i int, tag any) {
	r := httptest.NewRequest(http.MethodPost, "/hooks/shop", strings.NewReader(fmt.Sprintf(`{"n":%d,"p":%p,"b":"%s"}`, i, tag, benchBody)))
	r.Header.Set("Traceparent", m.traceparent())
	w := httptest.NewRecorder()
	a.Ingress.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

var benchBody = strings.Repeat("x", 1000)

// BenchmarkIngressTracing is one webhook through the ingress into the
// store (the destination paused), with tracing off, on, and on with the
// sender's trace unsampled. Compare the cpu-µs/op (the process's CPU time
// per webhook, the collector's included), each mode in a process of its
// own (the second of two runs in one process is the cheaper):
//
//	go test -c ./internal/app/
//	./app.test -test.run '^$' -test.bench 'IngressTracing/off$' -test.benchtime 20000x -test.benchmem
//	./app.test -test.run '^$' -test.bench 'IngressTracing/on$' -test.benchtime 20000x -test.benchmem
func BenchmarkIngressTracing(b *testing.B) {
	for _, m := range tracingModes(b) {
		b.Run(m.name, func(b *testing.B) {
			a := benchApp(b, "http://127.0.0.1:9", m)
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					ingest(b, a, m, i, pb)
				}
			})
			m.flush(b)
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkDeliveryTracing is one webhook delivered, from the store to a
// backend that answers 200, in the modes of BenchmarkIngressTracing: b.N
// webhooks are stored with the destination paused, then it is resumed and
// the CPU time until the backend has them all is counted, the export of
// their attempt spans included.
func BenchmarkDeliveryTracing(b *testing.B) {
	for _, m := range tracingModes(b) {
		b.Run(m.name, func(b *testing.B) {
			var got atomic.Int64
			backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				got.Add(1)
			}))
			b.Cleanup(backend.Close)
			a := benchApp(b, backend.URL, m)
			b.StopTimer()
			for i := range b.N {
				ingest(b, a, m, i, &got)
			}
			m.flush(b)
			b.StartTimer()
			cpu0 := cpuTime(b)
			if err := a.Forwarder.Resume("shop", "app"); err != nil {
				b.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Minute)
			for got.Load() < int64(b.N) {
				if time.Now().After(deadline) {
					b.Fatalf("the backend got %d of %d webhooks in 5 minutes", got.Load(), b.N)
				}
				time.Sleep(10 * time.Millisecond)
			}
			m.flush(b)
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system: under
// load from other processes it varies less than the wall time per op.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
