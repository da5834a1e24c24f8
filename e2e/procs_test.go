package e2e

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// A quiet jethook runs on one of the Go scheduler's processors, and takes
// the runtime's default back as soon as it gets busy (JETHOOK_ADAPTIVE_PROCS,
// on by default): the go_sched_gomaxprocs_threads gauge says which.
func TestAQuietJethookRunsOnOneProcessorAndABusyOneOnTheDefault(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: the default is one processor already")
	}
	t.Parallel()
	be := newBackend(t, healthy)
	jh := newProcess(t, policies(be.URL, fastRetry), nil)
	jh.start()
	procs := func() float64 {
		v, err := jh.counter("go_sched_gomaxprocs_threads")
		if err != nil {
			return 0
		}
		return v
	}
	testkit.Eventually(t, 30*time.Second, "one processor while quiet", func() bool { return procs() == 1 })

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var n atomic.Int64
	p := newPoster(jh.url("/hooks/crash"), t.Name())
	for range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = p.once(ctx, int(n.Add(1)))
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	testkit.Eventually(t, 60*time.Second, "more processors while busy", func() bool { return procs() >= 2 })
}
