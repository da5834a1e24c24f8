package telemetry

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jethook/jethook/internal/testkit"
)

// recorder is a span exporter that keeps the names of the spans of each
// export, and blocks an export while its gate is held.
type recorder struct {
	gate     sync.RWMutex // held (Lock) by a test: exports wait
	mu       sync.Mutex
	batches  [][]string
	shutdown bool
	entered  chan struct{} // gets a token as each export starts
}

func newRecorder() *recorder { return &recorder{entered: make(chan struct{}, 100)} }

func (r *recorder) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	r.entered <- struct{}{}
	r.gate.RLock()
	defer r.gate.RUnlock()
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name()
	}
	r.mu.Lock()
	r.batches = append(r.batches, names)
	r.mu.Unlock()
	return nil
}

func (r *recorder) Shutdown(context.Context) error {
	r.mu.Lock()
	r.shutdown = true
	r.mu.Unlock()
	return nil
}

// sizes is the number of spans of each export so far.
func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n []int
	for _, b := range r.batches {
		n = append(n, len(b))
	}
	return n
}

func (r *recorder) exported() int {
	n := 0
	for _, s := range r.sizes() {
		n += s
	}
	return n
}

// batchEnv is a getenv with the OTEL_BSP_* settings kv gives.
func batchEnv(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// startBatcher returns a provider whose spans go through a batcher to rec,
// with the settings of env.
func startBatcher(t *testing.T, rec *recorder, env func(string) string) (*sdktrace.TracerProvider, *batcher) {
	t.Helper()
	sp := newBatcher(rec, env)
	b, ok := sp.(*batcher)
	if !ok {
		t.Fatalf("newBatcher gave %T, want jethook's batcher", sp)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, b
}

func endSpans(tp *sdktrace.TracerProvider, n int) {
	for i := range n {
		_, span := tp.Tracer("test").Start(context.Background(), fmt.Sprint("span ", i))
		span.End()
	}
}

func TestTheBatcherExportsAFullBatchAtOnceAndTheRestOnFlush(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	tp, _ := startBatcher(t, rec, batchEnv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4", "OTEL_BSP_SCHEDULE_DELAY", "3600000"))
	endSpans(tp, 11)
	testkit.Eventually(t, 5*time.Second, "two full batches exported", func() bool { return rec.exported() == 8 })
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rec.sizes()); got != "[4 4 3]" {
		t.Errorf("exports of %s spans, want [4 4 3]", got)
	}
}

func TestTheBatcherExportsWhatItHoldsWhenTheDelayHasPassed(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	tp, _ := startBatcher(t, rec, batchEnv("OTEL_BSP_SCHEDULE_DELAY", "20"))
	endSpans(tp, 3)
	testkit.Eventually(t, 5*time.Second, "the three spans exported without a flush", func() bool { return rec.exported() == 3 })
}

func TestTheBatcherDropsAndCountsSpansThatFindTheQueueFull(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	tp, b := startBatcher(t, rec, batchEnv("OTEL_BSP_MAX_QUEUE_SIZE", "2", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2", "OTEL_BSP_SCHEDULE_DELAY", "3600000"))
	rec.gate.Lock()
	endSpans(tp, 2) // a full batch: taken from the queue by an export, which waits
	<-rec.entered
	endSpans(tp, 5) // two fill the queue again, three find it full
	b.mu.Lock()
	got := b.dropped
	b.mu.Unlock()
	if got != 3 {
		t.Errorf("%d spans dropped, want 3", got)
	}
	rec.gate.Unlock()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.exported(); got != 4 {
		t.Errorf("%d spans exported, want 4", got)
	}
}

func TestTheBatcherExportsEverythingOnShutdownAndNothingAfter(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	tp, _ := startBatcher(t, rec, batchEnv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4", "OTEL_BSP_SCHEDULE_DELAY", "3600000"))
	endSpans(tp, 6)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	endSpans(tp, 2)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	shutdown := rec.shutdown
	rec.mu.Unlock()
	if got := fmt.Sprint(rec.sizes()); got != "[4 2]" || !shutdown {
		t.Errorf("exports of %s spans, exporter shut down %v; want [4 2], true", got, shutdown)
	}
}

func TestTheBatcherExportsOnlySampledSpans(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	sp := newBatcher(rec, batchEnv())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithSampler(recordOnly{}))
	endSpans(tp, 3)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.exported(); got != 0 {
		t.Errorf("%d spans recorded but not sampled were exported", got)
	}
}

// recordOnly records every span and samples none.
type recordOnly struct{}

func (recordOnly) ShouldSample(sdktrace.SamplingParameters) sdktrace.SamplingResult {
	return sdktrace.SamplingResult{Decision: sdktrace.RecordOnly}
}

func (recordOnly) Description() string { return "record only" }

func TestTheBatcherReadsTheBatchSettingsAsTheSDKDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		want batchConfig
	}{
		{"the defaults when nothing is set", nil, batchConfig{2048, 512, 5 * time.Second, 30 * time.Second}},
		{"every setting", []string{"OTEL_BSP_MAX_QUEUE_SIZE", "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "10", "OTEL_BSP_SCHEDULE_DELAY", "250", "OTEL_BSP_EXPORT_TIMEOUT", "1000"},
			batchConfig{100, 10, 250 * time.Millisecond, time.Second}},
		{"a batch larger than the queue is cut to it", []string{"OTEL_BSP_MAX_QUEUE_SIZE", "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1000"},
			batchConfig{100, 100, 5 * time.Second, 30 * time.Second}},
		{"a value that is not a number is the default", []string{"OTEL_BSP_SCHEDULE_DELAY", "soon"}, batchConfig{2048, 512, 5 * time.Second, 30 * time.Second}},
		{"an export timeout of zero is none", []string{"OTEL_BSP_EXPORT_TIMEOUT", "0"}, batchConfig{2048, 512, 5 * time.Second, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := readBatchConfig(batchEnv(tc.env...))
			if !ok || got != tc.want {
				t.Errorf("readBatchConfig = %+v, %v; want %+v, true", got, ok, tc.want)
			}
		})
	}
}

func TestWhatOnlyTheSDKsBatchProcessorDoesIsLeftToIt(t *testing.T) {
	t.Parallel()
	for _, env := range [][]string{
		{"OTEL_BSP_MAX_QUEUE_SIZE", "0"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-1"},
		{"OTEL_BSP_SCHEDULE_DELAY", "0"},
		{"OTEL_GO_X_OBSERVABILITY", "True"},
	} {
		sp := newBatcher(newRecorder(), batchEnv(env...))
		if _, ours := sp.(*batcher); ours {
			t.Errorf("with %s=%s the processor is jethook's, want the SDK's", env[0], env[1])
		}
		_ = sp.Shutdown(context.Background())
	}
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkBatchProcessor is one span started, given ten attributes and
// ended by each of 64 goroutines in turn, then queued and exported (to
// nowhere) by the SDK's BatchSpanProcessor or by jethook's batcher.
// Compare the cpu-µs/op, the process's CPU time per span (the exporting
// goroutine's and the scheduler's included), each in a process of its own:
//
//	go test -c ./telemetry/
//	./telemetry.test -test.run '^$' -test.bench 'BatchProcessor/sdk$' -test.benchtime 1000000x
//	./telemetry.test -test.run '^$' -test.bench 'BatchProcessor/jethook$' -test.benchtime 1000000x
func BenchmarkBatchProcessor(b *testing.B) {
	attrs := make([]attribute.KeyValue, 10)
	for i := range attrs {
		attrs[i] = attribute.Int(fmt.Sprint("a", i), i)
	}
	// A queue that a burst cannot fill: every span is exported by both.
	b.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1000000")
	for _, p := range []struct {
		name string
		new  func() sdktrace.SpanProcessor
	}{
		{"sdk", func() sdktrace.SpanProcessor { return sdktrace.NewBatchSpanProcessor(discard{}) }},
		{"jethook", func() sdktrace.SpanProcessor { return newBatcher(discard{}, os.Getenv) }},
	} {
		b.Run(p.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.new()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
			tracer := tp.Tracer("bench")
			b.ReportAllocs()
			b.SetParallelism(32) // 64 goroutines on 2 CPUs, as a loaded ingress runs
			cpu0 := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, span := tracer.Start(context.Background(), "span")
					span.SetAttributes(attrs...)
					span.End()
					runtime.Gosched() // as a handler goes back to its connection
				}
			})
			if err := tp.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
