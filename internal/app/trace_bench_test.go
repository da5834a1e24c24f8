package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// BenchmarkIngressTracing is one webhook through the ingress into the
// store (the destination paused), with tracing off and with every request
// traced and exported over OTLP/HTTP to a collector that discards what it
// gets. Compare the two cpu-µs/op (the process's CPU time per webhook,
// the collector's included):
//
//	go test -run '^$' -bench IngressTracing -benchmem -count 5 ./internal/app/
func BenchmarkIngressTracing(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(sink.Close)
	for _, on := range []bool{false, true} {
		name := "off"
		var tracer trace.Tracer
		if on {
			name = "on"
			exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(sink.URL+"/v1/traces"))
			if err != nil {
				b.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			tracer = tp.Tracer("jethook")
		}
		b.Run(name, func(b *testing.B) {
			a, err := app.New(context.Background(), parse(b, `
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "${BACKEND}/shop", slow_start: 0s}
`, "http://127.0.0.1:9"), app.Options{Store: storetest.Open(b, store.Options{}), FetchWait: 100 * time.Millisecond, Tracer: tracer})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { a.Close(time.Second) })
			if err := a.Forwarder.Pause("shop", "app"); err != nil {
				b.Fatal(err)
			}
			body := strings.Repeat("x", 1000)
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					r := httptest.NewRequest(http.MethodPost, "/hooks/shop", strings.NewReader(fmt.Sprintf(`{"n":%d,"p":%p,"b":"%s"}`, i, pb, body)))
					r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
					w := httptest.NewRecorder()
					a.Ingress.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
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
