package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jethook/jethook/internal/procs"
)

// EndToEndResult compares delivering Events webhooks to a loopback backend
// through jethook with posting them to the same backend directly, at the
// same client concurrency, in two ways: with the posts and the deliveries
// running at once (the pipeline's sustained rate), and from a backlog
// jethook already stored (the forwarder alone, as a recovering backend
// sees it).
type EndToEndResult struct {
	Events int
	// Direct is the client posting straight to the backend.
	Direct Measurement
	// Sustained has the client posting to jethook while the forwarder
	// delivers; Sustained.Ingest is those posts.
	Sustained Delivery
	// Drain delivers a backlog of Events webhooks posted while the
	// destination was paused; Drain.Ingest is those posts.
	Drain Delivery
}

// Delivery is one pass of Events webhooks through jethook to the backend.
type Delivery struct {
	Ingest Measurement
	// Delivered counts the events the backend received, each once;
	// Repeats counts the deliveries beyond the first (delivery is at least
	// once).
	Delivered, Repeats int
	// Elapsed runs from the first post (Sustained) or from the
	// destination's resume (Drain) to the moment the backend has received every event;
	// CPU is the process's CPU time over it.
	Elapsed, CPU time.Duration
}

// PerSecond is the rate of events delivered.
func (d Delivery) PerSecond() float64 {
	if d.Elapsed <= 0 {
		return 0
	}
	return float64(d.Delivered) / d.Elapsed.Seconds()
}

// CPUPerEvent is CPU spread over the events delivered.
func (d Delivery) CPUPerEvent() time.Duration {
	if d.Delivered == 0 {
		return 0
	}
	return d.CPU / time.Duration(d.Delivered)
}

// EndToEnd posts o.Events webhooks directly to a backend that answers 200,
// then the same number through jethook (embedded store, ingress and
// forwarder all running) and waits until the backend has every one of
// them, then posts o.Events more to a fresh jethook whose forwarder is not
// running yet, starts it, and waits again.
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
	if r.Sustained, err = deliver(ctx, o, false, "", nil); err != nil {
		return r, fmt.Errorf("sustained: %w", err)
	}
	if r.Drain, err = deliver(ctx, o, true, "", o.DrainProfile); err != nil {
		return r, fmt.Errorf("drain: %w", err)
	}
	return r, nil
}

// deliver runs o.Events webhooks through a fresh jethook to a fresh
// backend: posted while the forwarder delivers, or, with backlog, all
// posted while the destination is paused, then delivered once it resumes.
// A script, if not empty, is the destination's transform. A profile, if not
// nil, gets a CPU profile of the drain of the backlog.
func deliver(ctx context.Context, o Options, backlog bool, script string, profile io.Writer) (Delivery, error) {
	var d Delivery
	be := newBackend(o.Events)
	s, err := listen(be)
	if err != nil {
		return d, err
	}
	defer s.close()
	cfg, err := config(s.URL+hookPath, o.DestConcurrency)
	if err != nil {
		return d, err
	}
	withTransform(cfg, script)
	st, err := startStack(ctx, o, cfg, false, true)
	if err != nil {
		return d, fmt.Errorf("start jethook: %w", err)
	}
	defer st.close()
	if backlog {
		// The destination's consumer exists, and nothing is delivered
		// until it resumes.
		if err := st.pause(); err != nil {
			return d, err
		}
	}

	start, cpu0 := time.Now(), procs.CPUTime()
	d.Ingest = run(ctx, st.ingress.URL+hookPath, o.Clients, o.Events, 0, o.BodySize)
	if err := check("posts to jethook", d.Ingest); err != nil {
		return d, err
	}
	if backlog {
		if profile != nil {
			if err := pprof.StartCPUProfile(profile); err != nil {
				return d, fmt.Errorf("drain profile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		start, cpu0 = time.Now(), procs.CPUTime()
		if err := st.resume(); err != nil {
			return d, err
		}
	}
	timeout := time.NewTimer(o.DeliveryTimeout)
	defer timeout.Stop()
	select {
	case <-be.done:
		d.Elapsed, d.CPU = be.doneAt.Sub(start), procs.CPUTime()-cpu0
		if profile != nil {
			pprof.StopCPUProfile()
		}
	case <-ctx.Done():
		return d, ctx.Err()
	case <-timeout.C:
	}
	d.Delivered, d.Repeats = int(be.first.Load()), int(be.repeats.Load())
	if d.Delivered < o.Events {
		return d, fmt.Errorf("backend received %d of %d events within %s", d.Delivered, o.Events, o.DeliveryTimeout)
	}
	return d, nil
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
