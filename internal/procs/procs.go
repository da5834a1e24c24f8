// Package procs sizes the Go scheduler to jethook's work: one processor
// (GOMAXPROCS 1) while the process uses little CPU, the runtime's default
// (one per CPU it may use) as soon as it needs more than one can give.
//
// At a few hundred webhooks a second, each webhook wakes a dozen
// goroutines one after the other (the ingress, the store's, the
// forwarder's, the HTTP client's), and with a second processor idle the
// scheduler wakes a second thread to look for work each time, which finds
// none and sleeps again: on two CPUs, one processor takes 10–20 % off
// jethook's CPU per webhook from 20 to 500 webhooks a second, with no
// longer latency (docs/performance.md). Above about half a CPU of work
// the second processor pays for itself, and Run gives it back within a
// tick.
package procs

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// Thresholds of Run's governor.
const (
	// Tick is how often Run measures the CPU the process used.
	Tick = 50 * time.Millisecond
	// Up is the CPU used (in CPUs) above which one processor gives way
	// to the default at once: it is then over half busy, and a burst
	// would queue.
	Up = 0.6
	// Down is the CPU used below which, for DownAfter, the default gives
	// way to one processor. With the default it is measured with the
	// second processor's own cost, so it is well under Up.
	Down      = 0.45
	DownAfter = 2 * time.Second
)

// Governor decides the number of processors from the CPU the process
// used; it keeps no clock of its own.
type Governor struct {
	one   bool          // running on one processor
	quiet time.Duration // how long the process has used less than Down
}

// Next returns whether the process should run on one processor, given
// that it used cpus CPUs over the last interval of length over.
func (g *Governor) Next(cpus float64, over time.Duration) (one bool) {
	switch {
	case g.one && cpus > Up:
		g.one, g.quiet = false, 0
	case !g.one && cpus < Down:
		g.quiet += over
		if g.quiet >= DownAfter {
			g.one = true
		}
	case !g.one:
		g.quiet = 0
	}
	return g.one
}

// Run governs GOMAXPROCS until ctx ends, then gives the runtime its
// default back. It does nothing where the default is one processor or
// the process's CPU time cannot be read.
func Run(ctx context.Context, log *slog.Logger) {
	if runtime.GOMAXPROCS(0) < 2 || CPUTime() == 0 {
		return
	}
	defer runtime.SetDefaultGOMAXPROCS()
	var g Governor
	t := time.NewTicker(Tick)
	defer t.Stop()
	at, used := time.Now(), CPUTime()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		now, cpu := time.Now(), CPUTime()
		over := now.Sub(at)
		was := g.one
		one := g.Next(float64(cpu-used)/float64(over), over)
		at, used = now, cpu
		if one == was {
			continue
		}
		if one {
			runtime.GOMAXPROCS(1)
		} else {
			// The default follows the CPUs the process may use (its
			// cgroup's quota, its affinity) again, as before.
			runtime.SetDefaultGOMAXPROCS()
		}
		log.Debug("scheduler processors", "gomaxprocs", runtime.GOMAXPROCS(0))
	}
}
