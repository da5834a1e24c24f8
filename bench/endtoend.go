package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// EndToEndResult compares delivering Events webhooks to a loopback backend
// through jethook with posting them to the same backend directly, at the
// same client concurrency.
type EndToEndResult struct {
	Events int
	// Direct is the client posting straight to the backend.
	Direct Load
	// Ingest is the client posting to jethook while the forwarder delivers.
	Ingest Load
	// Delivered counts the events the backend received through jethook,
	// each once; Repeats counts the deliveries beyond the first (delivery
	// is at least once).
	Delivered, Repeats int
	// Elapsed runs from the first post to jethook to the moment the backend
	// has received every event; CPU is the process's CPU time over it.
	Elapsed, CPU time.Duration
}

// PerSecond is the rate of events delivered through jethook.
func (r EndToEndResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Delivered) / r.Elapsed.Seconds()
}

// CPUPerEvent is CPU spread over the events delivered through jethook.
func (r EndToEndResult) CPUPerEvent() time.Duration {
	if r.Delivered == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Delivered)
}

// EndToEnd posts o.Events webhooks directly to a backend that answers 200,
// then the same number through jethook (embedded store, ingress and
// forwarder all running), and waits until the backend has every one of them.
func EndToEnd(ctx context.Context, o Options) (EndToEndResult, error) {
	o.applyDefaults()
	r := EndToEndResult{Events: o.Events}

	direct := newBackend(o.Events)
	s, err := listen(direct)
	if err != nil {
		return r, err
	}
	r.Direct = run(ctx, s.URL+hookPath, o.Clients, o.Events, 0, o.BodySize)
	s.close()
	if err := check("direct posts", r.Direct); err != nil {
		return r, err
	}

	be := newBackend(o.Events)
	s, err = listen(be)
	if err != nil {
		return r, err
	}
	defer s.close()
	cfg, err := config(s.URL+hookPath, o.DestConcurrency)
	if err != nil {
		return r, err
	}
	st, err := startStack(ctx, o, cfg, false, true)
	if err != nil {
		return r, fmt.Errorf("start jethook: %w", err)
	}
	defer st.close()

	start, cpu0 := time.Now(), cpuTime()
	r.Ingest = run(ctx, st.ingress.URL+hookPath, o.Clients, o.Events, 0, o.BodySize)
	if err := check("posts to jethook", r.Ingest); err != nil {
		return r, err
	}
	timeout := time.NewTimer(o.DeliveryTimeout)
	defer timeout.Stop()
	select {
	case <-be.done:
		r.Elapsed, r.CPU = be.doneAt.Sub(start), cpuTime()-cpu0
	case <-ctx.Done():
		return r, ctx.Err()
	case <-timeout.C:
	}
	r.Delivered, r.Repeats = int(be.first.Load()), int(be.repeats.Load())
	if r.Delivered < o.Events {
		return r, fmt.Errorf("backend received %d of %d events within %s", r.Delivered, o.Events, o.DeliveryTimeout)
	}
	return r, nil
}

// backend answers 200 to every request after reading its body, and counts
// the events it receives by their sequence header: first arrivals and
// repeats. done closes when all want events have arrived.
type backend struct {
	seen    []atomic.Bool
	first   atomic.Int64
	repeats atomic.Int64
	done    chan struct{}
	once    sync.Once
	doneAt  time.Time // set before done closes
}

func newBackend(want int) *backend {
	return &backend{seen: make([]atomic.Bool, want), done: make(chan struct{})}
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	seq, err := strconv.Atoi(r.Header.Get(seqHeader))
	if err != nil || seq < 0 || seq >= len(b.seen) {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if b.seen[seq].Swap(true) {
		b.repeats.Add(1)
	} else if int(b.first.Add(1)) == len(b.seen) {
		b.once.Do(func() {
			b.doneAt = time.Now()
			close(b.done)
		})
	}
	w.WriteHeader(http.StatusOK)
}
