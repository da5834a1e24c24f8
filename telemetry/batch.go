package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the span processor jethook exports with. It keeps the
// guarantees of the SDK's BatchSpanProcessor, and its OTEL_BSP_* settings:
// a queue of at most OTEL_BSP_MAX_QUEUE_SIZE ended spans, which drops (and
// counts) a span that finds it full rather than wait; an export of up to
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans as soon as the queue holds that
// many, and of what it holds every OTEL_BSP_SCHEDULE_DELAY; each export
// bounded by OTEL_BSP_EXPORT_TIMEOUT; ForceFlush and Shutdown export
// every span ended before them. It differs in how a span is queued: the
// SDK's processor sends each span on a channel to its exporting goroutine,
// which wakes for every span; this one appends it to a slice under a lock
// and wakes that goroutine once a batch is full.
type batcher struct {
	exporter sdktrace.SpanExporter
	cfg      batchConfig

	mu       sync.Mutex
	queue    []sdktrace.ReadOnlySpan // oldest first, at most cfg.maxQueue
	stopped  bool                    // by Shutdown: spans are no longer queued
	dropped  int64                   // spans that found the queue full
	reported int64                   // of dropped, those already reported

	full     chan struct{}      // holds a token while the queue holds a batch
	flushes  chan chan struct{} // ForceFlush: export all, then close the channel
	stop     chan struct{}      // closed by Shutdown
	exited   chan struct{}      // closed when run has exported the last spans
	stopOnce sync.Once
	batch    []sdktrace.ReadOnlySpan // run's, the spans of one export
}

// batchConfig is the batch processor's settings, OTEL_BSP_*.
type batchConfig struct {
	maxQueue, maxBatch int
	delay, timeout     time.Duration // timeout 0: none
}

// The OTEL_BSP_* defaults of the specification, the SDK's.
const (
	defaultMaxQueue = sdktrace.DefaultMaxQueueSize
	defaultMaxBatch = sdktrace.DefaultMaxExportBatchSize
	defaultDelay    = sdktrace.DefaultScheduleDelay * time.Millisecond
	defaultTimeout  = sdktrace.DefaultExportTimeout * time.Millisecond
)

// newBatcher returns the span processor that exports to exporter, with
// the settings getenv gives: jethook's batcher, or the SDK's
// BatchSpanProcessor for what only the SDK's does (a setting of zero or
// less, or the SDK's own metrics, OTEL_GO_X_OBSERVABILITY). An invalid
// number is ignored for its default, as the SDK does.
func newBatcher(exporter sdktrace.SpanExporter, getenv func(string) string) sdktrace.SpanProcessor {
	cfg, ok := readBatchConfig(getenv)
	if !ok || strings.EqualFold(getenv("OTEL_GO_X_OBSERVABILITY"), "true") || strings.EqualFold(getenv("OTEL_GO_X_SELF_OBSERVABILITY"), "true") {
		return sdktrace.NewBatchSpanProcessor(exporter) // which reads OTEL_BSP_* itself
	}
	b := &batcher{
		exporter: exporter,
		cfg:      cfg,
		queue:    make([]sdktrace.ReadOnlySpan, 0, cfg.maxQueue),
		batch:    make([]sdktrace.ReadOnlySpan, 0, cfg.maxBatch),
		full:     make(chan struct{}, 1),
		flushes:  make(chan chan struct{}),
		stop:     make(chan struct{}),
		exited:   make(chan struct{}),
	}
	go b.run()
	return b
}

// readBatchConfig reads OTEL_BSP_*; ok is false when a setting is zero or
// less, which the batcher leaves to the SDK's processor.
func readBatchConfig(getenv func(string) string) (cfg batchConfig, ok bool) {
	num := func(key string, def int) int {
		v := getenv(key)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			otel.Handle(fmt.Errorf("%s=%q is not a number: using %d", key, v, def))
			return def
		}
		return n
	}
	cfg.maxQueue = num("OTEL_BSP_MAX_QUEUE_SIZE", defaultMaxQueue)
	cfg.maxBatch = num("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaultMaxBatch)
	delay := num("OTEL_BSP_SCHEDULE_DELAY", int(defaultDelay/time.Millisecond))
	timeout := num("OTEL_BSP_EXPORT_TIMEOUT", int(defaultTimeout/time.Millisecond))
	if cfg.maxQueue <= 0 || cfg.maxBatch <= 0 || delay <= 0 {
		return cfg, false
	}
	if cfg.maxBatch > cfg.maxQueue { // as the SDK does
		cfg.maxBatch = min(defaultMaxBatch, cfg.maxQueue)
	}
	cfg.delay = time.Duration(delay) * time.Millisecond
	cfg.timeout = max(time.Duration(timeout)*time.Millisecond, 0)
	return cfg, true
}

// OnStart does nothing: spans are queued when they end.
func (*batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export if it is sampled, or drops and counts it if
// the queue is full.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if len(b.queue) == b.cfg.maxQueue {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) >= b.cfg.maxBatch
	b.mu.Unlock()
	if full {
		select {
		case b.full <- struct{}{}:
		default: // run is told already
		}
	}
}

// run exports: a batch as soon as the queue holds one, everything it
// holds when the delay has passed since the last export, on ForceFlush
// and on Shutdown, after which it returns.
func (b *batcher) run() {
	defer close(b.exited)
	timer := time.NewTimer(b.cfg.delay)
	defer timer.Stop()
	for {
		select {
		case <-b.full:
			b.export(false)
		case <-timer.C:
			b.export(true)
			b.reportDropped()
		case done := <-b.flushes:
			b.export(true)
			close(done)
		case <-b.stop:
			b.export(true)
			b.reportDropped()
			return
		}
		timer.Reset(b.cfg.delay)
	}
}

// export exports the spans queued when it is called, a batch at a time:
// all of them, or only full batches (spans queued meanwhile wait for the
// next call, so that a flush or a shutdown is not held up by a steady
// stream of new ones). Errors go to the OpenTelemetry error handler, as
// the SDK's processor sends them; the exporter retries as its settings
// say.
func (b *batcher) export(all bool) {
	left := -1 // spans of the queue at the call still to export; -1: not read yet
	for {
		b.mu.Lock()
		if left < 0 {
			left = len(b.queue)
		}
		n := min(len(b.queue), left)
		if n == 0 || !all && n < b.cfg.maxBatch {
			b.mu.Unlock()
			return
		}
		n = min(n, b.cfg.maxBatch)
		left -= n
		b.batch = append(b.batch[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:]) // let the exported spans go
		b.queue = b.queue[:rest]
		b.mu.Unlock()

		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if b.cfg.timeout > 0 {
			ctx, cancel = context.WithTimeoutCause(ctx, b.cfg.timeout, errors.New("span export timed out (OTEL_BSP_EXPORT_TIMEOUT)"))
		}
		if err := b.exporter.ExportSpans(ctx, b.batch); err != nil {
			otel.Handle(err)
		}
		cancel()
		clear(b.batch)
	}
}

// reportDropped tells the OpenTelemetry error handler how many spans
// found the queue full since it last told: at most once a delay.
func (b *batcher) reportDropped() {
	b.mu.Lock()
	n := b.dropped - b.reported
	b.reported = b.dropped
	b.mu.Unlock()
	if n > 0 {
		otel.Handle(fmt.Errorf("%d spans dropped: the export queue of %d spans (OTEL_BSP_MAX_QUEUE_SIZE) was full", n, b.cfg.maxQueue))
	}
}

// ForceFlush exports every span that ended before it, or returns ctx's
// error if ctx ends first.
func (b *batcher) ForceFlush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan struct{})
	select {
	case b.flushes <- done:
	case <-b.exited: // shut down: nothing is left to export
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops queueing spans, exports those queued and shuts the
// exporter down; it returns ctx's error if ctx ends first. Only the first
// call does anything.
func (b *batcher) Shutdown(ctx context.Context) error {
	var err error
	b.stopOnce.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.exited:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		err = b.exporter.Shutdown(ctx)
	})
	return err
}
